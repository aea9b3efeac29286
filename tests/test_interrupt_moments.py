"""Ctrl-C at random moments of ``rmtbase circuits``: each try ends cleanly.

The harness is ``benchmarks/interrupt_moments.py``; its docstring defines *clean* (status
130, ``rmtbase: interrupted`` once, no traceback or abort, no lock or temporary folder, the
output absent or complete); the latency bound is reported there, not asserted here. A cold
run of a tiny random GPT-2 fills a cache, a warm run gives the stages (start-up, composition,
labels, path patching, exit); each try runs on a copy of the cache and sends SIGINT to the
process group at a moment uniform within one stage of the search (composition, labels, path
patching; seed 0). Start-up is covered by the ``cli:start`` fault tests, the exit after the
output is written by :func:`test_the_executable_ends_without_interpreter_finalisation`.
The benchmark's 100 tries at random moments: docs/performance.md ("Interrupts").
"""

from __future__ import annotations

import random

import pytest
from _scripts import load

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _harness():
    return load("benchmarks/interrupt_moments.py")


def test_an_interrupt_in_each_stage_of_the_search_ends_cleanly(tmp_path):
    h = _harness()
    model, cache, _ = h.prepare(tmp_path)  # cold: fills the cache
    stages = h.timeline(model, cache, tmp_path)  # warm, as each try
    assert [s[0] for s in stages] == ["start-up", "composition", "labels", "path patching",
                                      "exit"], stages
    rng = random.Random(0)
    tries = []
    for k, stage in enumerate(stages[1:4]):  # start-up and exit: the tests below and others
        got = h.try_at(model, cache, tmp_path, stage, rng.uniform(0.0, stage[2]), k)
        if got is not None:  # (a run that ended first is no try)
            tries.append(got)
    assert len(tries) == 3, tries
    unclean = [(t["stage"], t["unclean"], t["tail"]) for t in tries  # latency: not asserted
               if [u for u in t["unclean"] if "after SIGINT" not in u]]
    assert not unclean, unclean


def test_the_verdict_sees_each_defect(tmp_path):
    """The harness's check is not vacuous: each kind of unclean end is named."""
    h = _harness()
    out = tmp_path / "out"
    ok = "progress\nrmtbase: interrupted\n"
    assert h.verdict(130, ok, out, 0.2) == []
    assert h.verdict(134, ok + "terminate called after throwing an instance of "
                     "'python_error'\n", out, 0.2) == ["exit 134", "terminate called"]
    assert h.verdict(130, "Traceback (most recent call last):\nrmtbase: interrupted\n", out,
                     0.2) == ["Traceback"]
    assert h.verdict(130, "", out, 0.2) == ["'rmtbase: interrupted' 0 times"]
    assert h.verdict(130, ok, out, 9.0) == ["exit 9.0 s after SIGINT"]
    (tmp_path / ".out.lock").write_text("1")
    (tmp_path / ".out.tmp-1-ab").mkdir()
    got = h.verdict(130, ok, out, 0.2)
    assert len(got) == 1 and got[0].startswith("left") and ".out.lock" in got[0], got
    (tmp_path / ".out.lock").unlink()
    (tmp_path / ".out.tmp-1-ab").rmdir()
    out.mkdir()  # a folder without a manifest: incomplete
    assert h.verdict(130, ok, out, 0.2) == ["incomplete output"]
    (out / "a.txt").write_text("x")
    import hashlib
    import json

    sha = hashlib.sha256(b"x").hexdigest()
    (out / "manifest.json").write_text(json.dumps({"files": {"a.txt": {"bytes": 1,
                                                                       "sha256": sha}}}))
    assert h.verdict(130, ok, out, 0.2) == []
    assert h.verdict(0, "wrote 1 file\n", out, 0.1) == []  # finished: SIGINT after the exit
    assert h.ending(0, "wrote 1 file\n", out) == "finished"
    (out / "a.txt").write_text("y")
    assert h.verdict(130, ok, out, 0.2) == ["incomplete output"]
    assert h.verdict(0, "", out, 0.1) == ["exit 0", "'rmtbase: interrupted' 0 times",
                                          "incomplete output"]
    import shutil

    shutil.rmtree(out)
    assert h.verdict(-2, "", out, 0.01) == [] and h.ending(-2, "", out) == "killed at start"
    assert h.verdict(-2, "rmtbase: still working\n", out, 0.01) == [
        "exit -2", "'rmtbase: interrupted' 0 times"]


def test_the_executable_ends_without_interpreter_finalisation():
    """After its work the executable runs the exit handlers and ends (``os._exit``): Python's
    finalisation, seconds with torch and JAX loaded and SIGINT back to its default action (a
    Ctrl-C there killed the process without a line), never runs; stdout is complete."""
    import subprocess
    import sys

    code = ("import sys, atexit\n"
            "class Witness:\n"
            "    def __del__(self): sys.stderr.write('finalised\\n')\n"
            "w = Witness()\n"
            "atexit.register(lambda: sys.stderr.write('exit handlers ran\\n'))\n"
            "sys.argv = ['rmtbase', 'constants']\n"
            "from rmtbase._entry import main\n"
            "sys.exit(main())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "mp_c1_edge" in p.stdout  # flushed before the end
    assert "exit handlers ran" in p.stderr and "finalised" not in p.stderr, p.stderr[-2000:]


def test_a_ctrl_c_swallowed_after_the_output_still_ends_130():
    """A Ctrl-C that a library swallows after the output is written (a ``KeyboardInterrupt``
    caught and dropped) still ends the executable with the line and 130, not 0."""
    import subprocess
    import sys

    code = ("import os, signal, sys, time\n"
            "import rmtbase.cli as cli\n"
            "work = cli.main\n"
            "def main(*a, **k):\n"
            "    code = work(*a, **k)\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        time.sleep(1)\n"
            "    except KeyboardInterrupt:\n"
            "        pass  # swallowed\n"
            "    return code\n"
            "cli.main = main\n"
            "sys.argv = ['rmtbase', 'constants']\n"
            "from rmtbase._entry import main as entry\n"
            "sys.exit(entry())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    assert p.stderr.count("rmtbase: interrupted") == 1 and "Traceback" not in p.stderr, p.stderr


def test_a_swallowed_interrupt_delivered_again_inside_a_held_block_is_raised_at_its_end():
    """Under :func:`rmtbase.files.interrupts.install`, a ``KeyboardInterrupt`` that was raised
    and then dropped (e.g. in a garbage-collection callback) is delivered again; when that
    second delivery lands inside :func:`~rmtbase.files.interrupts.deferred` it is raised as
    the block ends, not lost until the next output check."""
    import subprocess
    import sys

    code = ("import os, signal, time\n"
            "from rmtbase.files import interrupts as I\n"
            "I.install()\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT); time.sleep(1)\n"
            "except KeyboardInterrupt:\n"
            "    pass  # swallowed by a library\n"
            "I._state['redeliver'] = True  # as the unraisable hook marks it\n"
            "try:\n"
            "    with I.deferred():\n"
            "        os.kill(os.getpid(), signal.SIGINT); time.sleep(0.2)\n"
            "except KeyboardInterrupt:\n"
            "    print('raised at the end of the block')\n"
            "else:\n"
            "    print('lost')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.stdout.strip() == "raised at the end of the block", (p.stdout, p.stderr[-1500:])
