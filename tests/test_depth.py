"""Tests of rmtbase.depth: features against Gaussian closed forms, recovery of a simulated depth."""

import jax
import mpmath as mp
import numpy as np
import pytest

from rmtbase.depth import (
    FEATURES,
    QUANTILE_PROBS,
    depth_null,
    effective_depth,
    shape_features,
)
from rmtbase.errors import InputError


def _residual_block(seed, d, depth, m, n):
    """Independent numpy residual product ∏(I + W_l), W_l ~ N(0, 1/d); an off-diagonal block."""
    rng = np.random.default_rng(seed)
    mat = np.eye(d)
    for _ in range(depth):
        mat = mat + (rng.standard_normal((d, d)) / np.sqrt(d)) @ mat
    return mat[:m, d - n:]  # rows 0..m-1, columns d-n..d-1: no diagonal entry when m + n <= d


def test_features_of_gaussian_sample_match_closed_forms():
    n = 400_000
    x = np.random.default_rng(0).standard_normal(n)
    f = shape_features(x.reshape(400, 1000))
    assert f.shape == (len(FEATURES),)
    # excess kurtosis of a Gaussian is 0 with standard error sqrt(24/n)
    assert abs(f[0]) / np.sqrt(24 / n) < 5
    for p, q in zip(QUANTILE_PROBS, f[1:], strict=True):
        exact = float(mp.sqrt(2) * mp.erfinv(p))  # quantile of |z|, z ~ N(0, 1)
        dens = 2 * float(mp.npdf(exact))
        se = np.sqrt(p * (1 - p) / n) / dens
        assert abs(q - exact) / se < 5, (p, q, exact)


def test_effective_depth_recovers_simulated_depth():
    d, m, n = 256, 128, 128
    null = depth_null((m, n), d=d, depths=range(1, 25), draws=48, key=jax.random.key(3))
    res = effective_depth(_residual_block(11, d, 12, m, n), null=null)
    assert res.consistent
    assert 12 in res.accepted, (res.depth, res.interval)
    assert res.interval[0] <= res.depth <= res.interval[1]
    assert 1 not in res.accepted  # the interval is informative: a depth-12 product is not Gaussian
    # and a Gaussian matrix is matched to shallow depth, not to depth 24
    g = effective_depth(np.random.default_rng(5).standard_normal((m, n)), null=null)
    assert 1 in g.accepted and 24 not in g.accepted
    assert g.depth < 12


def test_depth_null_is_keyed_and_matches_independent_depth1_law():
    a = depth_null((20, 30), d=40, depths=[1, 3], draws=20, key=jax.random.key(7))
    b = depth_null((20, 30), d=40, depths=[1, 3], draws=20, key=jax.random.key(7))
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(a.features, b.features)
    c = depth_null((20, 30), d=40, depths=[1, 3], draws=20, key=jax.random.key(8))
    assert not np.allclose(a.features, c.features)
    assert a.features.shape == (2, 20, len(FEATURES))
    # draw i at depth 3 equals a product built by hand from the documented key scheme
    k = jax.random.fold_in(jax.random.key(7), 4)
    mat = np.eye(40, dtype=np.float32)
    for layer in (1, 2, 3):
        w = np.asarray(jax.random.normal(jax.random.fold_in(k, layer), (40, 40),
                                         dtype=np.float32)) / np.sqrt(40)
        mat = mat + w @ mat
    block = mat[:20, :30].ravel()[np.flatnonzero(~np.eye(20, 30, dtype=bool))]
    np.testing.assert_allclose(a.features[1, 4], shape_features(block), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [dict(d=10), dict(depths=[0, 1]), dict(draws=5), dict(level=1.5)],
)
def test_effective_depth_rejects_bad_input(kwargs):
    with pytest.raises(InputError):
        effective_depth(np.ones((20, 30)) + np.arange(600).reshape(20, 30), **kwargs)


def test_effective_depth_rejects_mismatched_null_and_bad_matrix():
    null = depth_null((20, 30), d=40, depths=[1], draws=20)
    with pytest.raises(InputError):
        effective_depth(np.random.default_rng(0).standard_normal((30, 20)), null=null)
    with pytest.raises(InputError):
        effective_depth(np.full((20, 30), np.nan), null=null)
    with pytest.raises(InputError):
        effective_depth(np.zeros(50))


def test_effective_depth_coverage():
    """The accepted set covers the true depth in about `level` of replications."""
    d, m, n, depth = 128, 48, 64, 6
    null = depth_null((m, n), d=d, depths=range(1, 17), draws=100, key=jax.random.key(0))
    hits = [depth in effective_depth(_residual_block(100 + r, d, depth, m, n), null=null).accepted
            for r in range(40)]
    # nominal 0.95; P(Binomial(40, 0.95) <= 33) < 0.01
    assert sum(hits) >= 34
