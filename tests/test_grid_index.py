"""The Weibull fit's cumulative y table is read at integer ranks by a bit table of its grid
(``stats._binning._grid_index``) instead of ``jnp.interp``'s binary search: the same grid
interval at every rank 0 ≤ t ≤ N (integers, exact), and then jnp.interp's formula, step for
step. Its values are compared with jnp.interp's to float rounding: the two are separate
compiled programs (the byte-identity of a table's draws, measured on one machine, is the
restructure check's; see the commit that added this file)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats._binning import GRID_WORDS_MAX_N, _cum_y, _cum_y_table, _grid_index


def _reference(t, n, dtype):
    grid, vals = _cum_y_table(n)
    return jnp.interp(t.astype(dtype), jnp.asarray(grid, dtype), jnp.asarray(vals, dtype))


@pytest.mark.parametrize("n", [2, 3, 31, 32, 33, 64, 2047, 4097, 5000, 36864, 331776])
def test_grid_index_is_searchsorted(n):
    grid = _cum_y_table(n)[0]
    t = np.arange(n + 1)
    got = np.asarray(jax.jit(lambda x: _grid_index(x, n))(jnp.asarray(t, jnp.int32)))
    # exact: integer indices
    np.testing.assert_array_equal(got, np.searchsorted(grid, t, side="right"))


def _close(got, want, eps):
    """Within 4 roundings of the largest |C| (the interpolation is 4 operations; separate
    programs may round or contract them differently); a wrong grid interval moves C by a
    whole table step, orders of magnitude more."""
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * eps * np.abs(want).max())


@pytest.mark.parametrize("n", [2, 33, 4097, 36864, 409600])
def test_cum_y_matches_interp_bit_for_bit(n):
    t = jnp.arange(n + 1, dtype=jnp.int32)
    got = jax.jit(lambda x: _cum_y(x, n, jnp.float32))(t)
    want = np.asarray(jax.jit(lambda x: _reference(x, n, jnp.float32))(t))
    _close(np.asarray(got), want, np.finfo(np.float32).eps)


def test_cum_y_matches_interp_float64():
    n = 36864
    with jax.enable_x64(True):
        t = jnp.arange(n + 1, dtype=jnp.int64)
        got = jax.jit(lambda x: _cum_y(x, n, jnp.float64))(t)
        want = np.asarray(jax.jit(lambda x: _reference(x, n, jnp.float64))(t))
        _close(np.asarray(got), want, np.finfo(np.float64).eps)


def test_large_n_keeps_the_binary_search():
    n = GRID_WORDS_MAX_N + 1
    t = jnp.asarray([0, 1, n // 3, n - 1, n], jnp.int32)
    # exact: above the limit _cum_y calls jnp.interp itself, eagerly, as the reference does
    assert np.array_equal(np.asarray(_cum_y(t, n, jnp.float32)),
                          np.asarray(_reference(t, n, jnp.float32)))
