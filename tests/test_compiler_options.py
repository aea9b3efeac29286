"""Programs compiled with ``rmtbase._compiled.FEW_CALLS`` (XLA CPU's elemental emitters instead
of its MLIR fusion emitters, to compile faster) give the bytes the default
options give. Each program is compiled both ways on the same inputs (fixed seeds), at the
shapes of a first score (SmolLM2: d = 576, d_h = 64, 3 key heads) and in two storages; the
optimised programs must differ (the options reached XLA), their outputs must not: bit for
bit in the CLI's programs on the x86-64 AVX-512 machine where this was written (restructure
checks, 4567465), but not under the quick tier's lower XLA optimisation level (at level 0:
kl_gaussian, a difference of two entropies of order 1, moved by 5·10⁻⁸), and a float equality
holds only within one compiled program; so floats to 10⁻⁵ relative or 10⁻⁶ absolute (eight
float32 ulps of an order-1 entropy), integer counts exactly.

Programs compiled with ``MANY_CALLS`` (the null draws: XLA's default optimisation level stated
per program) give, in a process whose ``XLA_FLAGS`` lower the level, the bytes of a process
at the default (slow tier: two processes), unless ``INHERIT_FLAGS`` lets the flags govern."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rmtbase._compiled import FEW_CALLS, few_calls
from rmtbase.scoring.measures.layer_stats import _compiled as layer_stats_program
from rmtbase.scoring.measures.layer_stats import _compiled_factor_elements
from rmtbase.stats import element_stats
from rmtbase.stats.precision import round_trip

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA CPU options")

#: XLA's default of the option FEW_CALLS changes, stated so that the comparison holds whatever
#: ``XLA_FLAGS`` say (the quick tier's turn the fusion emitters off for every program).
DEFAULTS = {"xla_cpu_use_fusion_emitters": True}


def _same_values(a, b) -> bool:
    """Every leaf equal: integers exactly, floats to 1e-5 relative or 1e-6 absolute (NaN
    where NaN)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not np.issubdtype(x.dtype, np.floating):
            if not np.array_equal(x, y):
                return False
        elif not np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


def test_options_are_an_xla_cpu_option_only():
    assert FEW_CALLS == {"xla_cpu_use_fusion_emitters": False} == few_calls()


def test_the_null_draws_keep_their_options_unless_told_to_inherit(monkeypatch):
    from rmtbase._compiled import INHERIT_FLAGS, MANY_CALLS, many_calls

    monkeypatch.delenv(INHERIT_FLAGS, raising=False)
    assert many_calls() == MANY_CALLS
    monkeypatch.setenv(INHERIT_FLAGS, "1")
    assert many_calls() == few_calls()


@pytest.mark.parametrize("storage", ["float32", "q4_1"])
def test_k_element_stats_program_same_values(storage):
    rng = np.random.default_rng(7)
    wk = (0.02 * rng.standard_normal((3, 64, 576))).astype(np.float32)
    if storage != "float32":
        wk = np.asarray(round_trip(wk, storage), dtype=np.float32)
    program = _compiled_factor_elements(storage)
    default = jax.jit(lambda w: element_stats(w, storage=storage), compiler_options=DEFAULTS)
    assert program.lower(wk).compile().as_text() != default.lower(wk).compile().as_text()
    assert _same_values(program(wk), element_stats(wk, storage=storage))


def test_layer_stats_program_same_values():
    rng = np.random.default_rng(8)
    wq = (0.05 * rng.standard_normal((9, 64, 576))).astype(np.float32)
    wk = (0.05 * rng.standard_normal((9, 64, 576))).astype(np.float32)
    program = layer_stats_program()
    default = jax.jit(program.__wrapped__, static_argnames=("spectral",),
                      compiler_options=DEFAULTS)
    ours = program.lower(wq, wk, spectral=True).compile()
    theirs = default.lower(wq, wk, spectral=True).compile()
    assert ours.as_text() != theirs.as_text()
    assert _same_values(ours(wq, wk), theirs(wq, wk))


_MANY_CALLS_SCRIPT = """
import sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from rmtbase.baseline.composition_null import null_squares
from rmtbase.baseline.tables import baseline
ds = baseline(24, 4, draws=64, progress=False)
table = np.concatenate([ds[v].values.ravel() for v in ds.data_vars if ds[v].dtype.kind == "f"])
comp = np.asarray(null_squares(jax.random.key(3), 24, 4, 4, 64))
np.save(sys.argv[1], np.concatenate([table, comp.ravel()]).astype(np.float64))
"""


@pytest.mark.slow
def test_many_call_programs_keep_their_bits_under_a_lower_opt_level(tmp_path):
    """``MANY_CALLS`` programs (the null table's draws, the composition null's) compiled in a
    process whose ``XLA_FLAGS`` are the quick tier's (optimisation level 0, elemental
    emitters) give the bytes of a process at XLA's defaults; without the per-program options
    the table's values moved by up to 1.1e-3 relative."""
    import os
    import subprocess
    import sys

    from conftest import QUICK_TIER_XLA_FLAG

    from rmtbase._compiled import INHERIT_FLAGS, MANY_CALLS

    assert MANY_CALLS == {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}
    got = {}
    for name, flags in (("default", ""), ("level0", QUICK_TIER_XLA_FLAG)):
        env = {k: v for k, v in os.environ.items()
               if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR", INHERIT_FLAGS)}
        env["XLA_FLAGS"] = flags
        env["RMTBASE_CACHE"] = str(tmp_path / f"cache-{name}")
        out = tmp_path / f"{name}.npy"
        subprocess.run([sys.executable, "-c", _MANY_CALLS_SCRIPT, str(out)], env=env,
                       check=True, timeout=600)
        got[name] = np.load(out)
    assert got["default"].size > 1000
    # exact: the same programs at the same level on the same inputs, one machine
    np.testing.assert_array_equal(got["level0"], got["default"])
