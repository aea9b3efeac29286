"""The output options the writing sub-commands share (``--out``, ``--overwrite``, ``--json``,
``--no-figures``, ``--quiet``), one wording each, and the closing line on stderr (``wrote N
files to OUT in T s``); the folder is checked by :func:`rmtbase.files.output.check_output_dir`."""

from __future__ import annotations

import os
import sys
import time


def add_out(p, default, shown: str | None = None, more: str = "") -> None:
    """``--out`` (default ``default``, shown in the help as ``shown`` when given)."""
    p.add_argument("--out", default=default,
                   help=f"output folder (default {shown or default}){more}")


def add_overwrite(p, what: str, more: str = "", *, help: str | None = None) -> None:
    """``--overwrite``: replace an earlier ``what`` output in --out (``help``: another wording)."""
    p.add_argument("--overwrite", action="store_true",
                   help=help or f"replace an earlier {what} output in --out (without it an "
                                f"existing output is refused{more})")


def early_out(args) -> None:
    """A command's ``early`` check of ``--out``: an existing path that is not a folder is refused
    at start-up."""
    if getattr(args, "out", None) is not None:
        from ..files.output import check_output_path

        check_output_path(args.out)


def add_json(p, help: str) -> None:
    """``--json``: one JSON document on stdout, as ``help`` says."""
    p.add_argument("--json", action="store_true", help=help)


def add_no_figures(p, help: str = "skip the PNG figures") -> None:
    p.add_argument("--no-figures", action="store_true", help=help)


def add_quiet(p) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress output")


def say_wrote(written, out, t0: float, *, report: bool = False) -> None:
    """``wrote N files to OUT in T s`` on stderr, T counted from ``t0`` (``time.perf_counter``);
    with ``report``, ``; open OUT/report.html`` where a report.html was written. A line over
    200 characters (a long OUT) is said on three: the count, OUT alone, the page to open."""
    from ..report.line_width import MAX_LINE

    page = report and any(str(k).endswith("report.html") for k in written)
    took = f"in {time.perf_counter() - t0:.1f} s"
    where = f"; open {os.path.join(out, 'report.html')}" if page else ""
    line = f"wrote {len(written)} files to {out} {took}{where}"
    if len(line) > MAX_LINE:
        line = (f"wrote {len(written)} files {took} to\n  {out}"
                + ("\nopen report.html in it" if page else ""))
    print(line, file=sys.stderr)
