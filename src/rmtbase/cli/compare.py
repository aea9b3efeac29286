"""``rmtbase compare DIR1 DIR2 … --out DIR``: layer profiles and flag fractions across scores.

The inputs are ``rmtbase score`` output folders (a folder holding several checkpoints or models
contributes each of them). Thin wrapper of :func:`rmtbase.report.compare.write_compare`.
"""

from __future__ import annotations

import sys
import time


def add_parser(sub):
    p = sub.add_parser(
        "compare", help="compare scored models: layer profiles and flag fractions",
        description=(
            "Compare rmtbase score output folders: layer profiles of lambda_max "
            "(self-normalised), NPR, spectral entropy and condition number over depth 0-1, each "
            "with the null band at that model's shape (seed 003, Figures 13-16), a table of "
            "per-model head-flag fractions, and report.html. Writes --out all or nothing."))
    p.add_argument("scores", nargs="+", metavar="DIR",
                   help="rmtbase score output folders (or their scores.nc)")
    p.add_argument("--out", default="./rmtbase-compare",
                   help="output folder (default ./rmtbase-compare)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    return p


def run(args) -> int:
    from ..report.compare import write_compare

    t0 = time.perf_counter()
    written = write_compare(args.scores, args.out, figures=not args.no_figures)
    print(written["summary.txt"].read_text(encoding="utf-8").split("\n\n", 1)[0])
    print(f"wrote {len(written)} files to {args.out} in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0
