"""scripts/quick_tier_cpu.py reads the per-test lines tests/conftest.py writes with
``RMTBASE_TEST_CPU_LOG``, with and without the compile column, and sums them per file."""

from __future__ import annotations

import sys

import pytest
from _scripts import load


def _write(prefix, worker: str, lines: list[str]) -> None:
    with open(f"{prefix}.{worker}", "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def test_per_file_sums_with_and_without_the_compile_column(tmp_path, monkeypatch, capsys):
    qt = load("scripts/quick_tier_cpu.py")
    prefix = str(tmp_path / "cpu")
    _write(prefix, "gw0", ["tests/test_a.py::test_x\t2.0\t0.5\t1.5\t1.25",
                           "tests/test_a.py::test_y[p-1]\t1.0\t0.0\t0.8\t0.5"])
    _write(prefix, "gw1", ["tests/test_b.py::test_z\t3.0\t1.0\t2.0"])  # a log before the column
    _write(prefix, "log", ["not a worker's file"])
    tests = qt.read(prefix)
    assert tests["tests/test_b.py::test_z"] == (3.0, 1.0, 2.0, 0.0)
    files = qt.per_file(tests)
    # exact: sums of dyadic fractions
    assert files["tests/test_a.py"] == [3.0, 0.5, 2, 1.75]
    assert files["tests/test_b.py"] == [3.0, 1.0, 1, 0.0]
    monkeypatch.setattr(sys, "argv", ["quick_tier_cpu.py", prefix, "--top", "5"])
    qt.main()
    out = capsys.readouterr().out
    assert "total 7.5 CPU s in 3 tests (2 files), 1.8 s compiling" in out
    assert "compile s" in out.splitlines()[0]


def test_the_test_run_writes_the_compile_column(pytester_run_cpu_log):
    """One test of a real run: five tab-separated columns, compile seconds ≥ 0."""
    (line,) = pytester_run_cpu_log
    node, *cols = line.split("\t")
    assert node.endswith("::test_jit") and len(cols) == 4
    assert all(float(c) >= 0 for c in cols) and float(cols[3]) > 0  # it compiled a program


@pytest.fixture
def pytester_run_cpu_log(tmp_path):
    """The lines a child pytest (this repository's conftest) writes for one jitted test."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    tests = Path(__file__).parent
    shutil.copy(tests / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_one.py").write_text(
        "import jax, jax.numpy as jnp\n\n"
        "def test_jit():\n"
        "    assert float(jax.jit(lambda x: jnp.sin(x) * 3.0)(jnp.arange(7.0)).sum()) != 0\n")
    env = {**os.environ, "RMTBASE_TEST_CPU_LOG": str(tmp_path / "cpu")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # its own cache: the program compiles
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist", str(tmp_path / "test_one.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return (tmp_path / "cpu.main").read_text().splitlines()
