"""Element statistics of one whole weight matrix, in bounded memory: :func:`matrix_stats`.

The statistics of :mod:`rmtbase.stats.elementwise` over the N = m·n entries, with the Weibull fit
at the Weibull paper's three trims (arXiv:2605.18898, Fig. 5) in :data:`MATRIX_STATS` order,
plus ``rms`` = ‖W‖_F/√N. A matrix over :data:`TILE_ELEMENTS` entries is cut into row blocks,
changing only the rounding of sums."""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError
from .elementwise import ELEMENT_STATS
from .precision import check_storage
from .tiles import one_tile, tile_stats

#: The Weibull trims of the whole-matrix statistics (the paper's k80 %, k90 %, k100 %).
WEIBULL_TRIMS = (0.8, 0.9, 1.0)
#: Entries per tile (float32: 16 MiB per array of the working set).
TILE_ELEMENTS = 2**22


def _suffix(trim: float) -> str:
    return "" if trim == 0.8 else f"_trim{round(100 * trim)}"


#: Statistic names of a whole matrix, in reporting order (``rms`` is not tested).
MATRIX_STATS = (*ELEMENT_STATS[:ELEMENT_STATS.index("weibull_lambda") + 1],
                *(f"weibull_{p}{_suffix(t)}" for t in WEIBULL_TRIMS[1:] for p in ("k", "lambda")),
                *ELEMENT_STATS[ELEMENT_STATS.index("weibull_lambda") + 1:])


def name_stats(st: dict) -> dict:
    """``{name: value}`` in :data:`MATRIX_STATS` names (plus ``rms``) from the output of
    :func:`rmtbase.stats.tiles.one_tile` / ``tile_stats`` run with :data:`WEIBULL_TRIMS`."""
    out = {k: v for k, v in st.items() if k != "weibull"}
    for t, (k, lam) in zip(WEIBULL_TRIMS, st["weibull"], strict=True):
        out[f"weibull_k{_suffix(t)}"] = k
        out[f"weibull_lambda{_suffix(t)}"] = lam
    return {k: out[k] for k in (*MATRIX_STATS, "rms")}


def tile_rows(m: int, n: int, tile_elements: int = TILE_ELEMENTS) -> list[tuple[int, int]]:
    """Row ranges ``[(r0, r1), …]`` of the tiles of an (m, n) matrix: ⌈m·n/tile_elements⌉
    tiles of ⌈m/tiles⌉ rows (the last may be shorter); at least one row per tile."""
    n_tiles = max(1, min(m, -(-(m * n) // tile_elements)))
    rows = -(-m // n_tiles)
    return [(r, min(m, r + rows)) for r in range(0, m, rows)]


@lru_cache(maxsize=32)
def one_tile_fn(storage: str):
    """jit of ``flat (N,) -> {stat: scalar}``, compiled once per (N, dtype, storage) and shared by
    every matrix of N entries and its null draws."""
    return jax.jit(lambda flat: name_stats(one_tile(flat, WEIBULL_TRIMS, storage)))


def matrix_stats(w, *, storage: str = "float32", tile_elements: int = TILE_ELEMENTS) -> dict:
    """Statistics (:data:`MATRIX_STATS` and ``rms``) of the (m, n) matrix ``w`` (numpy or JAX,
    float32/float64, on ``storage``'s lattice); numpy float64 scalars; ``tile_elements``: entries
    per tile."""
    storage = check_storage(storage)
    shape = np.shape(w)
    if len(shape) != 2 or shape[0] * shape[1] < 2:
        raise InputError(f"a matrix (m, n) with at least 2 entries is needed, got {shape}")
    m, n = shape
    rows = tile_rows(m, n, tile_elements)
    dtype = jnp.result_type(w) if jnp.issubdtype(jnp.result_type(w), jnp.floating) \
        else jnp.float32
    if len(rows) == 1:
        st = one_tile_fn(storage)(jnp.asarray(w, dtype=dtype).reshape(-1))
    else:
        st = name_stats(tile_stats(lambda t: jnp.asarray(w[rows[t][0]:rows[t][1]], dtype=dtype),
                                   len(rows), m * n, trims=WEIBULL_TRIMS, storage=storage,
                                   dtype=dtype))
    return {k: float(v) for k, v in st.items()}
