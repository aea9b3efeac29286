"""A CPU null table's element statistics through scoring's compiled programs (issue 59 item 4).

:func:`rmtbase.baseline.null.null_draws` on CPU loops over draws inside one compiled program
(``lax.map``). Where that program would also take every draw's element statistics (W_Q, W_K
and W_QK, :func:`rmtbase.stats.head_stats`), :func:`draw_apart` instead has it return the
draw's factors (W_Q, W_K after their storage round trip) beside its rms and spectral
statistics, and takes the element statistics one draw a call through the programs a score of
the same cell calls one head a call (:mod:`rmtbase.stats.head_elements`): W_QK's and W_Q's by
``compiled(("q",), storage)`` (its histogram discarded), W_K's by ``_element_stats_flat`` on
one row. A cold quantised score then compiles those programs once instead of also compiling
their copies inlined in the table's draw program: the draw program of a Q4_1 table at 576×64
compiled in 3.8 CPU-s with them (benchmarks/compile_cpu.py). The cost is two dispatches per
draw.

Same numbers: every variable of a 200-draw Q4_1 table at 576×64 had the same bytes both ways
(``tests/test_head_elements.py`` keeps comparing, on a smaller cell). Draw i is still a
function of ``fold_in(key, i)`` only; the chunk (draws per call of the draw program) changes no
number and is capped here so that a chunk's factors stay under :data:`FACTOR_BYTES`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

#: Most bytes of factors (W_Q and W_K of a chunk's draws) held on the host at once.
FACTOR_BYTES = 64 * 2**20


def apart(req, use_map: bool) -> bool:
    """Whether :func:`draw_apart` draws ``req`` (a :class:`rmtbase.baseline.null.Draws`): the
    CPU loop (``use_map``) of the float32 lowrank ensemble with element statistics, stored in
    a GGUF format other than float32 (float16, bfloat16, the legacy and K-quant blocks: every
    variable agreed in its bytes both ways, 13-draw tables at 256×32 for each of the 12, a
    40-draw Q5_0 table at 640×256, 200 draws of Q4_1 at 576×64). Not float32 storage nor the
    FP8 ones: there the factors' statistics inlined in the draw program (the normals never
    stored, or a 128-row scale tile cut to the head) came out other bits than from the
    factors stored apart (std, skewness, kurtosis, σ_fit, entropy of W_Q, W_K in the last
    bits: 10 of 45 variables for float32 at 128×32, 9 to 12 of 45 for the three FP8 formats at
    256×32)."""
    return (use_map and req.ensemble == "lowrank" and req.stats in ("all", "elementwise")
            and req.dtype == jnp.float32 and not req.storage.is_identity
            and req.storage.gguf is not None)


def draw_apart(fn, req, key, n: int, chunk: int, progress=False) -> dict:
    """``n`` draws of ``req``: ``fn`` (the draw function of ``req`` with ``apart=True``: its
    statistics without the element ones, and ``"wq"``, ``"wk"``) in chunks of at most
    ``chunk`` draws, then each draw's element statistics one call at a time. The keys and
    numbers of :func:`rmtbase.baseline.null.null_draws`."""
    from ..ensembles.draws import _chunk_keys, _chunk_runner, _draw_devices
    from ..stats.elementwise import _element_stats_flat
    from ..stats.head_elements import compiled

    devices = _draw_devices()
    per = 2 * req.d_h * req.d * jnp.dtype(req.dtype).itemsize
    chunk = max(1, min(chunk, FACTOR_BYTES // per))
    chunk = -(-chunk // len(devices)) * len(devices)
    run = _chunk_runner(fn, chunk, "map", devices)
    storage = req.storage.name
    qk = compiled(("q",), storage, req.trim)
    one = np.ones(1, np.float32)  # the histogram's scale: the histogram is discarded
    own_bar = progress is None or isinstance(progress, bool | int)
    if own_bar:
        from ..progress import progress_bar

        bar = progress_bar(n, desc="rmtbase draws", unit="draw", enabled=bool(progress))
    else:
        bar = progress
    out = None
    try:
        for start in range(0, n, chunk):
            res = jax.tree_util.tree_map(np.asarray, run(_chunk_keys(key, start, chunk)))
            take = min(chunk, n - start)
            wq, wk = res.pop("wq"), res.pop("wk")
            calls = [(qk(wq[i:i + 1], wk[i:i + 1], one)[0],
                      _element_stats_flat(wk[i].reshape(1, -1), req.trim, storage))
                     for i in range(take)]
            for i, (s, k) in enumerate(calls):
                for name, v in [*s.items(), *((f"k.{m}", v) for m, v in k.items())]:
                    v = np.asarray(v)
                    res.setdefault(name, np.empty(chunk, v.dtype))[i] = v[0]
            if out is None:
                out = {name: np.empty((n, *a.shape[1:]), a.dtype) for name, a in res.items()}
            for name, a in res.items():
                out[name][start:start + take] = a[:take]
            if bar is not None:
                bar.update(take)
    finally:
        if own_bar:
            bar.close()
    return dict(sorted(out.items()))  # the inlined program's order (a jit's dict output)
