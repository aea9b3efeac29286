"""benchmarks/gpu.py end to end on the CPU at tiny sizes (--smoke): the JSON a GPU run will
write has every headline key, figure or stated reason, and the kernel figures carry their
accuracy. The figures themselves are CPU numbers of tiny shapes and are not checked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _scripts import load

from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR

ROOT = Path(__file__).resolve().parents[1]


def _gpu():
    return load("benchmarks/gpu.py", "bench_gpu")


def test_smoke_kernels_section_writes_the_json(tmp_path):
    gpu = _gpu()
    path = tmp_path / "gpu.json"
    assert gpu.main(["--smoke", "--inline", "--sections", "kernels", "--json", str(path)]) == 0
    res = json.loads(path.read_text())
    for key in ("device", "backend", "jax", "jaxlib", "commit", "date", "smoke"):
        assert res[key] not in (None, ""), key
    assert res["smoke"] is True and res["sections"]["kernels"]["status"] == "ok"
    for size in gpu.KERNEL_SIZES:
        label = f"{size}x{size}"
        for route in ("eigvalsh", "jacobi", "jacobi_pallas", "hestenes", "hestenes_pallas"):
            assert res[f"{route}_{label}_per_s"] > 0, (route, label)
        for key in res:
            if key.endswith(f"{label}_max_rel_err"):
                assert res[key] < EIGH_MAX_REL_ERROR, key
        for family in ("jacobi_pallas", "hestenes_pallas"):
            assert res[f"{family}_{label}_best_variant"].startswith(f"{family}_block")
    # every headline key is a figure or has its reason
    assert all(k in res or k in res["skipped"] for k in gpu.KEYS)
    assert res["sections"]["spectral"]["status"] == "skipped: not in --sections"


@pytest.mark.slow
def test_smoke_run_in_subprocesses_has_every_key(tmp_path):
    """The whole run as on a GPU (sections in subprocesses, composition.py at a tiny shape,
    the scoring of a tiny folder)."""
    path = tmp_path / "gpu.json"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--smoke",
                          "--json", str(path), "--budget-s", "1500"], capture_output=True,
                         text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(path.read_text())
    assert {s: v["status"] for s, v in res["sections"].items()} == {
        "kernels": "ok", "spectral": "ok", "all": "ok", "composition": "ok", "circuits": "ok",
        "scoring": "ok"}
    missing = [k for k in gpu_keys() if k not in res]
    assert missing == ["score_8b_all_device_peak_mb"], missing  # the CPU has no device memory
    assert res["spectral_768x64_jacobi_pallas_draws_per_s"] > 0
    assert "| `composition_8b_s` |" in out.stdout


def gpu_keys():
    return _gpu().KEYS


def test_given_commit_wins_over_git():
    """``--commit`` is what the JSON records: on a device the tree's copy may carry a stale
    ``.git`` (2026-11-26: the second run recorded the first call's commit, ``+dirty``)."""
    gpu = _gpu()
    assert gpu._commit("133f00dce76a40b95861d2509047ae09da6f1ca6") == (
        "133f00dce76a40b95861d2509047ae09da6f1ca6")
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                         text=True)
    if git.returncode == 0:  # a checkout: without --commit, git's HEAD (maybe +dirty)
        assert gpu._commit(None).split("+")[0] == git.stdout.strip()


@pytest.mark.slow
def test_a_crash_loses_no_other_section_and_the_json_follows_each(tmp_path):
    """Sections in subprocesses at --smoke, one of them killed by SIGSEGV after its first
    figure ($RMTBASE_BENCH_CRASH): the one before and the one after keep their figures and the
    crashed one keeps what it printed; the JSON, read while the run goes on, is always whole
    (atomic rewrites) and is rewritten after each section with the statuses so far."""
    import time

    path = tmp_path / "gpu.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--smoke", "--json", str(path),
           "--budget-s", "900", "--sections", "circuits,spectral,kernels", "--routes",
           "eigvalsh"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", RMTBASE_BENCH_CRASH="spectral")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    seen = []  # the distinct section statuses the JSON showed while the run went on

    def look():
        if path.is_file():
            snap = json.loads(path.read_text())  # never a half-written file
            done = {s: v["status"] for s, v in snap["sections"].items()}
            if not seen or seen[-1] != done:
                seen.append(done)

    while proc.poll() is None:
        look()
        time.sleep(0.05)
    look()  # the last rewrite may come after the last look
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    res = json.loads(path.read_text())
    status = {s: v["status"] for s, v in res["sections"].items()}
    assert status["circuits"] == "ok" and status["kernels"] == "ok"
    assert status["spectral"].startswith("exit -11"), status
    assert res["circuits_smollm2_fwd_bwd_s"] > 0 and res["circuits_8b_forward_s"] > 0
    assert res["spectral_768x64_factors_per_s"] > 0  # printed before the crash: kept
    assert "spectral_768x64_moments_draws_per_s" not in res  # after it: never measured
    assert res["eigvalsh_64x64_per_s"] > 0 and res["moments_64x64_per_s"] > 0
    assert res["moments_64x64_max_rel_err"] < EIGH_MAX_REL_ERROR
    assert res["hist_768_counts_equal"] is True
    # rewritten after each section: a snapshot after circuits alone, then with spectral's
    # crash, before kernels ended
    order = ["scoring", "composition", "circuits", "spectral", "kernels"]
    firsts = [next((i for i, snap in enumerate(seen) if name in snap), None) for name in order]
    assert None not in firsts and firsts == sorted(firsts), seen
    assert any("circuits" in snap and "spectral" not in snap for snap in seen), seen
    assert any(snap.get("spectral", "").startswith("exit -11") and "kernels" not in snap
               for snap in seen), seen
