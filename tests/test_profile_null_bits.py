"""The block-format profile null's cheaper chunk draws what format 4's did
(rmtbase.scoring.profile.factors._stored_null): symmetry's ‖W_QK‖² summed from the
Grams' upper blocks gives the whole products' statistic in a vmapped batched program, and a
chunk with stored normals or a stored round trip, blocked Grams, 5 heads a loop step at
d_h ≥ 256 and its own XLA options gives the chunk built as format 4 was (normals fused into
the round trip, whole Grams, 10 heads a step, default options). Format 5 (Grams assembled from
their blocks, 10 heads a step, default options) held bit for bit on the x86-64 AVX-512 machine
where it was written (922cb3b, a13460d); format 6 sums the blocks in another order and its
input focus sums 5 heads' columns otherwise, so the two programs are compared to 10⁻² of the
draws' own spread (a wrong factor moves a statistic by the order of that spread, a wrong block
does on factors with a shared part; the last bits moved by ≤ 7·10⁻⁶ of it at 640 × 256 Q5_0),
and the cache files took a new format (rmtbase.scoring.profile.cache.STORED_FORMAT = 6). Under
the quick tier's XLA optimisation level 0 (tests/conftest.py) format 5 differed too: a normal
computed in another fusion rounded otherwise and one quantised entry moved by a lattice step,
moving 2 of 250 heads' k_input_focus by 6·10⁻⁷ (1.4·10⁻³ of its spread) at 640 × 256 Q5_0."""

from __future__ import annotations

import numpy as np
import pytest

cpu_only = pytest.mark.skipif(
    __import__("jax").default_backend() != "cpu",
    reason="the bits are XLA's CPU code's (another backend's products sum in other orders)")


def _batched(fn, *args):
    """``fn`` over the leading axis of ``args`` as the null's loop runs it: jitted, lax.map with
    batch_size 10 (vmapped heads)."""
    import jax

    return np.asarray(jax.jit(lambda *a: jax.lax.map(lambda x: fn(*x), a, batch_size=10))(*args))


@cpu_only
@pytest.mark.parametrize("d_h, d", [(256, 640), (512, 1024)])
def test_blocked_grams_give_the_whole_products_symmetry(d_h, d):
    """symmetry(blocks=True) (‖W_QK‖² summed from the upper 64-row blocks of each Gram) equals
    symmetry(blocks=False) (to 10⁻² of the draws' spread), on Gaussian factors with a planted
    symmetric part (independent factors hide a missing off-diagonal block: its terms have mean
    zero), and both equal a float64 numpy route through the d × d product to 1e-6 (the ratio is
    bounded by 1); the blocked ‖W_QK‖² itself equals float64's tr(G_Q G_K) to 1e-5 relative."""
    from rmtbase.stats.alignment import _gram_inner, symmetry

    rng = np.random.default_rng(11)
    wq = rng.standard_normal((20, d_h, d)).astype(np.float32)
    wk = (rng.standard_normal((20, d_h, d)) + 0.3 * wq).astype(np.float32)
    whole = _batched(lambda q, k: symmetry(q, k), wq, wk)
    blocked = _batched(lambda q, k: symmetry(q, k, blocks=True), wq, wk)
    np.testing.assert_allclose(blocked, whole, rtol=0, atol=1e-2 * whole.std())
    for h in (0, 19):
        wqk = wq[h].astype(np.float64).T @ wk[h].astype(np.float64)
        want = np.trace(wqk @ wqk) / np.sum(wqk * wqk)
        assert abs(blocked[h] - want) <= 1e-6, (h, blocked[h], want)
    assert blocked.min() > 0.05  # the planted part is read (unrelated factors: ~1/d)
    inner = _batched(lambda q, k: _gram_inner(q, k, True), wq, wk)
    q64, k64 = wq[:2].astype(np.float64), wk[:2].astype(np.float64)
    want = np.einsum("hij,hij->h", q64 @ np.swapaxes(q64, -1, -2), k64 @ np.swapaxes(k64, -1, -2))
    np.testing.assert_allclose(inner[:2], want, rtol=1e-5)


def test_blocks_leave_small_heads_alone():
    """Below 4 blocks of 64 rows (d_h = 64, 128, 96) ‖W_QK‖² is from the whole Grams."""
    import jax.numpy as jnp

    from rmtbase.stats import alignment as al

    rng = np.random.default_rng(2)
    for d_h in (64, 96, 128):
        wq, wk = (jnp.asarray(rng.standard_normal((2, d_h, 32)), jnp.float32) for _ in "qk")
        assert al._gram_inner(wq, wk, True).shape == (2,)
        # exact: below 4 blocks both calls run the same products on the same input
        assert np.array_equal(np.asarray(al._gram_inner(wq, wk, True)),
                              np.asarray(al._gram_inner(wq, wk, False)))


def _format4_chunk(d, d_h, storage):
    """The chunk as format 4 was first built: each factor's normals fused into its round trip,
    the whole Grams (rmtbase.scoring.profile.factors._stored_null before the stored normals)."""
    import jax
    import jax.numpy as jnp

    from rmtbase.ensembles.threefry import normal
    from rmtbase.scoring.profile import factors as fa
    from rmtbase.stats.precision import null_rows, round_trip

    rows = null_rows(storage, d_h)

    def one(key):
        kq, kk = jax.random.split(key)
        wq = round_trip(normal(kq, (rows, d), jnp.float32), storage)[:d_h]
        wk = round_trip(normal(kk, (rows, d), jnp.float32), storage)[:d_h]
        return fa.factor_profile_jax(wq, wk)

    def chunk(key):
        keys = jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(fa._CHUNK))
        return jax.lax.map(one, keys, batch_size=fa._HEADS)

    return jax.jit(chunk)


@cpu_only
@pytest.mark.parametrize("d, d_h, name", [
    pytest.param(640, 256, "q5_0", marks=pytest.mark.slow),  # ~11 s: the 640 × 256 compile
    (576, 64, "q8_0"), (576, 64, "q4_1")])
def test_stored_normals_and_blocked_grams_keep_format_4(d, d_h, name):
    """One chunk (250 heads) of _stored_null equals the format-4 chunk built as before, every
    axis to 10⁻² of its spread (format 5 bit for bit where written; format 6 within 10⁻⁵ of it):
    at the Gemma-3 shape Q5_0's normals stored, d_h = 256's Grams by blocks and 5 heads a loop
    step, at 576 × 64 Q8_0's stored normals alone and Q4_1's stored round trip, all under the
    chunk's XLA options. ~10 s of CPU for the first, ~3 s each for the others, mostly compiling.
    """
    import jax

    from rmtbase.scoring.profile import factors as fa
    from rmtbase.stats.storage import storage_record

    record = storage_record(name)
    assert record.name in fa._STORED_ONCE
    key = jax.random.fold_in(jax.random.key(0), 3)
    now = fa._stored_null(d, d_h, record)(key)
    before = _format4_chunk(d, d_h, record)(key)
    for axis in fa.FACTOR_AXES:
        b = np.asarray(before[axis])
        np.testing.assert_allclose(np.asarray(now[axis]), b, rtol=0, atol=1e-2 * b.std(),
                                   err_msg=axis)
