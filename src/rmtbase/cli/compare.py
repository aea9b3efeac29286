"""``rmtbase compare DIR1 DIR2 … --out DIR``: layer profiles and flag fractions across scores.

The inputs are ``rmtbase score`` output folders (a folder holding several checkpoints or models
contributes each of them). Thin wrapper of :func:`rmtbase.report.compare.write_compare`.
"""

from __future__ import annotations

import os
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
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier rmtbase compare output in --out (without it an "
                        "existing output is refused)")
    p.add_argument("--sort-by", metavar="ORDER", default=None,
                   help="order of each model's heads in heads.csv: departure (default: each "
                        "profile axis's effect in units of its null band, root mean square), p "
                        "(head p), or one profile axis (e.g. alignment, symmetry)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (per-model flag fractions, files written) on "
                        "stdout instead of the summary")
    return p


def run(args) -> int:
    from ..files.output import check_output_dir
    from ..report.compare import KIND, write_compare

    check_output_dir(args.out, KIND, overwrite=args.overwrite)
    t0 = time.perf_counter()
    written = write_compare(args.scores, args.out, figures=not args.no_figures,
                            sort_by=args.sort_by)
    if args.json:
        from ._summary import csv_rows, print_json, written_doc

        doc = written_doc("compare", args.out, written)
        doc["models"] = csv_rows(written.get("flags.csv"))
        print_json(doc)
    else:
        print(written["summary.txt"].read_text(encoding="utf-8").split("\n\n", 1)[0])
    report = (f"; open {os.path.join(args.out, 'report.html')}"
              if "report.html" in written else "")
    print(f"wrote {len(written)} files to {args.out} in {time.perf_counter() - t0:.1f} s{report}",
          file=sys.stderr)
    return 0
