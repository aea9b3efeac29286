"""``rmtbase constants [--digits N] [--json]``: the registry of citable analytic constants
(:func:`rmtbase.analytic.constants.constants`), each a decimal string of N significant digits
(1 ≤ N ≤ 1000), correctly rounded and confirmed at higher working precision; cached."""

from __future__ import annotations

import argparse
import sys

from ._common import positive_int


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "constants", help="citable analytic constants to 1..1000 digits",
        description="Print the analytic constants (Weibull anchor, noise optimum, Gaussian and "
                    "half-normal references, Fuss-Catalan edge, ...) with their definitions and "
                    "references; values are correctly rounded decimal strings of N significant "
                    "digits, each confirmed by a second evaluation with more working digits.")
    p.add_argument("--digits", type=positive_int, default=15,
                   help="significant digits, 1..1000 (default 15; 1000 take about 2.5 minutes "
                        "the first time, then come from the user cache)")
    p.add_argument("--json", action="store_true",
                   help="JSON object keyed by name: {value, definition, reference}")
    p.add_argument("--no-progress", "--quiet", dest="no_progress", action="store_true",
                   help="no progress lines on stderr")
    return p


def run(args: argparse.Namespace) -> int:
    from ..analytic.constants import constants

    table = constants(args.digits, progress=not args.no_progress)
    if args.json:
        from ..files.strict_json import dumps
        from ._common import json_schema

        doc = {"schema": json_schema("constants"), **table}
        sys.stdout.write(dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return 0
    wn = max(len(k) for k in table)
    wv = max(len(v["value"]) for v in table.values())
    for name, row in table.items():
        print(f"{name:<{wn}}  {row['value']:<{wv}}  {row['definition']}  [{row['reference']}]")
    return 0
