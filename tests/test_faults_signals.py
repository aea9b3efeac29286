"""Ctrl-C at every write stage: ``score``, ``baseline``, ``compare`` and a Dask
collection end within seconds with exit 130, one line ``rmtbase: interrupted`` on stderr (no
traceback, no "Exception ignored"), the previous output intact and no temporary sibling left.

The interrupt comes from the ``RMTBASE_FAULT`` hook (:func:`rmtbase.files.interrupts.
fault_point`): ``<stage>:INT`` sends one SIGINT at the stage; ``<stage>:INT*`` sends SIGINT to
the process group (as a terminal does) at the stage and every 5 ms for 3 s after it, so that
interrupts land inside the netCDF/HDF5 write and in the cleanup that follows. A hang (the
HDF5-lock deadlock: one run of 11 still hung after 64 minutes) fails the test through the
subprocess timeout.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmtbase.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")
#: Generous: startup and a small run take ~10 s; a hang is what this catches.
HANG = 120


def _digest(path: Path) -> dict:
    if path.is_file():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


#: What a table run may say and leave on an interrupt: its completed blocks, for the rerun
#: (tests/test_resume.py).
KEPT = "rmtbase: completed blocks are kept; run the same command again to continue\n"


def interrupted_run(argv, fault: str, cache: Path, target: Path, resumable: bool = False):
    """Run ``python -m rmtbase argv`` with ``RMTBASE_FAULT=fault`` in its own session; assert
    exit 130, stderr exactly ``rmtbase: interrupted`` (after the resume note of a table run),
    ``target`` unchanged and no temporary sibling of it left (but a table run's kept
    blocks)."""
    before = _digest(target)
    env = dict(os.environ, PYTHONPATH=SRC, RMTBASE_FAULT=fault, RMTBASE_CACHE=str(cache),
               RMTBASE_NO_JIT_CACHE="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen([sys.executable, "-m", "rmtbase", *map(str, argv)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)  # its own process group: INT* hits only it
    try:
        _, err = p.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        pytest.fail(f"rmtbase {argv[0]} hung after {fault}")
    assert p.returncode == 130, (fault, p.returncode, err[-2000:])
    assert err.removeprefix(KEPT if resumable else "") == "rmtbase: interrupted\n", \
        (fault, err[-2000:])
    assert _digest(target) == before, fault
    left = [q.name for q in target.parent.iterdir() if q.name.startswith(f".{target.name}.")
            and not (resumable and q.name.startswith(f".{target.name}.partial"))]
    assert not left, left


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Two tiny GPT-2 checkpoints, their null table cached, an earlier score of the first, an
    earlier collection score, an earlier compare and an earlier table."""
    from _checkpoints import gpt2

    root = tmp_path_factory.mktemp("signals")
    cache = root / "cache"
    g1, g2 = gpt2(root / "g1", seed=0), gpt2(root / "g2", seed=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(cache))
        assert main(["score", str(g1), "--stats", "spectral", "--no-figures", "--quiet",
                     "--out", str(root / "score")]) == 0
        assert main(["compare", str(root / "score"), "--no-figures",
                     "--out", str(root / "cmp")]) == 0
        assert main(["baseline", "--d", "64", "--dh", "16", "--draws", "10", "--stats",
                     "spectral", "--no-progress", "--seed", "1",
                     "--out", str(root / "t.nc")]) == 0
    shutil.copytree(root / "score", root / "coll")  # an earlier output of the same kind
    return dict(root=root, cache=cache, g1=g1, g2=g2)


SCORE = ["--stats", "spectral", "--no-figures", "--quiet", "--overwrite"]


@pytest.mark.parametrize("sig", ["INT", "INT*"])
@pytest.mark.parametrize("stage", ["cli:start", "write:created", "write:data",
                                   "write:verified"])
def test_baseline_interrupted_at_each_write_stage(work, stage, sig):
    interrupted_run(["baseline", "--d", "64", "--dh", "16", "--draws", "10", "--stats",
                     "spectral", "--no-progress", "--seed", "2", "--out", work["root"] / "t.nc"],
                    f"{stage}:{sig}", work["cache"], work["root"] / "t.nc", resumable=True)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["INT", "INT*"])
@pytest.mark.parametrize("stage", ["output:created", "output:netcdf", "output:written",
                                   "output:swap"])
def test_score_interrupted_at_each_write_stage(work, stage, sig):
    interrupted_run(["score", work["g1"], *SCORE, "--seed", "0", "--out", work["root"] / "score"],
                    f"{stage}:{sig}", work["cache"], work["root"] / "score")


@pytest.mark.parametrize("sig", ["INT", "INT*"])
@pytest.mark.parametrize("stage", ["output:created", "output:swap"])
def test_compare_interrupted_at_each_write_stage(work, stage, sig):
    interrupted_run(["compare", work["root"] / "score", "--no-figures", "--overwrite",
                     "--out", work["root"] / "cmp"], f"{stage}:{sig}", work["cache"],
                    work["root"] / "cmp")


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["tasks:submitted", "output:netcdf"])
def test_collection_on_two_workers_interrupted(work, stage):
    pytest.importorskip("distributed")
    interrupted_run(["score", work["g1"], work["g2"], *SCORE, "--workers", "2",
                     "--out", work["root"] / "coll"], f"{stage}:INT*", work["cache"],
                    work["root"] / "coll")


def test_deferred_holds_an_interrupt_until_the_block_ends():
    """Library use (Python's own handler): a SIGINT inside :func:`deferred` is raised when the
    block ends, not inside it; outside the main thread the block does nothing."""
    import signal

    from rmtbase.files.interrupts import deferred

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # bytecode boundaries where a raised handler would fire
                pass
            reached.append(True)
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_swallowed_interrupt_still_ends_the_run(tmp_path):
    """An interrupt swallowed on its way up (as JAX's GC callback does: "Exception ignored")
    ends the run at the next check, before an output is made final."""
    code = ("import os, signal, sys\n"
            "from rmtbase.files import interrupts\n"
            "interrupts.install()\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    for _ in range(1000): pass\n"
            "except KeyboardInterrupt:\n"
            "    pass  # swallowed\n"
            "os.kill(os.getpid(), signal.SIGINT)  # ignored: the process is already ending\n"
            "for _ in range(1000): pass\n"
            "try:\n"
            "    interrupts.check()\n"
            "except KeyboardInterrupt:\n"
            "    sys.exit(130)\n"
            "sys.exit(0)\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=SRC),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 130 and r.stderr == "", r.stderr


def test_interrupt_while_the_executable_imports_the_cli():
    """Ctrl-C while the ``rmtbase`` executable imports rmtbase.cli (JAX and friends load
    there): one line and exit 130, no traceback. The import is made to raise KeyboardInterrupt
    by a meta-path finder, as a SIGINT landing inside it would."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class F:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'rmtbase.cli':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, F())\n"
        "from rmtbase._entry import main\n"
        "sys.exit(main())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 130
    assert r.stderr == "rmtbase: interrupted\n"
