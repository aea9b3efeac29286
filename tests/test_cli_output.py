"""The writing sub-commands' shared output side (rmtbase.cli._output): one wording of --out and
--overwrite, and the closing ``wrote N files to OUT in T s`` line on stderr."""

from __future__ import annotations

import os
import re
import time

import pytest

from rmtbase.cli import build_parser
from rmtbase.cli._output import say_wrote


def _helps(command: str) -> dict:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {a.dest: a.help for a in sub.choices[command]._actions}


def test_wrote_line(capsys):
    t0 = time.perf_counter()
    say_wrote({"scores.nc": 1, "report.html": 2}, "out/x", t0)
    say_wrote({"scores.nc": 1, "report.html": 2}, "out/x", t0, report=True)
    say_wrote({"probe.nc": 1}, "out/y", t0, report=True)  # no report.html: no pointer
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"wrote 2 files to out/x in \d+\.\d s", lines[0])
    assert re.fullmatch(r"wrote 2 files to out/x in \d+\.\d s; open "
                        + re.escape(os.path.join("out/x", "report.html")), lines[1])
    assert re.fullmatch(r"wrote 1 files to out/y in \d+\.\d s", lines[2])
    long = "/tmp/" + "d" * 150 + "/out"  # the line would pass 200 characters: OUT alone
    say_wrote({"scores.nc": 1, "report.html": 2}, long, t0, report=True)
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"wrote 2 files in \d+\.\d s to", lines[0])
    assert lines[1:] == [f"  {long}", "open report.html in it"]


@pytest.mark.parametrize("command, what", [("score", "rmtbase score"),
                                           ("probe", "rmtbase probe"),
                                           ("compare", "rmtbase compare"),
                                           ("combine", "rmtbase score or combine")])
def test_one_wording_of_overwrite_and_out(command, what):
    h = _helps(command)
    assert h["overwrite"].startswith(f"replace an earlier {what} output in --out (without it "
                                     "an existing output is refused")
    assert h["out"].startswith("output folder (default ")
