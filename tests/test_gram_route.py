"""The quantised null's Gram route for λ (rmtbase.stats.spectral.null_eigvals_by_grams,
rmtbase.baseline.draw_route) and the draws version of the table cache.

Tolerances: the Gram route and the QR route each agree with a float64 SVD to 1e-4 relative on
every λ (measured ≤ 1.1e-5 at 640 × 256, 1024 × 128 and 512 × 256: the core's float32 SVD
dominates both), so with each other to 2e-4; a table's spectral statistics and λ to 2e-4
relative, its element statistics to 1e-6 (they do not read λ;
the programs differ, so no bit equality is claimed). Fixed keys throughout.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline import cache, draw_route
from rmtbase.baseline import null as null_mod
from rmtbase.stats import SPECTRAL_STATS
from rmtbase.stats.precision import round_trip
from rmtbase.stats.spectral import eigvals_from_factors, null_eigvals_by_grams
from rmtbase.stats.storage import storage_record

D, DH = 320, 128  # a Gram-route cell (d_h >= 128, c = 0.4), small enough for the quick tier


def _pair(seed, storage="q5_0", d=D, d_h=DH):
    z = jax.random.normal(jax.random.key(seed), (2, d_h, d), jnp.float32)
    return round_trip(z, storage)


_routes = jax.jit(lambda w: (*null_eigvals_by_grams(w), eigvals_from_factors(w[0], w[1])))


def _reference(w):
    w = np.asarray(w, np.float64)
    return np.linalg.svd(w[0].T @ w[1], compute_uv=False)[: w.shape[1]] ** 2


@pytest.mark.parametrize("storage", ["q5_0", "q4_1", "q8_0"])
def test_gram_route_matches_qr_and_float64(storage):
    for seed in range(4):
        w = _pair(seed, storage)
        lam, used, lam_qr = _routes(w)
        assert bool(used), "a Gaussian quantised draw must take the Gram route"
        ref = _reference(w)
        assert np.max(np.abs(np.asarray(lam, np.float64) - ref) / ref) <= 1e-4
        assert np.max(np.abs(np.asarray(lam_qr, np.float64) - ref) / ref) <= 1e-4
        assert np.max(np.abs(np.asarray(lam) - np.asarray(lam_qr)) / np.asarray(lam_qr)) <= 2e-4


def test_ill_conditioned_draw_falls_back_to_qr():
    """W_Q with singular values from 1 to 1e-3 (κ(G_Q) = 1e6): the bound refuses the Gram
    route and the QR route's λ is returned; a rank-deficient W_K (Cholesky fails) likewise."""
    w = np.asarray(_pair(5), np.float64)
    u, _, vt = np.linalg.svd(w[0], full_matrices=False)
    w[0] = (u * np.geomspace(1.0, 1e-3, DH)) @ vt
    planted = jnp.asarray(w, jnp.float32)
    lam, used, lam_qr = _routes(planted)
    assert not bool(used)
    np.testing.assert_allclose(np.asarray(lam), np.asarray(lam_qr), rtol=1e-6)
    ref = _reference(planted)
    # the QR route keeps the small λ (measured 6e-6) that the Gram route alone gets wrong by
    # ~1e-2 (κ(G_Q)·eps = 0.12): the fallback is what holds the tolerance
    assert np.max(np.abs(np.asarray(lam, np.float64) - ref) / ref) <= 1e-4
    g = np.asarray(planted) @ np.swapaxes(np.asarray(planted), -1, -2)
    ell = np.linalg.cholesky(g)
    alone = np.linalg.svd(ell[0].T @ ell[1], compute_uv=False).astype(np.float64) ** 2
    assert np.max(np.abs(alone - ref) / ref) > 1e-3
    deficient = np.array(_pair(6), np.float32)
    deficient[1, -1] = deficient[1, 0]  # two equal rows: G_K singular
    lam, used, _ = _routes(jnp.asarray(deficient))
    assert not bool(used) and np.all(np.isfinite(np.asarray(lam)))


def test_route_rule():
    q5, q41, bf16 = (storage_record(s) for s in ("q5_0", "q4_1", "bfloat16"))
    f32 = storage_record("float32")
    rule = draw_route.gram_route
    assert rule(640, 256, "all", "lowrank", q5, "float32")
    assert rule(1024, 128, "spectral", "lowrank", q41, np.float32)
    assert not rule(576, 64, "all", "lowrank", q41, "float32")  # d_h below the floor
    assert not rule(256, 256, "all", "lowrank", q5, "float32")  # c = 1: κ unbounded
    assert not rule(1024, 512, "all", "lowrank", q5, "float32")  # c = 0.5: B near its limit
    assert not rule(640, 256, "elementwise", "lowrank", q5, "float32")  # no λ
    assert not rule(640, 256, "all", "residual", q5, "float32")
    assert not rule(640, 256, "all", "lowrank", f32, "float32")  # shipped tables: QR
    assert not rule(640, 256, "all", "lowrank", bf16, "float32")
    assert not rule(640, 256, "all", "lowrank", q5, "float64")
    assert not rule(640, 256, "all", "lowrank", q5, "float32", "gpu")  # vmapped: cond runs both
    assert rule(640, 256, "all", "lowrank", q5, "float32", "cpu")


def test_table_statistics_close_to_the_qr_route(monkeypatch):
    key = jax.random.key(11)
    kw = dict(stats="all", storage="q5_0", return_lambda=True)
    null_mod._draw_fn.cache_clear()
    gram = null_mod.null_draws(key, D, DH, 6, **kw)
    monkeypatch.setattr(null_mod, "gram_route", lambda *a: False)
    null_mod._draw_fn.cache_clear()
    try:
        qr = null_mod.null_draws(key, D, DH, 6, **kw)
    finally:
        null_mod._draw_fn.cache_clear()
    assert gram.keys() == qr.keys()
    spectral = {f"qk.{s}" for s in SPECTRAL_STATS} | {"qk.lambda"}
    for name in gram:
        tol = 2e-4 if name in spectral else 1e-6
        np.testing.assert_allclose(gram[name], qr[name], rtol=tol, atol=0, err_msg=name)


def test_old_draws_version_is_not_read(monkeypatch, tmp_path):
    """A cached table of a Gram-route cell written before the route (no ``-dv2``) is neither
    read nor warned about: the request draws anew into the ``-dv2`` name. A QR-route cell's
    name is unchanged, and an element-statistics request may use either version."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    key = cache.table_key(D, DH, stats="all", min_draws=10, storage="q5_0")
    new = key.filename()
    assert "-q5_0-dv2-v" in new
    old = new.replace("-dv2", "")
    (tmp_path / old).write_bytes(b"not a table")

    def never(path):
        raise AssertionError(f"read {path}")

    monkeypatch.setattr("rmtbase.baseline.tables.read_table", never)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.lookup_key(key) is None
    entries = cache._cached_entries(tmp_path)
    assert [e["draws_version"] for e in entries] == [1]
    (tmp_path / new).write_bytes(b"")
    by_name = {e["file"].name: e for e in cache._cached_entries(tmp_path)}
    assert by_name[new]["draws_version"] == 2
    assert cache._matches(by_name[new], key) and not cache._matches(by_name[old], key)
    elem = cache.table_key(D, DH, stats="elementwise", min_draws=10, storage="q5_0")
    assert cache._matches(by_name[new], elem) and cache._matches(by_name[old], elem)
    plain = cache.table_key(576, 64, stats="all", min_draws=10, storage="q4_1")
    assert "-dv" not in plain.filename() and plain.draws_version == 1
