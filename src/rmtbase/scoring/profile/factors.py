"""The profile's factor axes for model heads (:func:`factor_profile`) and their exact-law
Gaussian null at (d, d_h) (:func:`profile_null`); the axes are defined in
:mod:`rmtbase.decision.axes`, their statistics in :mod:`rmtbase.stats.alignment`.

- Alignment, symmetry depend only on the Gram of X = [W_Q; W_K]; for N(0, 1) entries and d ≥ 2d_h, X
  Xᵀ ~ W_{2d_h}(I, d) with Bartlett factor L, so (L[:d_h], L[d_h:]) has the factors' Gram in law
  (:func:`block_axes`); for d < 2d_h factors are drawn whole.
- Input focus: squared CV of column energies e_j = Σ_i W[i, j]², i.i.d. χ²_{d_h} under the null.
- Axes are read one at a time, so independent variates per axis keep each law. 16-bit floats share
  float32 (:func:`null_storage`); block formats and FP8 draw factors through the round trip.
  :data:`PROFILE_DRAWS` = 18,000 keeps the size error
κ·√(α(1 − α)/N) under a quarter of a 1,000-head calibration's se.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ...decision.axes import FACTOR_AXES
from ...decision.axes import REGISTRY as AXIS_REGISTRY

if TYPE_CHECKING:
    from ...stats.storage import Storage

#: Gaussian null draws of the new axes per null storage, sized by the null's own Monte Carlo
#: error (module docstring, "Size"): 18,000 keep it below a quarter of the binomial
#: se of a 1,000-head calibration (2,000 did not: 0.71 of it).
PROFILE_DRAWS = 18_000
_CHUNK = 250
#: Heads of a block-format or FP8 null drawn together inside a chunk's loop (:func:`_stored_null`):
#: 10, or 5 where d_h ≥ 256 (:func:`_heads`).
_HEADS = 10
#: XLA compiler options of the block-format/FP8 chunk's program on the CPU (format 6): LLVM's
#: vectors of 512 bits where the CPU has them and HLO optimisation level 1 (a shorter compile,
#: the same run time), with XLA's default MLIR fusion emitters stated (as in
#: ``rmtbase._compiled.MANY_CALLS``: an ``XLA_FLAGS`` that turns them off does not reach this
#: hot loop). Per program, never ``XLA_FLAGS``; another backend gets none.
_CHUNK_OPTIONS = {"xla_cpu_prefer_vector_width": 512, "xla_backend_optimization_level": 1,
                  "xla_cpu_use_fusion_emitters": True}


def factor_profile(wq, wk) -> dict[str, np.ndarray]:
    """The new axes' values of heads ``(..., d_h, d)`` (:mod:`rmtbase.stats.alignment`), by
    one compiled program per shape (:func:`_compiled_profile`), the same for model heads and
    for the Gaussian null's factor draws (block formats, FP8)."""
    out = _compiled_profile()(wq, wk)
    return {a: np.asarray(v, dtype=np.float64) for a, v in out.items()}


@lru_cache(maxsize=1)
def _compiled_profile():
    """``jit(factor_profile_jax)``: the four statistics in fused passes over the factors."""
    import jax

    return jax.jit(factor_profile_jax)


def factor_profile_jax(wq, wk, blocks: bool = False) -> dict:
    """:func:`factor_profile` without leaving JAX (for use under ``jit``); ``blocks``: symmetry's
    Grams by blocks (:func:`rmtbase.stats.alignment.symmetry`; the null's loop, same values)."""
    return {a: AXIS_REGISTRY.peek(a).fn(wq, wk, blocks) for a in FACTOR_AXES}


def null_storage(storage: str | Storage) -> Storage:
    """The storage record whose profile null serves heads stored as ``storage``: float32 for every
    float storage, its own for block formats and FP8. InputError for an unknown name."""
    from ...stats.storage import FLOAT32, storage_record

    record = storage_record(storage)
    return FLOAT32 if record.is_float else record


def profile_null(d: int, d_h: int, storage: str | Storage = "float32", n: int = PROFILE_DRAWS,
                 seed: int = 0, client=None, progress=None, start: int = 0
                 ) -> dict[str, np.ndarray]:
    """``{axis: (n,)}`` Gaussian null draws of :data:`FACTOR_AXES` at (d, d_h) for ``storage`` (name
    or record), in chunks of 250 heads; chunk i depends on (seed, i) alone, so Dask (``client``,
    or inside a task) gives the same bits. ``progress``: advanced per chunk. ``start``: return
    draws ``start .. n − 1`` only (a table's continuation)."""
    import contextlib

    import jax

    from ...baseline.task_cluster import map_in_order, task_client

    storage = null_storage(storage)  # a record from here on
    x64 = bool(jax.config.read("jax_enable_x64"))  # a chunk on another worker runs as here
    first = int(start) // _CHUNK
    args = [(d, d_h, storage, seed, i, min(_CHUNK, n - i * _CHUNK), x64)
            for i in range(first, -(-int(n) // _CHUNK))]
    with contextlib.nullcontext(client) if client is not None else task_client() as c:
        if c is None:
            parts = []
            for a in args:
                parts.append(_profile_chunk(*a))
                if progress is not None:
                    progress.update(a[5] - max(0, int(start) - a[4] * _CHUNK))
        else:
            parts = map_in_order(c, _profile_chunk, args)
            if progress is not None:
                progress.update(n - int(start))
    skip = int(start) - first * _CHUNK
    return {a: np.concatenate([p[a] for p in parts] or [np.zeros(0)])[skip:]
            for a in FACTOR_AXES}


def _profile_chunk(d: int, d_h: int, storage: Storage, seed: int, i: int, m: int,
                   x64: bool) -> dict:
    """Chunk ``i`` (``m`` heads) of :func:`profile_null` under ``jax_enable_x64 = x64``; head j from
    ``fold_in(chunk key, j)``, so head j is the same in a shorter chunk."""
    import jax

    from ...ensembles import named_key

    with jax.enable_x64(x64):
        key = jax.random.fold_in(named_key(jax.random.key(int(seed)), "profile"), i)
        # float32: always a full chunk, so one program per shape (head j is the same in a
        # shorter chunk)
        fn = _reduced_null(int(d), int(d_h)) if storage.is_identity else \
            _stored_null(int(d), int(d_h), storage)
        out = fn(key)
        return {a: np.asarray(v[:m], dtype=np.float64) for a, v in out.items()}


def block_axes(a, b, c) -> tuple:
    """(alignment, symmetry) of the reduced factors W_Q = [A, 0], W_K = [B, C] (A, C
    lower-triangular d_h × d_h blocks of the Bartlett factor): ⟨W_Q, W_K⟩ = Σ A∘B, ‖W_Q‖² = ‖A‖²,
    ‖W_K‖² = ‖B‖² + ‖C‖²; with M = AᵀB, N = AᵀC, tr(W_QK²) = Σ_ij M_ij M_ji and ‖W_QK‖² = ‖M‖² +
    ‖N‖² (``tests/test_profile_null_size.py``)."""
    import jax.numpy as jnp

    from ..._matmul import mm

    m, n = mm(a.T, b), mm(a.T, c)
    sa, sb, sc = jnp.sum(a * a), jnp.sum(b * b), jnp.sum(c * c)
    return (jnp.sum(a * b) / jnp.sqrt(sa * (sb + sc)),
            jnp.sum(m * m.T) / (jnp.sum(m * m) + jnp.sum(n * n)))


@lru_cache(maxsize=16)
def _reduced_null(d: int, d_h: int):
    """``jit``: a chunk's key -> ``{axis: (250,)}``, head j from ``fold_in(key, j)``, by the reduced
    factors and drawn column energies (all χ² variates from one
    :func:`~rmtbase.ensembles.chisquare.chisquare` call)."""
    import jax
    import jax.numpy as jnp

    from ..._compiled import many_calls
    from ...ensembles import named_key
    from ...ensembles.chisquare import chisquare
    from ...ensembles.threefry import normal
    from ...stats.alignment import alignment, energy_cv2, symmetry

    r = 2 * d_h if d >= 2 * d_h else 0  # Bartlett rows of the stacked Gram (0: factors drawn)
    dof = np.concatenate([np.arange(d, d - r, -1), np.full(2 * d, d_h)]).astype(np.float32)

    def one(key):
        chi2 = chisquare(named_key(key, "chi2"), dof)
        if r:  # the Bartlett factor of the stacked Gram [W_Q; W_K][W_Q; W_K]^T by blocks
            z = normal(named_key(key, "blocks"), (3, d_h, d_h))  # JAX's bits, faster
            diag = jnp.sqrt(chi2[:r])
            a = jnp.tril(z[0], -1) + jnp.diag(diag[:d_h])  # rows 0..d_h-1: [A, 0]
            c = jnp.tril(z[2], -1) + jnp.diag(diag[d_h:])  # rows d_h..2d_h-1: [B, C]
            align, sym = block_axes(a, z[1], c)
        else:
            wq = jax.random.normal(named_key(key, "wq"), (d_h, d), jnp.float32)
            wk = jax.random.normal(named_key(key, "wk"), (d_h, d), jnp.float32)
            align, sym = alignment(wq, wk), symmetry(wq, wk)
        # every factor axis of rmtbase.decision.axes, each in its own exact law
        return {"alignment": align, "symmetry": sym,
                "q_input_focus": energy_cv2(chi2[r:r + d]),
                "k_input_focus": energy_cv2(chi2[r + d:])}

    def chunk(key):
        return jax.lax.map(one, jax.vmap(lambda j: jax.random.fold_in(key, j))(
            jnp.arange(_CHUNK)))

    return jax.jit(chunk, compiler_options=many_calls())


#: What the profile null writes once per head (:func:`_stored_null`), by storage, checked bit
#: for bit against the fused chunk (2,000 heads a format at 640 × 256 and at 576 × 64;
#: ``tests/test_profile_null_bits.py`` keeps one chunk of each kind). Fused, XLA computes a
#: normal's ``erf_inv`` polynomial again in each pass of the round trip that reads it (block
#: extremes, scales, the dequantised factor, its squares). ``"normals"``: the normals, by a
#: two-step loop (a loop's output is written once): 10 % less CPU at 640 × 256 Q5_0, none at
#: 576 × 64. The formats that subtract a block minimum gave other bits so (250 heads; likely
#: the normal's last multiply fused with that subtraction into one multiply-add, which a
#: stored normal rounds first); for Q4_1 and Q5_1 ``"factors"``: the round trip's output
#: (:func:`rmtbase.stats.precision.round_trip`, ``materialise``), 8–25 % less CPU (576 × 64
#: Q4_1 the most); the K-quants matched either way on 250 heads but saved ≤ 3 %, FP8 nothing:
#: left fused, as is any storage not named here.
_STORED_ONCE = {"q4_0": "normals", "q5_0": "normals", "q8_0": "normals",
                "q4_1": "factors", "q5_1": "factors"}


def _heads(d_h: int) -> int:
    """Heads a step of the stored null's loop (:func:`_stored_null`): 5 where d_h ≥ 256, else
    :data:`_HEADS`, 10: a head at 640 × 256 is 2.6 MB of normals and round trip, and 5 heads a
    step keep a step's buffers small (less CPU, far fewer page faults)."""
    return 5 if d_h >= 256 else _HEADS


@lru_cache(maxsize=16)
def _stored_null(d: int, d_h: int, storage: Storage):
    """``jit``: a chunk's key -> ``{axis: (250,)}`` for a block format or FP8: head j's W_Q, W_K
    (``null_rows`` rows of N(0, 1) from ``fold_in(key, j)``) through the storage round trip, kept to
    d_h rows, then :func:`factor_profile_jax`, :func:`_heads` heads a loop step."""
    import jax
    import jax.numpy as jnp

    from ...ensembles.threefry import normal
    from ...stats.precision import null_rows, round_trip

    rows = null_rows(storage, d_h)
    cpu = jax.default_backend() == "cpu"  # where the bits were checked; others as before
    once = _STORED_ONCE.get(storage.name) if cpu else None
    kept = {"materialise": True} if once == "factors" else {}

    def one(key):
        keys = jax.random.split(key)  # (W_Q's, W_K's)
        if once == "normals":  # a loop's output is written once: its normals are not recomputed
            zq, zk = jax.lax.map(lambda k: normal(k, (rows, d), jnp.float32), keys)
        else:
            zq, zk = (normal(k, (rows, d), jnp.float32) for k in keys)
        wq, wk = (round_trip(z, storage, **kept)[:d_h] for z in (zq, zk))
        return factor_profile_jax(wq, wk, blocks=cpu)

    def chunk(key):
        keys = jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(_CHUNK))
        return jax.lax.map(one, keys, batch_size=_heads(d_h) if cpu else _HEADS)

    return jax.jit(chunk, compiler_options=dict(_CHUNK_OPTIONS) if cpu else None)


__all__ = ["FACTOR_AXES", "PROFILE_DRAWS", "factor_profile", "factor_profile_jax",
           "null_storage", "profile_null"]
