"""``rmtbase compare DIR1 DIR2 … --out DIR``: layer profiles and flag fractions across scores
(``rmtbase score`` folders; :func:`rmtbase.report.compare.write_compare`)."""

from __future__ import annotations

import time

from . import _output as output


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
    output.add_out(p, "./rmtbase-compare")
    output.add_no_figures(p)
    output.add_overwrite(p, "rmtbase compare")
    p.add_argument("--sort-by", metavar="ORDER", default=None,
                   help="order of each model's heads in heads.csv: departure (default: each "
                        "profile axis's effect in units of its null band, root mean square), p "
                        "(head p), or one profile axis (e.g. alignment, symmetry)")
    output.add_json(p, "print one JSON document (per-model flag fractions, files written) on "
                       "stdout instead of the summary")
    return p


#: Start-up check (rmtbase.cli): an --out that is a file, refused before the imports.
early = output.early_out


def run(args) -> int:
    from ..files.output import check_output_dir
    from ..report.compare import KIND, write_compare

    check_output_dir(args.out, KIND, overwrite=args.overwrite)
    t0 = time.perf_counter()
    written = write_compare(args.scores, args.out, figures=not args.no_figures,
                            sort_by=args.sort_by)
    if args.json:
        from .json_documents import csv_rows, print_json, written_doc

        doc = written_doc("compare", args.out, written)
        doc["models"] = csv_rows(written.get("flags.csv"))
        print_json(doc)
    else:
        print(written["summary.txt"].read_text(encoding="utf-8").split("\n\n", 1)[0])
    output.say_wrote(written, args.out, t0, report=True)
    return 0
