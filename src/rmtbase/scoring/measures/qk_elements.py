"""W_QK's element statistics and histogram for every head of a layer, on worker threads.

Each head's d×d W_Qᵀ W_K is formed once, in one compiled function with its estimator's passes
and histogram (:func:`_compiled`), one head per thread at a time, heads split over
:func:`scoring_threads` threads (no number depends on the count); run after the layer's other
statistics, whose XLA threads would oversubscribe the cores."""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...errors import InputError
from .qk_histogram import finish, passes_and_histogram

#: Weibull trim of the element statistics: ``stats.head_stats``' default, with which the null
#: tables are made.
TRIM = 0.8


#: Most heads per compiled call. JAX copies a call's numpy inputs (2 × heads × d_h × d floats:
#: 256 MB for 32 heads at LLaMA-70B's d = 8192, per thread); the heads of a call are a
#: ``lax.map``, so the number per call changes no number (as the thread count does not).
HEADS_PER_CALL = 8


def scoring_threads() -> int:
    """Threads for LAPACK-free per-head work: ``$RMTBASE_THREADS`` or min(2, CPU count). The same
    executable runs per head either way, so the numbers do not depend on it."""
    env = os.environ.get("RMTBASE_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise InputError(f"RMTBASE_THREADS must be a positive integer, got {env!r}") from None
    return max(1, min(2, os.cpu_count() or 1))


@functools.cache
def _compiled():
    """Two jax.jit programs, head by head (``lax.map``): W_QK's passes and histogram
    (:func:`rmtbase.scoring.measures.qk_histogram.passes_and_histogram`), then
    :func:`rmtbase.scoring.measures.qk_histogram.finish` (``n`` = d²) compiled with
    :data:`rmtbase._compiled.FEW_CALLS` (same bytes, shorter compilation)."""
    import jax

    from ..._compiled import few_calls

    passes = jax.jit(lambda wq, wk, scale: jax.lax.map(lambda a: passes_and_histogram(*a),
                                                        (wq, wk, scale)))

    def finished(acc, d):
        return jax.lax.map(lambda a: {f"qk.{s}": v for s, v in finish(a, d * d, TRIM).items()},
                           acc)

    return passes, jax.jit(finished, static_argnums=1, compiler_options=few_calls())


def hist_scale(q_rms, k_rms, d_h: int) -> np.ndarray:
    """√d_h σ̂_Q σ̂_K per head (σ̂ the heads' entry rms, ``q.rms``/``k.rms`` of
    :func:`rmtbase.stats.head_stats`), the unit of the W_QK histogram, in float32."""
    return (np.sqrt(d_h) * np.asarray(q_rms, np.float64) * np.asarray(k_rms, np.float64)) \
        .astype(np.float32)


def _chunks(n: int, k: int):
    """k index chunks of equal length over n heads (the last padded with its first head)."""
    size = -(-n // k)
    out = []
    for i in range(k):
        idx = np.arange(i * size, min(n, (i + 1) * size))
        out.append((np.concatenate([idx, np.full(size - idx.size, idx[0] if idx.size else 0)]),
                    max(0, min(n, (i + 1) * size) - i * size)))
    return out


def _take(a, idx):
    """``a[idx]``, as a view where ``idx`` is a run of consecutive heads (a copy of a layer's
    heads is 2 × 128 MB per thread at LLaMA-70B's d = 8192)."""
    if idx.size and idx[-1] - idx[0] == idx.size - 1 and np.all(np.diff(idx) == 1):
        return a[idx[0]:idx[-1] + 1]
    return a[idx]


def qk_elements(wq, wk, scale, threads: int | None = None) -> tuple[dict, np.ndarray]:
    """Element statistics and histogram of W_QK / ``scale`` (:func:`hist_scale`, one per head)
    of every head's W_QK = W_Qᵀ W_K (wq, wk: numpy (n, d_h, d)) on ``threads`` (default
    :func:`scoring_threads`) threads: ({"qk.<stat>": (n,)}, (n, bins) histograms), in head
    order. (The factors' own statistics: :func:`rmtbase.scoring.measures.layer_stats.layer_stats`.)"""
    import jax

    n = wq.shape[0]
    threads = max(1, min(threads or scoring_threads(), n))
    size = min(-(-n // threads), HEADS_PER_CALL)
    chunks = _chunks(n, -(-n // size))
    passes, finished = _compiled()

    def run(idx):
        acc, hist = passes(_take(wq, idx), _take(wk, idx), scale[idx])
        out = finished(acc, wq.shape[-1]), hist
        return jax.tree_util.tree_map(np.asarray, jax.block_until_ready(out))

    if len(chunks) == 1:
        parts = [run(chunks[0][0])]
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="rmtbase-qk") as pool:
            parts = list(pool.map(run, [idx for idx, _ in chunks]))
    kept = [(p, m) for p, (_, m) in zip(parts, chunks, strict=True) if m > 0]
    stats = {s: np.concatenate([p[0][s][:m] for p, m in kept]) for s in parts[0][0]}
    return stats, np.concatenate([p[1][:m] for p, m in kept])


__all__ = ["hist_scale", "qk_elements", "scoring_threads"]
