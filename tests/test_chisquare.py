"""Exact χ² sampler (Marsaglia–Tsang): law against scipy's χ² CDF, moments, batch independence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import chi2, kstest

from rmtbase.ensembles.chisquare import chi, chisquare

N = 20_000
ALPHA = 1e-3  # per KS test; 7 dof values, fixed keys


#: Three variates per key at one dof, the dof an argument: one program for every dof.
_draw_three = jax.jit(jax.vmap(lambda k, dof: chisquare(k, jnp.full((3,), dof)), (0, None)))


@pytest.mark.parametrize("dof", [1.0, 2.0, 3.0, 7.5, 40.0, 767.0, 5000.0])
def test_chisquare_law_and_moments(dof):
    keys = jax.random.split(jax.random.key(int(dof * 10)), N)
    x = np.asarray(_draw_three(keys, jnp.float32(dof)), dtype=np.float64)
    assert np.all(x > 0) and np.all(np.isfinite(x))
    for j in range(3):  # three independent variates per draw
        assert kstest(x[:, j], chi2(dof).cdf).pvalue > ALPHA
    flat = x.ravel()
    se_mean = np.sqrt(2 * dof / flat.size)
    assert abs(flat.mean() - dof) / se_mean < 5
    # sd of the sample variance: sqrt((μ4 − σ⁴)/n), μ4 = σ⁴(3 + 12/ν) for χ²_ν
    var = 2 * dof
    se_var = np.sqrt(var**2 * (2 + 12 / dof) / flat.size)
    assert abs(flat.var(ddof=1) - var) / se_var < 5
    # the three columns are uncorrelated (|r| < 5/√N)
    r = np.corrcoef(x.T)[np.triu_indices(3, 1)]
    assert np.abs(r).max() < 5 / np.sqrt(N)


def test_draw_does_not_depend_on_batch():
    """A lane keeps its first accepted value while other lanes of a vmap batch still loop (equal
    up to the last-bit rounding of vectorised vs scalar code)."""
    dof = jnp.asarray([1.0, 2.0, 700.0, 64.0])
    keys = jax.random.split(jax.random.key(7), 256)
    batched = np.asarray(jax.vmap(lambda k: chisquare(k, dof))(keys))
    single = np.stack([np.asarray(chisquare(keys[i], dof)) for i in (0, 17, 255)])
    np.testing.assert_allclose(batched[[0, 17, 255]], single, rtol=1e-6)


def test_chi_is_root_and_dtype():
    k = jax.random.key(3)
    dof = jnp.arange(1.0, 9.0)
    np.testing.assert_allclose(np.asarray(chi(k, dof)) ** 2, np.asarray(chisquare(k, dof)),
                               rtol=1e-6)
    assert chisquare(k, dof).dtype == jnp.float32
    with jax.enable_x64(True):
        assert chisquare(k, dof.astype(jnp.float64), jnp.float64).dtype == jnp.float64


def test_acceptance_tail_against_mpmath():
    """R(t) = ln(1+t) − t + t²/2 − t³/3, the cancellation-free form of Marsaglia–Tsang's test,
    against 50-digit mpmath in both precisions (float32 ≤ 2e-6, float64 ≤ 1e-12 relative)."""
    import mpmath as mp

    from rmtbase.ensembles.chisquare import _log1p_tail

    ts = [-0.99, -0.5, -0.4999, -0.25, -0.1, -0.0999, -1e-3, 1e-4, 0.01, 0.0999, 0.1, 0.2,
          0.4999, 0.5, 0.7, 3.0]
    with mp.workdps(50):
        def ref(t):
            t = mp.mpf(float(t))
            return float(mp.log1p(t) - t + t**2 / 2 - t**3 / 3)

        with jax.enable_x64(True):
            for dtype, tol in ((np.float32, 2e-6), (np.float64, 1e-12)):
                x = np.asarray(ts, dtype)
                got = np.asarray(_log1p_tail(jnp.asarray(x)), dtype=np.float64)
                want = np.array([ref(t) for t in x])
                assert np.abs(got / want - 1).max() < tol, dtype
    assert float(_log1p_tail(jnp.asarray([-1.0]))[0]) == -np.inf


def test_invalid_dof_gives_nan_not_a_hang():
    x = np.asarray(chisquare(jax.random.key(0), jnp.asarray([-3.0, 0.0, jnp.nan, 4.0])))
    assert np.isnan(x[:3]).all() and x[3] > 0


def test_below_two_false_leaves_the_numbers():
    """below_two=False (every dof ≥ 2) only drops the boost that would keep every value: the
    same χ² variates, vmapped as the Bartlett samplers draw them, and eagerly."""
    dof = jnp.arange(576, 512, -1).astype(jnp.float32)
    keys = jax.random.split(jax.random.key(5), 125)
    run = lambda flag: np.asarray(jax.jit(jax.vmap(  # noqa: E731
        lambda k: chisquare(k, dof, below_two=flag)))(keys))
    # exact: the same rejection loop in both programs, then a select that keeps g and ×2
    np.testing.assert_array_equal(run(False), run(True))
    # exact: as above, eager (one compiled program per static flag)
    np.testing.assert_array_equal(np.asarray(chisquare(keys[0], dof, below_two=False)),
                                  np.asarray(chisquare(keys[0], dof)))
