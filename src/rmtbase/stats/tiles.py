"""The tile engine: element statistics from their estimators, on one tile or tile by tile.

It runs the distinct estimators of the records given (always :data:`.fused.FUSED`, whose range
pass gives the geometry every count pass reads) and merges each accumulator as its record says.
:func:`one_tile`: the whole matrix in one compiled function; :func:`tile_stats`: tile by tile from
a function of the tile index, summing on the host in float64 (only the rounding of sums changes)."""

from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from .estimator import accumulators, add_host, declared, merge, to_device
from .fused import FUSED, range_finish
from .statistic import STATISTICS


def estimators(statistics=STATISTICS) -> tuple:
    """The distinct estimators of the element records of ``statistics``, the fused one first
    (it gives the geometry every pass reads)."""
    out = [FUSED]
    for s in statistics:
        if s.kind == "element" and s.estimator not in out:
            out.append(s.estimator)
    return tuple(out)


def _pass(ests, records, step, *args):
    """Pass ``step`` ("range" or "count") of every estimator over one flat tile: a function
    ``w -> {accumulator: value}``, each value declared by an accumulator record."""
    def fn(w):
        out = {}
        for est in ests:
            f = getattr(est, step)
            if f is not None:
                out.update(f(w, *args))
        return declared(records, out)
    return fn


def _finish(ests, acc, geo, n, trims, storage) -> dict:
    """Every estimator's statistics from the combined accumulators (each gets its own)."""
    stats = {}
    for est in ests:
        stats.update(est.finish(est.own(acc), geo, n, trims, storage))
    return stats


#: From IN_GRAPH_MIN entries :func:`one_tile` runs each pass over tiles of at least
#: IN_GRAPH_TILE entries inside the compiled function (a loop carrying the accumulators), so
#: that a tile and its scatters' index arrays stay in cache while the pass reads them (smaller
#: tiles pay more per-tile histogram set-up).
IN_GRAPH_MIN = 2**21
IN_GRAPH_TILE = 2**18


def _in_graph(fn, w, records):
    """``fn`` (a pass) over flat ``w``: at once below :data:`IN_GRAPH_MIN`, else over equal tiles
    and the remainder in a loop carrying the accumulators."""
    n = w.shape[0]
    c = n // IN_GRAPH_TILE
    if n < IN_GRAPH_MIN or c < 2:
        return fn(w)
    m = n // c
    tiles = w[:c * m].reshape(c, m)
    acc = jax.lax.fori_loop(1, c, lambda i, acc: merge(records, acc, fn(tiles[i])),
                            fn(tiles[0]))
    return merge(records, acc, fn(w[c * m:])) if n > c * m else acc


def one_tile(w, trims: tuple, storage: str, side=None, statistics=STATISTICS) -> dict:
    """Every statistic of the flat sample ``w`` (one tile), traceable: the estimators' element
    statistics, the fused one's ``"weibull": [(k, λ) per trim]``, and ``"rms"``; with
    ``side = (scale, lo, width, bins)`` also ``"side"``, the counts of w/scale in bins
    lo + [j, j+1)·width."""
    acc, geo = tile_passes(w, storage, side, statistics)
    stats = tile_finish(acc, geo, w.shape[0], trims, storage, statistics)
    if side is not None:
        stats["side"] = acc["side"]
    return stats


def tile_passes(w, storage: str, side=None, statistics=STATISTICS) -> tuple[dict, dict]:
    """The two passes of :func:`one_tile` over flat ``w``: (accumulators, with ``"side"`` if given;
    the range geometry). With :func:`tile_finish` they are ``one_tile``, step for step."""
    n = w.shape[0]
    ests = estimators(statistics)
    records = accumulators(ests)
    racc = _in_graph(_pass(ests, records, "range", storage), w, records)
    geo = range_finish(FUSED.own(racc), n)
    acc = _in_graph(_pass(ests, records, "count", geo, n, storage, side), w, records)
    return {**racc, **acc}, geo


def tile_finish(acc: dict, geo: dict, n: int, trims: tuple, storage: str,
                statistics=STATISTICS) -> dict:
    """The statistics of :func:`one_tile` (without ``"side"``) from :func:`tile_passes`'
    accumulators and geometry over ``n`` entries."""
    stats = _finish(estimators(statistics), acc, geo, n, trims, storage)
    stats["rms"] = geo["rms"]
    return stats


# ---- tile by tile on the host ------------------------------------------------------------

@lru_cache(maxsize=64)
def _compiled(n: int, trims: tuple, storage: str, ests: tuple):
    """jit of the passes and finishes for a matrix of n entries (shapes of tiles vary)."""
    records = accumulators(ests)
    return {
        "range": jax.jit(lambda w: _in_graph(_pass(ests, records, "range", storage), w,
                                             records)),
        "range_finish": jax.jit(lambda acc: range_finish(FUSED.own(acc), n)),
        "count": jax.jit(lambda w, geo: _in_graph(
            _pass(ests, records, "count", geo, n, storage, None), w, records)),
        "finish": jax.jit(lambda acc, geo: _finish(ests, acc, geo, n, trims, storage)),
    }, records


def tile_stats(tile, n_tiles: int, n: int, *, trims=(0.8,), storage: str = "float32",
               dtype=jnp.float32, keep: bool = False, statistics=STATISTICS) -> dict:
    """Statistics of an ``n``-entry matrix given as ``tile(t)``, t < ``n_tiles`` (``dtype``, every
    entry once); keys of :func:`one_tile`, numpy scalars. Tiles are asked for once per pass, or
    once with ``keep`` (held in memory)."""
    trims = tuple(float(t) for t in trims)
    f, records = _compiled(int(n), trims, storage, estimators(statistics))
    dtype = jnp.dtype(dtype)
    kept: dict = {}

    def get(t):
        if not keep:
            return tile(t).reshape(-1)
        if t not in kept:
            kept[t] = tile(t).reshape(-1)
        return kept[t]

    def run(name, *args):
        total = None
        for t in range(n_tiles):
            total = add_host(records, total, f[name](get(t), *args))
        return to_device(total, dtype)

    racc = run("range")
    geo = f["range_finish"](racc)
    stats = f["finish"]({**racc, **run("count", geo)}, geo)
    stats["rms"] = geo["rms"]
    return jax.tree_util.tree_map(np.asarray, stats)
