"""One progress and message channel (rmtbase.progress).

A message (an error, a warning, ``rmtbase: interrupted``) ends the line of a live progress
bar first, so it starts at column 0 on a terminal, and nothing is drawn after a command's
last message; when stderr is not a terminal, progress is plain lines (no carriage return);
the null draws of a first contact (a shape whose null tables and profile null are not
shipped) say which stage runs and how many of its draws are done.

Column 0 is read from the bytes as a terminal shows them: the text written since the last
carriage return or newline, ANSI escape sequences left out.
"""

from __future__ import annotations

import io
import os
import re
import select
import signal
import subprocess
import sys
import time
import warnings

import pytest

from rmtbase import progress, reporters

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _column(text: str, at: int) -> int:
    """The terminal column where ``text[at]`` is drawn (carriage return: column 0)."""
    before = _ANSI.sub("", text[:at])
    cut = max(before.rfind("\r"), before.rfind("\n"))
    return len(before) - cut - 1


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_final_message_ends_the_bar_line_and_nothing_is_drawn_after():
    tty = _Tty()
    bar = progress.progress_bar(10, desc="scoring layers", unit="layer", stream=tty)
    bar.update(3)
    progress.message("rmtbase: error: broken", final=True, stream=tty)
    bar.update(1)
    bar.close()
    out = tty.getvalue()
    at = out.index("rmtbase: error: broken")
    assert "scoring layers" in out[:at]  # the bar was drawn
    assert _column(out, at) == 0, repr(out)
    assert out[at:] == "rmtbase: error: broken\n", repr(out)  # not drawn again after it
    assert bar not in reporters.LIVE


def test_a_warning_ends_the_bar_line_and_the_bar_goes_on_below():
    tty = _Tty()
    with progress.progress_bar(10, desc="rmtbase baseline", stream=tty) as bar:
        bar.update(2)
        progress.show_warning(RuntimeWarning("rmtbase: could not cache"), RuntimeWarning,
                              "x.py", 1, file=tty)
        at = tty.getvalue().index("could not cache")
        line_start = tty.getvalue().rfind("\n", 0, at) + 1
        assert _column(tty.getvalue(), line_start) == 0, repr(tty.getvalue())
        assert "rmtbase baseline" in tty.getvalue()[at:]  # drawn again below the warning
    assert bar not in reporters.LIVE


def test_log_lines_are_plain_lines_and_a_final_message_stops_them():
    log = io.StringIO()
    bar = reporters.LogLines(4, "rmtbase baseline", "draw", stream=log, interval=0,
                            clock=lambda: 0.0)
    bar.update(1)
    progress.message("rmtbase: interrupted", final=True, stream=log)
    bar.update(1)
    bar.close()
    assert log.getvalue() == ("rmtbase baseline: 1/4 draws (25%), 0 s elapsed\n"
                              "rmtbase: interrupted\n")


def test_cpu_every_reports_between_updates():
    """A reporter with ``cpu_every`` writes a line once the process has used that much CPU,
    with no update (a long compile); the CPU is burnt here until it does (at most 60 s)."""
    log = io.StringIO()
    with progress.progress_bar(100, desc="rmtbase null table", stream=log, cpu_every=0.2):
        start = time.process_time()
        while "0/100 draws" not in log.getvalue() and time.process_time() - start < 60:
            sum(i * i for i in range(10_000))
    assert log.getvalue().startswith("rmtbase null table: 0/100 draws (0%), "), log.getvalue()
    assert "\r" not in log.getvalue()


def test_warnings_through_the_channel_keep_python_formatting():
    log = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        progress.show_warning(UserWarning("careful"), UserWarning, "f.py", 3, file=log)
    assert log.getvalue() == warnings.formatwarning(UserWarning("careful"), UserWarning,
                                                    "f.py", 3)


# -- the executable: ``rmtbase score`` interrupted while its layer bar is live -------------------

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    sys.path.insert(0, os.path.dirname(__file__))
    from _checkpoints import gpt2

    return gpt2(tmp_path_factory.mktemp("chan") / "m", seed=5, n_embd=48, n_head=4, n_layer=2)


def _score_until(model, out, stderr, want, env):
    """Start ``rmtbase score model --stats spectral`` with stderr on ``stderr`` (a pty or pipe end, closed
    here) and read until ``want`` shows; SIGINT; read the rest. Returns (status, text)."""
    read_end, write_end = stderr
    p = subprocess.Popen([sys.executable, "-m", "rmtbase", "score", str(model), "--out",
                          str(out), "--stats", "spectral"],  # the cheaper compile
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=write_end, env=env)
    os.close(write_end)
    got, sent = b"", False
    try:
        deadline = time.monotonic() + 300  # a safety net for a hung child, not a measurement
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(read_end, 65536)
                except OSError:  # the pty's other side closed
                    chunk = b""
                if not chunk:
                    break
                got += chunk
            if not sent and want in got:
                p.send_signal(signal.SIGINT)
                sent = True
        code = p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(read_end)
    assert sent, got
    return code, got.decode("utf-8", "replace")


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "RMTBASE_CACHE": str(tmp_path / "cache"),
            "RMTBASE_PROGRESS_INTERVAL": "0", "PYTHONUNBUFFERED": "1"}


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_interrupted_line_starts_at_column_0_on_a_terminal(model, tmp_path, env):
    """Old code: the line came after the tqdm frame ``scoring layers:   0%|…`` on its line and
    the bar was drawn again after it (tqdm's leave=True at exit)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()  # 24 x 80 (a new pty is 0 x 0: tqdm would draw nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    code, out = _score_until(model, tmp_path / "o", (master, slave), b"scoring layers", env)
    assert code == 130, out
    at = out.index("rmtbase: interrupted")
    assert "scoring layers" in out[:at]  # the bar was live
    assert _column(out, at) == 0, repr(out)
    assert "scoring layers" not in out[at:], repr(out)  # not drawn again after it


def test_progress_into_a_pipe_has_no_carriage_return(model, tmp_path, env):
    """Old code: ``scoring/score.py`` drew a tqdm bar into the pipe (``\\r`` frames)."""
    r, w = os.pipe()
    code, out = _score_until(model, tmp_path / "o", (r, w), b"scoring layers", env)
    assert code == 130, out
    assert "\r" not in out, repr(out)
    assert re.search(r"^scoring layers: 1/2 layers \(50%\)", out, re.MULTILINE), out
    assert out.rstrip("\n").endswith("rmtbase: interrupted"), out


# -- build item 3: the null draws of a first contact are never silent ---------------------------

def test_first_contact_null_draws_report_stage_and_draws(model, tmp_path, monkeypatch, capsys):
    """A random GPT-2 at d = 48, d_h = 12 (no shipped table or profile null; an empty user
    cache) scored with stderr not a terminal: the spectral null table and the profile null
    each name their stage and report draws done / total in plain lines (every update here:
    ``RMTBASE_PROGRESS_INTERVAL=0``), and both reporters carry the CPU heartbeat
    (``cpu_every`` = :data:`rmtbase.progress.NULL_CPU_EVERY` <= 10 s), which is what makes a
    long draw report at least every 10 s of CPU (mechanism: test_cpu_every_reports_between_updates).
    Old code: the table's lines said only ``rmtbase baseline``, the profile null nothing."""
    from rmtbase.scoring.score import score_model

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RMTBASE_PROGRESS_INTERVAL", "0")
    made = []
    init = reporters.LogLines.__init__

    def spy(self, total, desc, unit, *a, **k):
        made.append((desc, total, k.get("cpu_every")))
        init(self, total, desc, unit, *a, **k)

    monkeypatch.setattr(reporters.LogLines, "__init__", spy)
    capsys.readouterr()
    score_model(str(model), stats="spectral", draws=300, max_draws=300, spectrum_draws=0,
                progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err, repr(err)
    lines = err.splitlines()
    assert "rmtbase: generating the null table d=48, d_h=12, spectral statistics" in err, err
    from rmtbase.scoring.profile.stopping import SCHEDULE  # a first block, more if needed

    assert (f"rmtbase: drawing the profile null d=48, d_h=12, float32 storage, {SCHEDULE[0]} "
            "draws") in err, err
    table = [ln for ln in lines if ln.startswith("rmtbase null table d=48, d_h=12 (spectral, "
                                                 "float32): ")]
    # (a CPU heartbeat line, e.g. "0/300 draws" during the first compile, may come between)
    assert any(ln.split(": ", 1)[1].startswith("250/300 draws (83%)") for ln in table), err
    assert table[-1].endswith("done"), err
    prof = [ln for ln in lines if ln.startswith("rmtbase profile null d=48, d_h=12 (float32): ")]
    done = [int(ln.split(": ", 1)[1].split("/")[0]) for ln in prof]
    first = done[:done.index(SCHEDULE[0]) + 1]  # the first block's bar
    assert len(set(first)) >= 3 and first == sorted(first), err
    assert all(f"/{SCHEDULE[0]} draws (" in ln for ln in prof[:len(first)]), err
    assert prof[-1].endswith("done"), err
    nulls = [m for m in made if m[0].startswith(("rmtbase null table", "rmtbase profile null"))]
    assert len(nulls) >= 2 and all(m[2] == progress.NULL_CPU_EVERY <= 10 for m in nulls), made
