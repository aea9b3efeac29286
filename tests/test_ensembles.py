"""Samplers: determinism, key derivation, chunk invariance, residual-product moments."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.ensembles import (
    ginibre,
    lowrank_factors,
    map_draws,
    named_key,
    residual_product,
    residual_rows,
    residual_stream,
)
from rmtbase.errors import InputError


def test_lowrank_factors_deterministic_named_and_scaled():
    key = jax.random.key(0)
    wq, wk = lowrank_factors(key, 50, 7, 2.0, 0.5, jnp.float64)
    wq2, wk2 = lowrank_factors(key, 50, 7, 2.0, 0.5, jnp.float64)
    assert wq.shape == wk.shape == (7, 50)
    # exact: the same call twice in one process: same compiled programs, same inputs
    assert np.array_equal(wq, wq2) and np.array_equal(wk, wk2)
    # exact: same jitted program, same inputs (the sampler's normal draw times 2.0, float64)
    np.testing.assert_array_equal(wq, 2.0 * jax.random.normal(named_key(key, "wq"), (7, 50), jnp.float64))
    assert not np.allclose(wq / 2.0, wk / 0.5)
    assert lowrank_factors(key, 10, 2)[0].dtype == jnp.float32
    with pytest.raises(InputError):
        lowrank_factors(key, 4, 8)


def test_gaussian_moments():
    x = np.asarray(ginibre(jax.random.key(1), (200_000,), 3.0, jnp.float64))
    # mean: SE 3/√n; variance: SE 9·√(2/n); |z| < 5
    assert abs(x.mean()) < 5 * 3.0 / np.sqrt(x.size)
    assert abs(x.var() - 9.0) < 5 * 9.0 * np.sqrt(2 / x.size)


def test_map_draws_fold_in_and_chunk_invariance():
    key = jax.random.key(2)

    def fn(k):
        wq, wk = lowrank_factors(k, 12, 3, dtype=jnp.float64)
        return {"s": jnp.sum(wq * wk), "v": wq[0]}

    ref = map_draws(fn, key, 23, chunk_size=23)
    for chunk in (1, 4, 7, 100):
        out = map_draws(fn, key, 23, chunk_size=chunk)
        # exact: one compiled program: every chunk size and draw count runs the fixed batch width,
        #  draw i keyed by fold_in(key, i)
        assert np.array_equal(out["s"], ref["s"]) and np.array_equal(out["v"], ref["v"])
    assert ref["v"].shape == (23, 12)
    # Not exact: fn here runs op by op, map_draws compiles it vmapped (found under
    # XLA_FLAGS=--xla_cpu_max_isa=AVX: 1 ulp). s is a float64 sum of 36 products: its
    # rounding in another order is ≤ 36 ulps of Σ|terms| (Higham 2002, §4.2).
    wq, wk = lowrank_factors(jax.random.fold_in(key, 5), 12, 3, dtype=jnp.float64)
    bound = 36 * np.finfo(np.float64).eps * float(np.abs(np.asarray(wq * wk)).sum())
    assert abs(float(fn(jax.random.fold_in(key, 5))["s"]) - ref["s"][5]) <= bound
    via_map = map_draws(fn, key, 23, chunk_size=6, method="map")
    np.testing.assert_allclose(via_map["s"], ref["s"], rtol=1e-12)
    with pytest.raises(InputError):
        map_draws(fn, key, 0)


def test_map_draws_raw_uint32_key():
    key = jax.random.PRNGKey(3)
    out = map_draws(lambda k: jax.random.normal(k, (), jnp.float64), key, 5, chunk_size=2)
    assert out.shape == (5,) and out[2] == jax.random.normal(jax.random.fold_in(key, 2), (), jnp.float64)


def test_residual_product_rows_and_stream_agree():
    key = jax.random.key(4)
    m = np.asarray(residual_product(key, 20, 5, dtype=jnp.float64))
    rows = np.asarray(residual_rows(key, 20, 5, 6, dtype=jnp.float64))
    np.testing.assert_allclose(rows, m[:6], rtol=1e-12, atol=1e-12)
    x0 = np.asarray(jax.random.normal(named_key(key, "x"), (20,), jnp.float64))
    np.testing.assert_allclose(residual_stream(key, 20, 5, dtype=jnp.float64), m @ x0, rtol=1e-11)
    # depth 1 is I + W_1 with entries of variance 1/d
    m1 = np.asarray(residual_product(key, 400, 1, dtype=jnp.float64)) - np.eye(400)
    assert abs(m1.var() * 400 - 1) < 5 * np.sqrt(2 / m1.size) * 1.0


@pytest.mark.parametrize("depth,sigma2", [(3, None), (6, None), (4, 0.5 / 32)])
def test_residual_growth(depth, sigma2):
    """E‖M x‖²/d = (1 + σ² d)^L (2^L at the critical σ² = 1/d); |z| < 5 over 400 draws."""
    d, n = 32, 400
    s2 = 1.0 / d if sigma2 is None else sigma2
    keys = jax.random.split(jax.random.key(5 + depth), n)
    y = jax.vmap(lambda k: residual_stream(k, d, depth, sigma2, jnp.float64))(keys)
    r = np.asarray(jnp.sum(y * y, axis=1)) / d
    z = (r.mean() - (1 + s2 * d) ** depth) / (r.std(ddof=1) / np.sqrt(n))
    assert abs(z) < 5, (r.mean(), z)


def test_residual_errors():
    with pytest.raises(InputError):
        residual_product(jax.random.key(0), 8, 0)
    with pytest.raises(InputError):
        residual_rows(jax.random.key(0), 8, 2, 9)
    with pytest.raises(InputError):
        residual_stream(jax.random.key(0), 8, 2, sigma2=-1.0)


_SHARDED = r"""
import jax, jax.numpy as jnp, numpy as np
from rmtbase.ensembles import draws as ensembles
from rmtbase.ensembles.wishart import gram_bidiagonal
assert jax.device_count() == 2
fn = lambda k: {"b": gram_bidiagonal(k, 40, 6)[0], "z": jax.random.normal(k, (3,))}
keys = ensembles._fold(jax.random.key(5), jnp.arange(8, dtype=jnp.uint32))
sharded = ensembles._chunk_runner(fn, 8, "vmap", tuple(jax.devices()))(keys)
single = ensembles._chunk_runner(fn, 8, "vmap", tuple(jax.devices()[:1]))(keys)
for name in ("b", "z"):
    np.testing.assert_allclose(np.asarray(sharded[name]), np.asarray(single[name]), rtol=1e-6)
assert ensembles._draw_devices() == tuple(jax.devices()[:1])  # CPU: never sharded
print("ok")
"""


def test_sharded_chunk_runner_matches_single_device():
    """The accelerator path (shard_map over the draw axis, with the χ² while_loop inside) gives
    the single-device numbers; run on two virtual CPU devices in a subprocess. map_draws itself
    keeps CPU work on one device (see ``_draw_devices``)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", _SHARDED], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_eager_loop_samplers_compile_once():
    """The samplers built on a loop over a closure (χ², product networks and their QR factors,
    the residual ensemble) called outside jit: a second call with another key compiles nothing,
    and gives what the same call gives inside jit (the eager call is that program). Op by op,
    each call compiled its loop again (2.4 s for the χ² sampler, 1.4 s for a 3-layer product,
    on 2 cores). A list of widths (unhashable, so not a static argument) still works, op by op,
    with the same values."""
    from _compiles import compiles

    from rmtbase.ensembles.chisquare import chisquare
    from rmtbase.ensembles.products import network_factors, product_network
    from rmtbase.ensembles.residual import residual_product

    calls = {
        "chisquare": lambda k: chisquare(k, jnp.full(40, 7.0)),
        "product_network": lambda k: product_network(k, "ginibre", 3, d=16),
        "residual_product": lambda k: residual_product(k, 16, 3),
        "network_factors": lambda k: network_factors(k, "residual", 3, d=16, dtype=jnp.float32),
    }
    for name, call in calls.items():
        call(jax.random.key(0))
        with compiles() as seen:
            got = call(jax.random.key(1))
        assert seen == [], name
        want = jax.jit(call)(jax.random.key(1))
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                        strict=True):
            # Not exact: the eager call compiles the sampler alone, jax.jit(call) compiles it
            # inside the lambda's program, where XLA may fuse it with its neighbours. The
            # deepest chain is a 3-layer product of 16 x 16 factors (≤ 3·16 roundings a
            # value): 64 ulps of the leaf's largest value.
            w = np.asarray(w)
            np.testing.assert_allclose(g, w, rtol=0, err_msg=name,
                                       atol=64 * np.finfo(w.dtype).eps * np.abs(w).max())
    key = jax.random.key(2)
    listed = product_network(key, "ginibre", 2, widths=[8, 12, 6])
    np.testing.assert_allclose(listed, product_network(key, "ginibre", 2, widths=(8, 12, 6)),
                               rtol=1e-5, atol=1e-6)
    assert listed.shape == (6, 8)
