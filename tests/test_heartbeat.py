"""No silence longer than the progress interval (30 s; ``$RMTBASE_PROGRESS_INTERVAL``) on
stderr, on a terminal or in a log (:func:`rmtbase.progress.heartbeat`): a stage that no bar
counts (a JAX compile, the profile null's growth, the report) said nothing for minutes in a
log; now ``rmtbase: still working…`` names the bar under way or the last line said, with the
CPU spent so far. The interval is made short here; nothing is timed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from rmtbase.progress import heartbeat, message, progress_bar

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _wait_for(buf: io.StringIO, text: str, limit: float = 30.0) -> None:
    end = time.monotonic() + limit
    while text not in buf.getvalue() and time.monotonic() < end:
        time.sleep(0.05)


def test_a_silent_block_gets_a_line_naming_the_last_thing_said():
    buf = io.StringIO()
    message("rmtbase: drawing the profile null", stream=buf)
    with heartbeat(every=0.2, stream=buf):
        _wait_for(buf, "still working")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "rmtbase: drawing the profile null"
    assert lines[1].startswith("rmtbase: still working after 'drawing the profile null' (")
    assert lines[1].endswith(" CPU-s so far)")


def test_a_stuck_bar_is_named_with_its_count():
    buf = io.StringIO()
    with progress_bar(10, desc="scoring layers", unit="layer", stream=buf) as bar:
        bar.update(3)
        with heartbeat(every=0.2, stream=buf):
            _wait_for(buf, "still working")
    assert "rmtbase: still working: scoring layers 3/10 (" in buf.getvalue()


def test_nothing_when_disabled_or_after_the_block():
    buf = io.StringIO()
    with heartbeat(enabled=False, every=0.05, stream=buf):
        time.sleep(0.3)
    with heartbeat(every=0.05, stream=buf):
        pass
    time.sleep(0.3)
    assert buf.getvalue() == ""


def test_the_executable_is_never_silent_for_long(tmp_path):
    """``rmtbase baseline`` with a 0.3 s interval: its compile and draws are punctuated by
    heartbeat lines; with ``--no-progress``, none."""
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_CACHE=str(tmp_path / "cache"),
               RMTBASE_NO_JIT_CACHE="1", RMTBASE_PROGRESS_INTERVAL="0.3")
    argv = [sys.executable, "-m", "rmtbase", "baseline", "--d", "16", "--dh", "4", "--draws",
            "10", "--stats", "spectral", "--seed", "3"]
    r = subprocess.run([*argv, "--out", str(tmp_path / "a.nc")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "rmtbase: still working" in r.stderr, r.stderr
    r = subprocess.run([*argv, "--no-progress", "--out", str(tmp_path / "b.nc")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "still working" not in r.stderr, r.stderr
