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
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "null_draws",
                          "--quick", "--big-draws", "0", "--shapes", "768x64"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    row = next(line for line in lines if line.startswith("(768,64)") and "×" in line)
    ratio = float(row.split("×")[0].split()[-1])
    assert ratio > 50  # the fast path beats a full d×d SVD per draw by hundreds of times
    assert any("rmtbase.baseline" in line for line in lines)
    assert any(line.startswith("(768,64)") and "%" in line and "×" not in line for line in lines)


def test_every_benchmark_imports():
    """Each script under benchmarks/ still imports against the package (the names it takes
    from ``rmtbase`` exist: a moved name breaks a script nobody runs). One subprocess imports
    them all (nothing runs: every script keeps its work under ``if __name__ == "__main__"``)."""
    names = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
    code = ("import importlib, sys; sys.path.insert(0, sys.argv[1]); bad = []\n"
            "for n in sys.argv[2:]:\n"
            "    try: importlib.import_module(n)\n"
            "    except Exception as e: bad.append(f'{n}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(bad)); sys.exit(1 if bad else 0)")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "benchmarks"), *names],
                         capture_output=True, text=True, env=env, timeout=600)
    assert len(names) >= 5
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def test_the_suite_is_a_handful_each_named_in_performance_md():
    """benchmarks/ holds at most 14 scripts, each named in docs/performance.md; every benchmark
    ``run.py`` names has its script, and ``run.py --list`` lists them."""
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    assert len(scripts) <= 14, scripts
    page = (ROOT / "docs" / "performance.md").read_text("utf-8")
    assert [s for s in scripts if f"benchmarks/{s}" not in page] == []
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert all((ROOT / "benchmarks" / f"{b.script}.py").is_file() for b in run.BENCHMARKS.values())
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--list"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()] == list(run.BENCHMARKS)
