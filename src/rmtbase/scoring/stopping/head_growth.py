"""A per-head null's draws grown for the heads whose decision is open.

Under the permutation null, unless ``draws`` is fixed, a head whose decision could differ at
:data:`MAX_FACTOR` times its first draws gets :data:`GROWTH` times more permutations, up to
:data:`MAX_FACTOR`, continuing the stream; a step beyond memory (:func:`fits`) is skipped.
"""

from __future__ import annotations

import math

import numpy as np

from ..nulls.permutation import CHUNK, permutation_null

#: Each step multiplies an open head's draws by this; a head stops at :data:`MAX_FACTOR`.
GROWTH, MAX_FACTOR = 3, 9
#: The sizes a head can be decided at (×1, ×3, ×9): the looks the bracket's error is split
#: over (:func:`rmtbase.scoring.stopping.joint_growth._grow_heads`).
LOOKS = 1 + round(math.log(MAX_FACTOR, GROWTH))


def can_grow(ref) -> bool:
    """A per-head reference whose draws the caller did not fix (first draws a multiple of
    :data:`~rmtbase.scoring.nulls.permutation.CHUNK`, so the stream continues exactly)."""
    return bool(getattr(ref, "fixed", True) is False and ref.draws % CHUNK == 0)


def factors(ref) -> np.ndarray:
    """Each head's factor over its first draws, ``(layer, head)`` (1 before any growth)."""
    if ref.factor is None:
        ref.factor = np.ones(np.asarray(ref.joint["q.rms"]).shape[:2], dtype=np.int64)
    return ref.factor


def calibration_draws(ref, family) -> np.ndarray:
    """``(layer, head)``: the draws of each head at which every statistic of ``family`` is
    defined (those its omnibus calibration reads, :mod:`rmtbase.decision.verdict`)."""
    names = [k for k in family if k in ref.joint] or ["q.rms"]
    ok = np.ones(np.asarray(ref.joint[names[0]]).shape, dtype=bool)
    for k in names:
        ok &= np.isfinite(np.asarray(ref.joint[k]))
    return ok.sum(axis=-1)


def final_draws(ref, family) -> np.ndarray:
    """``(layer, head)``: each head's calibration draws at :data:`MAX_FACTOR` times its first."""
    return calibration_draws(ref, family) * (MAX_FACTOR // factors(ref))


def fits(ref, factor: int) -> bool:
    """Whether every head's draws held at ``factor`` times the first (each statistic a
    ``(layer, head, draws)`` float64 array, NaN where a head has fewer) fit in memory
    (:func:`rmtbase.baseline.limits.check_stored_values`); a run that does not fit keeps its
    draws and states the open heads (``head_open_decisions``)."""
    from ...baseline.limits import check_stored_values
    from ...errors import InputError

    heads = int(np.prod(np.asarray(ref.joint["q.rms"]).shape[:2]))
    try:
        check_stored_values(heads * len(ref.joint) * ref.draws * int(factor), 8, "")
    except InputError:
        return False
    return True


def grow(ref, heads) -> int:
    """:data:`GROWTH` times more draws for the heads ``heads`` (``(layer, head)`` bool, each
    below :data:`MAX_FACTOR`), all at the same factor; returns the heads grown."""
    fac = factors(ref)
    li, hi = np.nonzero(heads)
    f = int(fac[li[0], hi[0]])
    if not np.all(fac[li, hi] == f) or f * GROWTH > MAX_FACTOR:
        raise ValueError("heads grown together must share a factor below the largest")
    have, stop = ref.draws * f, ref.draws * f * GROWTH
    n_el = min(stop, ref.element_draws * f * GROWTH) if ref.element_draws else 0
    first = min(have, (ref.element_draws * f) // CHUNK * CHUNK) if n_el else have
    wq = np.stack([ref.cells.factors[a][0][b] for a, b in zip(li, hi, strict=True)])[None]
    wk = np.stack([ref.cells.factors[a][1][b] for a, b in zip(li, hi, strict=True)])[None]
    from ...stats.choice import chosen

    new = permutation_null(wq, wk, draws=(first, stop), element_draws=n_el, seed=ref.seed,
                           statistics=chosen(ref.cells.tested))
    size = max(stop, np.asarray(ref.joint["q.rms"]).shape[-1])
    joint = {}
    for k, old in ref.joint.items():
        arr = np.full(old.shape[:2] + (size,), np.nan)
        arr[..., :old.shape[-1]] = old
        if k in ("q.rms", "k.rms"):  # each head's own rms, at every draw
            arr[...] = old[..., :1]
        elif k in new:  # a spectral statistic keeps its first draws, an element one fills in
            lo = have if np.isfinite(old[li, hi, have - 1]).all() else first
            arr[li, hi, lo:stop] = new[k][0][:, lo - first:]
        joint[k] = arr
    ref.joint = joint
    fac[li, hi] = f * GROWTH
    return int(li.size)


__all__ = ["GROWTH", "LOOKS", "MAX_FACTOR", "calibration_draws", "can_grow", "factors", "final_draws",
           "fits", "grow"]
