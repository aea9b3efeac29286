"""Ctrl-C during the circuit search (``rmtbase circuits``): an interrupt that lands anywhere —
during the capture's forward passes, the screen and exact patches of a receiver, or the
via-MLP runs — ends the process with status 130, one line ``rmtbase: interrupted``, no
traceback, no abort from inside torch ("terminate called after throwing an instance of
'python_error'"), and no output folder, lock or temporary folder left. The fault hook
(``RMTBASE_FAULT=<stage>:INT*``) sends SIGINT to the process group every 5 ms for 3 s from
the stage on, so interrupts land at many moments in the code that follows."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The interrupt harness's tiny GPT-2 (``benchmarks/interrupt_moments.py``), smaller."""
    from _scripts import load

    harness = load("benchmarks/interrupt_moments.py")
    return harness.build_model(tmp_path_factory.mktemp("m") / "g", n_layer=2, n_head=2,
                               n_embd=32, vocab_size=40, n_positions=64)


@pytest.mark.parametrize("stage", ["circuits:capture", "circuits:screen"])
def test_an_interrupt_at_any_moment_ends_cleanly(model, tmp_path, stage):
    out = tmp_path / "out"
    env = {**os.environ, "RMTBASE_FAULT": f"{stage}:INT*", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "rmtbase", "circuits", str(model), "--draws",
                           "100", "--receivers", "L1H0,L1H1", "--mlp-paths", "on", "--out",
                           str(out), "--quiet"], env=env, capture_output=True, text=True,
                          timeout=900, start_new_session=True)
    err = proc.stderr
    assert proc.returncode == 130, err[-2000:]
    assert "rmtbase: interrupted" in err
    assert "Traceback" not in err and "terminate called" not in err, err[-2000:]
    left = [p.name for p in tmp_path.iterdir() if p.name != "out"]
    assert not out.exists() and not [n for n in left if n.startswith(".out")], left
