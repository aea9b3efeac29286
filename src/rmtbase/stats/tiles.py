"""The element statistics as two passes over tiles: one estimator for a matrix of any size.

Every statistic of :mod:`rmtbase.stats.elementwise` is a function of a few sums and histograms
of the entries, and sums and histograms add over any split of a matrix into tiles. So the
estimator is written as two passes, the second needing what the first found:

1. :func:`range_pass` — Σw, Σw², min w, max w (and the union of the storage-lattice cells);
   :func:`range_finish` gives the mean, max|w| and the entropy bins' origin and width;
2. :func:`count_pass` — centred power sums Σc², Σc³, Σc⁴ (c = w − mean), the entropy histogram
   (B_e bins; lattice cells spread for float16/bfloat16) and the histogram of |w| in bins read
   from its bits (counts and Σ ln|w|; :mod:`rmtbase.stats._magnitude`); :func:`count_finish`
   gives every statistic: moments, histogram statistics, each Weibull trim's fit and q99.

:func:`rmtbase.stats.elementwise.element_stats` chains the passes on the whole matrix, as one
tile, inside one compiled function (:func:`one_tile`). :func:`tile_stats` runs them tile by
tile on a matrix given as a function of the tile index — a slice of a stored matrix, or a null
draw regenerated tile by tile from its own key — summing the accumulators on the host (float64;
counts int64) and casting the totals back to the matrix's dtype for the finish. Tiling changes
no definition and approximates nothing: the only difference from :func:`one_tile` is the
rounding of the sums (float64 across tiles rather than one reduction in the input dtype; in
float32 below 10⁻⁶ relative in every statistic, ``tests/test_components.py``). Memory is one
tile's working set (about 12 arrays of the tile's size) and the |w| histogram (65,538 bins).
"""

from __future__ import annotations

import math
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from .._matmul import mm
from ._binning import _cell_histogram, _gauss_mass, _third_coefficient, entropy_bins
from ._magnitude import MAG_BINS, mag_index, mag_top, q99, weibull_fit
from .precision import is_lattice, lattice_cells

#: Accumulators combined by min / max across tiles (the others add).
_MINS = ("wmin", "hmin")
_MAXS = ("wmax", "hmax")


def range_pass(w, storage: str) -> dict:
    """Pass 1 over a flat tile ``w``: Σw, Σw², min, max and the range of the lattice cells."""
    out = {"s1": jnp.sum(w), "s2": jnp.sum(w * w), "wmin": jnp.min(w), "wmax": jnp.max(w)}
    if is_lattice(storage):
        below, above = lattice_cells(w, storage)
        out["hmin"], out["hmax"] = jnp.min(w - below), jnp.max(w + above)
    else:
        out["hmin"], out["hmax"] = out["wmin"], out["wmax"]
    return out


def range_finish(acc: dict, n: int) -> dict:
    """Mean, rms, max|w| (and its |w|-histogram key) and the entropy histogram's origin and bin
    width from pass 1."""
    amax = jnp.maximum(jnp.abs(acc["wmin"]), jnp.abs(acc["wmax"]))
    width = acc["hmax"] - acc["hmin"]
    wsafe = jnp.where(width > 0, width, 1.0)
    return {"mean": acc["s1"] / n, "rms": jnp.sqrt(acc["s2"] / n), "amax": amax,
            "top": mag_top(amax), "hmin": acc["hmin"], "width": width,
            "delta": wsafe / entropy_bins(n)}


def _counts(idx, length: int, side):
    """bincount of ``idx`` and, with ``side`` (index, bins), of the side histogram too, by one
    scatter over the joint index (a few ×10⁴ bins stay in cache; a second scatter over all
    entries costs as much as the first)."""
    if side is None:
        return jnp.bincount(idx, length=length), None
    j, nbins = side
    joint = jnp.bincount(idx * (nbins + 1) + j, length=length * (nbins + 1))
    joint = joint.reshape(length, nbins + 1)
    return jnp.sum(joint, axis=1), jnp.sum(joint, axis=0)[:nbins]


def side_index(w, side):
    """Bin of each entry in the side histogram ``side = (scale, lo, width, bins)``: bins of
    w/scale on lo + [j, j+1)·width; ``bins`` (one past the last) for entries outside."""
    scale, lo, width, nbins = side
    i = jnp.floor((w / scale - lo) / width)
    return jnp.where((i >= 0) & (i < nbins), i, nbins).astype(jnp.int32), nbins


def count_pass(w, geo: dict, n: int, storage: str, side=None) -> dict:
    """Pass 2 over a flat tile: centred power sums, entropy histogram, |w| histogram (counts and
    Σ ln|w|); with ``side`` (:func:`side_index`) also that histogram, as ``"side"``."""
    be = entropy_bins(n)
    c = w - geo["mean"]
    c2 = c * c
    out = {"sc2": jnp.sum(c2), "sc3": jnp.sum(c2 * c), "sc4": jnp.sum(c2 * c2)}
    hmin, delta = geo["hmin"], geo["delta"]
    ip = jnp.clip(jnp.floor((w - hmin) / delta), 0, be - 1).astype(jnp.int32)
    points, side_counts = _counts(ip, be, None if side is None else side_index(w, side))
    if side is not None:
        out["side"] = side_counts
    if is_lattice(storage):
        below, above = lattice_cells(w, storage)
        out["hist"] = _cell_histogram(w - below, w + above, hmin, delta, be, w.dtype)
        out["occupied"] = points  # bins holding a stored value
    else:
        out["hist"] = points
    a = jnp.abs(w)
    im = mag_index(a, geo["top"])
    # counts and Σ ln|w| by one scatter of complex numbers 1 + i·ln|w| (faster than two
    # scatters or one of two columns); counts in float32 are exact: a tile holds < 2²⁴
    # entries (:func:`_in_graph`)
    ft = jnp.promote_types(w.dtype, jnp.float32)
    ct = jnp.complex128 if ft == jnp.float64 else jnp.complex64
    both = jnp.zeros(MAG_BINS, ct).at[im].add(
        jax.lax.complex(jnp.ones_like(a, dtype=ft), jnp.log(a).astype(ft)))
    out["mag"] = both.real.astype(jax.dtypes.canonicalize_dtype(np.int64))
    out["mag_sx"] = both.imag
    return out


def _histogram_stats(acc, geo, n, storage, dtype) -> dict:
    """Moments, entropy, KL to the Gaussian and the core fit (definitions: elementwise)."""
    mean = geo["mean"]
    m2, m3, m4 = acc["sc2"] / n, acc["sc3"] / n, acc["sc4"] / n
    std = jnp.sqrt(m2)
    be = entropy_bins(n)
    cnt = acc["hist"].astype(dtype)
    p = cnt / n
    nonempty = cnt > 0
    occupied = acc["occupied"] > 0 if is_lattice(storage) else nonempty
    miller_madow = (jnp.sum(occupied) - 1).astype(dtype) / (2 * n)
    delta = geo["delta"]
    plogp = jnp.where(nonempty, p * jnp.log(jnp.where(nonempty, p, 1.0)), 0.0)
    entropy = jnp.where(geo["width"] > 0, -jnp.sum(plogp) + jnp.log(delta) + miller_madow, -jnp.inf)

    edges = geo["hmin"] + delta * jnp.arange(be + 1, dtype=dtype)
    lo, hi = edges[:-1], edges[1:]
    q = _gauss_mass(lo, hi, mean, std)
    z_mid = (0.5 * (lo + hi) - mean) / std
    logq_mid = jnp.log(delta / std) - 0.5 * math.log(2 * math.pi) - 0.5 * z_mid * z_mid
    logq = jnp.where(q > 0, jnp.log(jnp.where(q > 0, q, 1.0)), logq_mid)
    kl = jnp.sum(jnp.where(nonempty, plogp - p * logq, 0.0)) - miller_madow

    u = (0.5 * (lo + hi) - mean) / std  # Gaussian core fit on the same histogram
    use = nonempty & (jnp.abs(u) <= 2.0)
    wt = jnp.where(use, cnt, 0.0)
    lc = jnp.log(jnp.where(use, cnt, 1.0))
    basis = jnp.stack([jnp.ones_like(u), u, u * u], axis=-1)
    bw = (basis * wt[:, None]).T
    e = _third_coefficient(mm(bw, basis), mm(bw, lc))
    var_fit = m2 / (-2.0 * e) - delta * delta / 12.0
    enough = (jnp.sum(use) >= 3) & jnp.isfinite(e)
    ok = (e < 0) & (var_fit > 0)
    sigma_fit = jnp.where(ok, jnp.sqrt(jnp.where(ok, var_fit, 1.0)),
                          jnp.where(e >= 0, jnp.inf, 0.0))
    return {"mean": mean, "std": std, "skewness": m3 / (m2 * std),
            "excess_kurtosis": m4 / (m2 * m2) - 3.0, "entropy": entropy,
            "delta_entropy": entropy - 0.5 * jnp.log(2 * math.pi * math.e * m2),
            "kl_gaussian": kl, "sigma_fit": jnp.where(enough, sigma_fit, jnp.nan)}


def count_finish(acc: dict, geo: dict, n: int, trims: tuple, storage: str) -> dict:
    """Every statistic from the two passes: element statistics with ``"weibull": [(k, λ) per
    trim]`` (definitions: elementwise)."""
    dtype = geo["mean"].dtype
    stats = _histogram_stats(acc, geo, n, storage, dtype)
    cnt, sx = acc["mag"], acc["mag_sx"]
    cum = jax.lax.associative_scan(jnp.add, cnt)  # = cumsum(cnt) (integers), ~2× faster on CPU
    stats["weibull"] = [weibull_fit(cnt, sx, n, trim, dtype, cum) for trim in trims]
    stats["max_over_q99"] = geo["amax"] / q99(cnt, sx, geo["top"], n, is_lattice(storage), dtype,
                                              cum)
    return stats


#: From IN_GRAPH_MIN entries :func:`one_tile` runs each pass over tiles of at least
#: IN_GRAPH_TILE entries inside the compiled function (a loop carrying the accumulators), so
#: that a tile and its scatters' index arrays stay in cache while the pass reads them. For a
#: 4096×4096 W_QK on one core: 1 M-entry tiles took the passes from 0.31 to 0.09 s (standalone)
#: and 256 k-entry tiles, measured against 1 M, the whole head from ~147 to ~118 ms (its
#: matmul included); 64 k-entry tiles were slower (per-tile histogram set-up).
IN_GRAPH_MIN = 2**21
IN_GRAPH_TILE = 2**18


def _merge(a: dict, b: dict) -> dict:
    """Two accumulator trees -> their combination (min / max / sum by key)."""
    def one(path, x, y):
        key = path[0].key
        if key in _MINS:
            return jnp.minimum(x, y)
        if key in _MAXS:
            return jnp.maximum(x, y)
        return x + y
    return jax.tree_util.tree_map_with_path(one, a, b)


def _in_graph(fn, w):
    """``fn`` (a pass) over the flat ``w``: at once below :data:`IN_GRAPH_MIN` entries, else
    over c = N // IN_GRAPH_TILE equal tiles and the remainder, in a loop that carries the
    accumulators (combined in ``w``'s dtype, tile after tile)."""
    n = w.shape[0]
    c = n // IN_GRAPH_TILE
    if n < IN_GRAPH_MIN or c < 2:
        return fn(w)
    m = n // c
    tiles = w[:c * m].reshape(c, m)
    acc = jax.lax.fori_loop(1, c, lambda i, acc: _merge(acc, fn(tiles[i])), fn(tiles[0]))
    return _merge(acc, fn(w[c * m:])) if n > c * m else acc


def one_tile(w, trims: tuple, storage: str, side=None) -> dict:
    """Every statistic of the flat sample ``w`` (one tile), traceable: element statistics with
    ``"weibull": [(k, λ) per trim]`` and ``"rms"``; with ``side = (scale, lo, width, bins)``
    also ``"side"``, the counts of w/scale in the bins lo + [j, j+1)·width (j < bins), taken in
    the same scatter as the entropy histogram.

    Each pass runs through :func:`_in_graph`: from :data:`IN_GRAPH_MIN` entries over tiles
    inside the compiled function. The definitions are the same (sums and histograms add over
    any split); only the rounding of the float sums differs from one reduction (float32: ~1e-7
    relative)."""
    n = w.shape[0]
    geo = range_finish(_in_graph(lambda x: range_pass(x, storage), w), n)
    acc = _in_graph(lambda x: count_pass(x, geo, n, storage, side), w)
    stats = count_finish(acc, geo, n, trims, storage)
    stats["rms"] = geo["rms"]
    if side is not None:
        stats["side"] = acc["side"]
    return stats


# ---- tile by tile on the host ------------------------------------------------------------

@lru_cache(maxsize=64)
def _compiled(n: int, trims: tuple, storage: str):
    """jit of the passes and finishes for a matrix of n entries (shapes of tiles vary)."""
    return {
        "range": jax.jit(lambda w: _in_graph(lambda x: range_pass(x, storage), w)),
        "range_finish": jax.jit(partial(range_finish, n=n)),
        "count": jax.jit(lambda w, geo: _in_graph(lambda x: count_pass(x, geo, n, storage), w)),
        "count_finish": jax.jit(partial(count_finish, n=n, trims=trims, storage=storage)),
    }


def _add(total, part):
    """Combine one tile's accumulators into the running totals (numpy, float64 / int64)."""
    def one(key, t, p):
        p = np.asarray(p)
        p = p.astype(np.float64) if p.dtype.kind == "f" else p.astype(np.int64)
        if t is None:
            return p
        if key in _MINS:
            return np.minimum(t, p)
        if key in _MAXS:
            return np.maximum(t, p)
        return t + p
    if total is None:
        total = {}
    out = {}
    for key, p in part.items():
        if isinstance(p, list):
            out[key] = [one(key, None if key not in total else total[key][i], q)
                        for i, q in enumerate(p)]
        else:
            out[key] = one(key, total.get(key), p)
    return out


def _to_device(acc, dtype):
    """Totals back to the matrix's float dtype (counts to JAX's default integer)."""
    int_t = jax.dtypes.canonicalize_dtype(np.int64)
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, dtype=dtype if a.dtype.kind == "f" else int_t), acc)


def tile_stats(tile, n_tiles: int, n: int, *, trims=(0.8,), storage: str = "float32",
               dtype=jnp.float32, keep: bool = False) -> dict:
    """Statistics of a matrix of ``n`` entries given as ``tile(t)`` for t < ``n_tiles`` (each a
    JAX array of any shape, ``dtype``; together every entry once). Same keys as
    :func:`one_tile`, numpy scalars. Each tile is asked for once per pass (twice), or
    once with ``keep`` (the tiles are then held until the end: memory of the whole matrix)."""
    trims = tuple(float(t) for t in trims)
    f = _compiled(int(n), trims, storage)
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
            total = _add(total, f[name](get(t), *args))
        return _to_device(total, dtype)

    geo = f["range_finish"](run("range"))
    stats = f["count_finish"](run("count", geo), geo)
    stats["rms"] = geo["rms"]
    return jax.tree_util.tree_map(np.asarray, stats)
