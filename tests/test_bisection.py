"""stats._bisection.tridiagonal_eigvals gives jax.scipy.linalg.eigh_tridiagonal's eigenvalues
bit for bit (it is the same bisection with the Sturm loop rolled, for a cheaper compile), and
both agree with LAPACK (numpy.linalg.eigvalsh) to the bisection's tolerance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import eigh_tridiagonal

from rmtbase.stats._bisection import tridiagonal_eigvals


def _tridiagonals(n, batch, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((batch, n)).astype(dtype)
    e = rng.standard_normal((batch, max(n - 1, 0))).astype(dtype)
    if n > 2 and batch >= 3:  # a few hard cases: a zero off-diagonal (split), repeated diagonal, tiny entries
        e[0, n // 2] = 0
        d[1] = 1.0
        e[2] *= np.asarray(1e-20, dtype)
    return d, e


@pytest.mark.parametrize("n", [1, 2, 3, 16, 17, 33, 64])
def test_same_bits_as_jax_vmapped_and_jitted(n):
    d, e = _tridiagonals(n, 12, n)
    ours = jax.jit(jax.vmap(tridiagonal_eigvals))(d, e)
    ref = jax.jit(jax.vmap(lambda a, b: eigh_tridiagonal(a, b, eigvals_only=True)))(d, e)
    # exact: the same correctly rounded IEEE operations (+ − × ÷, compare, select, max/min; no
    # transcendental, no sum) in the same order in both programs, so no instruction set can
    # round them apart (stats/_bisection.py docstring); that identity is the claim under test
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))


def test_same_bits_one_matrix_and_against_lapack():
    d, e = _tridiagonals(40, 1, 7)
    ours = np.asarray(tridiagonal_eigvals(jnp.asarray(d[0]), jnp.asarray(e[0])))
    ref = np.asarray(eigh_tridiagonal(d[0], e[0], eigvals_only=True))
    # exact: correctly rounded IEEE operations only, in the same order, as above
    np.testing.assert_array_equal(ours, ref)
    t = np.diag(d[0].astype(np.float64)) + np.diag(e[0].astype(np.float64), 1) \
        + np.diag(e[0].astype(np.float64), -1)
    lapack = np.linalg.eigvalsh(t)
    # bisection to eps·‖T‖ per eigenvalue plus float32 rounding of the recurrence: 40·eps·‖T‖
    tol = 40 * np.finfo(np.float32).eps * np.abs(lapack).max()
    assert np.max(np.abs(ours - lapack)) <= tol
