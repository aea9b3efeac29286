"""Q4_0/Q5_0's scale from the entry of largest size when the block's max and min are equally
large (rmtbase.stats.precision._symmetric finds it by min reductions, not argmax and a
gather): the first of the two, as ggml's quantize_row_q{4,5}_0_ref loop picks it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats.precision import round_trip


def _ggml(block: np.ndarray, half: int) -> np.ndarray:
    """ggml's reference loop in float32: the first entry of strictly largest |x| sets d."""
    amax, xmax = np.float32(0), np.float32(0)
    for v in block:
        if amax < abs(v):
            amax, xmax = abs(v), v
    d = np.float32(xmax / np.float32(-half))
    inv = np.float32(1) / d if d != 0 else np.float32(0)
    q = np.minimum(2 * half - 1, np.floor(block * inv + np.float32(half + 0.5)))
    return ((q - half) * np.float32(np.float16(d))).astype(np.float32)


@pytest.mark.parametrize("fmt, half", [("q4_0", 8), ("q5_0", 16)])
def test_ties_take_the_first_of_max_and_min(fmt, half):
    rng = np.random.default_rng(59)
    blocks = (0.02 * rng.standard_normal((6, 32))).astype(np.float32)
    blocks[0, [3, 17]] = [0.5, -0.5]  # tie, the max first
    blocks[1, [3, 17]] = [-0.5, 0.5]  # tie, the min first
    blocks[2, [0, 31]] = [-0.5, 0.5]
    blocks[3, :] = 0.0                # all zero: d = 0
    blocks[4, [5, 6, 7]] = [0.25, -0.25, 0.25]
    got = np.asarray(jax.jit(lambda w: round_trip(w, fmt))(jnp.asarray(blocks)))
    want = np.stack([_ggml(b, half) for b in blocks])
    np.testing.assert_array_equal(got, want)  # exact: ggml's arithmetic, float32 throughout
    # the tie decides the sign of d: the entry that sets it is exact, the other one level in
    # (15/16 of it at Q5_0, 7/8 at Q4_0); the other pick would swap them
    top = (half - 1) / half * 0.5
    assert (got[0, 3], got[0, 17]) == (0.5, -top) and (got[1, 3], got[1, 17]) == (-0.5, top)
