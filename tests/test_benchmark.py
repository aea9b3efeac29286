"""Smoke test of the benchmark command of docs/performance.md (one shape, quick): it runs and prints its rows."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_benchmark_quick_one_shape():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick",
                          "--big-draws", "0", "--shapes", "768x64"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    row = next(line for line in lines if line.startswith("(768,64)") and "×" in line)
    ratio = float(row.split("×")[0].split()[-1])
    assert ratio > 50  # the fast path beats a full d×d SVD per draw by hundreds of times
    assert any("rmtbase.baseline" in line for line in lines)
    assert any(line.startswith("(768,64)") and "%" in line and "×" not in line for line in lines)
