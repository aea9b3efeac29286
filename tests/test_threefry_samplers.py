"""The samplers that draw their normals by :func:`rmtbase.ensembles.threefry.normal` give the
draws they gave with ``jax.random.normal``: the composition and QK-overlap
nulls (reduced and whole-factor, each storage kind they serve), the product networks' layers
and the whole-matrix null's tiles.

Each case builds the sampler's program twice, once as written and once with the module's
``normal`` replaced by ``jax.random.normal`` (compiled caches cleared in between), at the call
site's own shapes, dtypes and key use (typed keys folded and named, ``vmap`` over draws, a raw
key, ``jax_enable_x64``), and compares bit patterns: the generator's claim is the same bits, so
any differing bit is a defect, not rounding.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline import composition_null as C
from rmtbase.baseline import matrix_null as M
from rmtbase.ensembles import products as P


def _jax_normal(key, shape, dtype=jnp.float32):
    return jax.random.normal(key, shape, dtype)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    # exact: bit patterns (the generator's claim is the same bits, not values within rounding)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}"))


def _both(monkeypatch, module, caches, fn):
    """``fn()`` as written, then with ``module.normal`` = ``jax.random.normal``; ``caches``:
    the ``lru_cache``d program builders to clear around each."""
    for c in caches:
        c.cache_clear()
    new = fn()
    monkeypatch.setattr(module, "normal", _jax_normal)
    for c in caches:
        c.cache_clear()
    old = fn()
    monkeypatch.undo()
    for c in caches:
        c.cache_clear()
    return new, old


_COMPOSITION_CACHES = (C._reduced, C._full, C._overlap, C._overlap_full)

# (name, sampler call): every program of composition_null at a small shape; the full samplers
# through a 16-bit round trip (the path they serve) and float32 (no round trip). The quick tier
# runs one case of each program; the rest are in the slow tier.
_slow = pytest.mark.slow
_COMPOSITION = [
    pytest.param("squares", lambda k: C.null_squares(k, 40, 6, 5, 30), id="squares"),
    pytest.param("squares_full_bf16", lambda k: C.null_squares_full(k, 24, 4, 3, 70,
                                                                    storage="bfloat16"),
                 id="squares_full_bf16"),
    pytest.param("squares_full_f32", lambda k: C.null_squares_full(k, 24, 4, 4, 10),
                 id="squares_full_f32", marks=_slow),
    pytest.param("overlap", lambda k: C.null_overlap(k, 24, 5, 30), id="overlap", marks=_slow),
    pytest.param("overlap_shared", lambda k: C.null_overlap(k, 24, 5, 30, shared_key=True),
                 id="overlap_shared"),
    pytest.param("overlap_full_f16", lambda k: C.null_overlap_full(k, 20, 4, 20,
                                                                   storage="float16"),
                 id="overlap_full_f16", marks=_slow),
    pytest.param("overlap_full_shared", lambda k: C.null_overlap_full(
        k, 20, 4, 20, shared_key=True, storage="bfloat16"), id="overlap_full_shared"),
]


@pytest.mark.parametrize("name,draw", _COMPOSITION)
def test_composition_nulls_keep_their_draws(monkeypatch, name, draw):
    key = jax.random.key(17)
    new, old = _both(monkeypatch, C, _COMPOSITION_CACHES, lambda: draw(key))
    assert np.isfinite(np.asarray(old)).all() and np.ptp(np.asarray(old)) > 0  # real draws
    assert _same(new, old), name


def test_composition_null_keeps_its_draws_under_x64(monkeypatch):
    """Under ``jax_enable_x64`` (the product-network studies turn it on in-process) the
    float32 samplers still give the draws of JAX's generator; a float64 one is JAX's own."""
    key = jax.random.key(4)
    with jax.enable_x64(True):
        new, old = _both(monkeypatch, C, _COMPOSITION_CACHES,
                         lambda: (C.null_squares(key, 40, 6, 6, 20),
                                  C.null_squares_full(key, 20, 4, 4, 8, dtype=jnp.float64)))
    for a, b in zip(new, old, strict=True):
        assert _same(a, b)


def test_product_network_layers_keep_their_draws(monkeypatch):
    """The Ginibre layers (:func:`products.network_layer`): eager and jitted products of
    square and rectangular float32 chains, layers ``vmap``ped over keys, and the float64
    Benettin factors under x64 (handed to JAX) with a float32 chain beside them."""
    keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(9), i))(jnp.arange(4))

    def draw():
        eager = P.product_network(keys[0], "ginibre", 3, d=12)
        jitted = jax.jit(lambda k: P.product_network(k, "ginibre", 3, widths=(8, 12, 6, 10)))
        layers = jax.jit(jax.vmap(lambda k: P.network_layer(k, 2, 16, 24, 1.5)))
        with jax.enable_x64(True):
            f64 = jax.jit(lambda k: P.network_factors(k, "ginibre", 4, d=10))(keys[1])
            f32 = jax.jit(lambda k: P.network_factors(k, "ginibre", 4, d=10,
                                                      dtype=jnp.float32))(keys[2])
        raw = jax.jit(lambda k: P.network_layer(k, 1, 7, 5, 1.0))(jax.random.key_data(keys[3]))
        return (eager, jitted(keys[1]), layers(keys), *f64, *f32, raw)

    new = draw()
    monkeypatch.setattr(P, "normal", _jax_normal)
    # the eager product's program is kept per static arguments: the reference is traced anew
    old = (jax.jit(lambda k: P.product_network(k, "ginibre", 3, d=12))(keys[0]), *draw()[1:])
    monkeypatch.undo()
    assert len(new) == len(old)
    for i, (a, b) in enumerate(zip(new, old, strict=True)):
        assert _same(a, b), i


@pytest.mark.parametrize("storage", ["float32", "bfloat16", "q4_1"])
def test_matrix_null_tiles_keep_their_draws(monkeypatch, storage):
    """A whole-matrix null's tiles as its draws key them (``fold_in(fold_in(cell, i), t)``):
    the whole (40, 64) matrix of the one-tile path and a (10, 64) tile of the tiled path. The
    statistics are a separate program of the tile (``one_tile_fn``, ``tile_stats``), so the
    same tiles give the same table."""
    cell = M.cell_key(3, 40, 64)
    keys = [jax.random.fold_in(jax.random.fold_in(cell, i), t) for i, t in ((5, 0), (1, 3))]
    new, old = _both(monkeypatch, M, (M._tile_fn,), lambda: (
        M._tile_fn(40, 64, storage)(keys[0]), M._tile_fn(10, 64, storage)(keys[1])))
    for got, want in zip(new, old, strict=True):
        assert np.ptp(np.asarray(want)) > 0
        assert _same(got, want)
