"""SIGTERM is handled as Ctrl-C (:mod:`rmtbase.files.interrupts`): one line
``rmtbase: terminated``, exit 143 (128 + SIGTERM), the output's lock file ``.OUT.lock`` and
its temporary folder ``.OUT.tmp-*`` removed, an earlier output left as it was. Without a
handler the process died at once (exit -15) and both stayed beside the output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
HANG = 120


def _env(cache: Path, fault: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_CACHE=str(cache), RMTBASE_NO_JIT_CACHE="1",
               HF_HUB_OFFLINE="1")
    env.pop("RMTBASE_FAULT", None)
    if fault:
        env["RMTBASE_FAULT"] = fault
    return env


def _start(argv, env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rmtbase", *map(str, argv)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(p: subprocess.Popen) -> str:
    try:
        _, err = p.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("rmtbase hung after SIGTERM")
    return err


def _left_beside(out: Path) -> list[str]:
    return sorted(q.name for q in out.parent.iterdir() if q.name.startswith(f".{out.name}."))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from _checkpoints import gpt2

    return gpt2(tmp_path_factory.mktemp("sigterm") / "g")


SCORE = ["--stats", "spectral", "--no-figures", "--quiet"]


def test_sigterm_at_start_up(tmp_path):
    p = _start(["score", "--help"], _env(tmp_path, "cli:start:TERM"))
    err = _finish(p)
    assert (p.returncode, err) == (143, "rmtbase: terminated\n")


def test_sigterm_from_outside_mid_run_removes_the_lock(model, tmp_path):
    """``kill -TERM`` while the score works (its ``--out`` checked and locked, the null table
    being drawn into a fresh cache): exit 143, one line, no lock file and no output."""
    out = tmp_path / "out"
    p = _start(["score", model, *SCORE, "--out", out], _env(tmp_path / "cache"))
    deadline = time.monotonic() + HANG
    while not any(q.name.endswith(".lock") for q in tmp_path.iterdir()):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(0.2)  # inside the work
    p.send_signal(signal.SIGTERM)
    err = _finish(p)
    assert (p.returncode, err) == (143, "rmtbase: terminated\n")
    assert _left_beside(out) == [] and not out.exists()


def test_sigterm_while_the_output_is_written_removes_the_temporary_folder(model, tmp_path):
    """SIGTERM with the temporary output folder made (and again while the process ends, from
    its whole process group every 5 ms): exit 143, one line, the earlier output unchanged,
    neither ``.out.tmp-*`` nor ``.out.lock`` left."""
    out = tmp_path / "out"
    out.mkdir()
    from rmtbase.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
        assert main(["score", str(model), *SCORE, "--out", str(out)]) == 0
    before = {q.name: q.read_bytes() for q in out.iterdir()}
    p = _start(["score", model, *SCORE, "--overwrite", "--out", out],
               _env(tmp_path / "cache", "output:created:TERM*"))
    err = _finish(p)
    assert (p.returncode, err) == (143, "rmtbase: terminated\n")
    assert _left_beside(out) == []
    assert {q.name: q.read_bytes() for q in out.iterdir()} == before
