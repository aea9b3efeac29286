"""GPU = CPU: the null drawn on an accelerator against the same keys on the CPU.

Runs only where JAX's default backend is an accelerator (a lent GPU); on a CPU-only machine,
CI's included, every test here skips and says so. Threefry bits are the same on every backend;
what may differ is float32 rounding (normals, products, eigenvalues) and the eigen route
(:func:`rmtbase.baseline.null.eig_method`: the SVD off the CPU, tridiagonal bisection on it,
both within 1e-4 relative of a float64 SVD). A statistic's accelerator and CPU draws must agree
to 1e-3 of its null standard deviation draw by draw (a histogram statistic of W_QK may move
by one entry's bin change when a product differs by an ulp; 1e-3 sd is far below the Monte
Carlo error of any table), so a null table made on either backend serves both.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    jax.default_backend() == "cpu",
    reason="no accelerator: JAX sees only the CPU (these GPU = CPU checks run where one is lent)")

_CPU = r"""
import json, sys
import numpy as np, jax
from rmtbase.baseline.null import null_draws
a = json.loads(sys.argv[1])
r = null_draws(jax.random.key(a["seed"]), a["d"], a["d_h"], a["n"], stats=a["stats"],
               storage=a["storage"])
np.savez(a["path"], **{k: np.asarray(v) for k, v in r.items()})
"""


def _both(tmp_path, **a):
    from rmtbase.baseline.null import null_draws

    here = null_draws(jax.random.key(a["seed"]), a["d"], a["d_h"], a["n"], stats=a["stats"],
                      storage=a["storage"])
    path = tmp_path / "cpu.npz"
    subprocess.run([sys.executable, "-c", _CPU, json.dumps({**a, "path": str(path)})],
                   env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
    with np.load(path) as cpu:
        return {k: (np.asarray(v), cpu[k]) for k, v in here.items()}


@pytest.mark.parametrize("stats,n,storage", [("spectral", 512, "float32"), ("all", 24, "float32"),
                                             ("all", 24, "bfloat16")])
def test_accelerator_null_equals_cpu(tmp_path, stats, n, storage):
    pairs = _both(tmp_path, seed=3, d=768, d_h=64, n=n, stats=stats, storage=storage)
    assert pairs
    for name, (acc, cpu) in pairs.items():
        assert acc.shape == cpu.shape, name
        sd = np.std(cpu)
        assert sd > 0, name
        worst = np.nanmax(np.abs(acc - cpu)) / sd
        assert worst < 1e-3, (name, worst)
        # exact: integers / booleans (NaN masks)
        assert np.array_equal(np.isnan(acc), np.isnan(cpu)), name
