"""``stats._magnitude.rank_cum``: the cumulative |w| counts summed over the top bins only when
the bins under them hold fewer entries than the first rank looked up. Where ranks are read
it is the cumulative sum (integers, exact), and the Weibull fits and q99 come out as from the
full cumulative sum, on samples that take either branch — to float rounding here, as the two
are separate compiled programs (the byte-identity, measured on one machine, is the
restructure check's; see the commit that added this file)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rmtbase.stats.fused as fused
from rmtbase.stats._magnitude import RANK_TOP, mag_index, mag_top, rank_cum
from rmtbase.stats.fused import count_finish, count_pass, range_finish, range_pass

TRIMS = (0.8, 0.9, 1.0)


def _samples():
    rng = np.random.default_rng(5)
    n = 6000
    zeros = rng.standard_normal(n)
    zeros[: n // 5] = 0.0  # a fifth exact zeros: under every octave
    return {
        "gaussian": rng.standard_normal(n),
        "cauchy": rng.standard_cauchy(n),  # |w| spans many octaves under max|w| / 256
        "zeros": zeros,
    }


def _counts(w):
    a = jnp.abs(jnp.asarray(w, jnp.float32))
    return jnp.bincount(mag_index(a, mag_top(jnp.max(a))), length=65538)


@pytest.mark.parametrize("name", ["gaussian", "cauchy", "zeros"])
def test_rank_cum_is_the_cumsum_where_ranks_are_read(name):
    cnt = _counts(_samples()[name])
    full = np.cumsum(np.asarray(cnt))
    below = 600
    got = np.asarray(jax.jit(lambda c: rank_cum(c, below))(cnt))
    under = int(full[-RANK_TOP - 1])
    if under < below:  # the top bins alone: exact there, 0 under them
        # exact: integer counts
        assert np.array_equal(got[-RANK_TOP:], full[-RANK_TOP:])
        assert not got[:-RANK_TOP].any()
    else:
        # exact: integer counts
        assert np.array_equal(got, full)


def test_the_samples_take_both_branches():
    full = {k: np.cumsum(np.asarray(_counts(w)))[-RANK_TOP - 1] for k, w in _samples().items()}
    assert full["gaussian"] < 600 <= min(full["cauchy"], full["zeros"])


def _finish(w, trims, cum_fn):
    n = w.size
    x = jnp.asarray(w, jnp.float32)
    geo = range_finish(range_pass(x, "float32"), n)
    acc = count_pass(x, geo, n, "float32")
    saved = fused.rank_cum
    fused.rank_cum = cum_fn
    try:
        out = jax.jit(lambda a, g: count_finish(a, g, n, trims, "float32"))(acc, geo)
    finally:
        fused.rank_cum = saved
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name", ["gaussian", "cauchy", "zeros"])
@pytest.mark.parametrize("trims", [(0.8,), TRIMS])
def test_fits_and_q99_are_those_of_the_full_cumsum(name, trims):
    w = _samples()[name]
    got = _finish(w, trims, rank_cum)
    want = _finish(w, trims, lambda cnt, below: jax.lax.associative_scan(jnp.add, cnt))
    assert len(got) == len(want)
    for g, v in zip(got, want, strict=True):
        # the same operations on the same integer counts in another program: a few float32
        # roundings at most (a rank read from a wrong bin moves k, λ or q99 by ~1e-3 or more)
        np.testing.assert_allclose(g, v, rtol=4 * np.finfo(np.float32).eps, atol=0)
