"""The fused estimator of the element statistics: two passes over a tile, one finish.

:func:`range_pass` (Σw, Σw², min, max, the lattice cells' union) and :func:`range_finish` (mean,
max|w|, the entropy bins); :func:`count_pass` (central moments 2–4, the entropy histogram, the
|w| bit-histogram of :mod:`rmtbase.stats._magnitude`) and :func:`count_finish` (every statistic
of :mod:`rmtbase.stats.elementwise`). :data:`FUSED` is this estimator as a record."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .._matmul import mm
from ._binning import (
    _cell_histogram,
    _gauss_mass,
    _third_coefficient,
    bincount,
    blocked_sum,
    entropy_bins,
    on_accelerator,
    trim_ranks,
)
from ._magnitude import MAG_BINS, mag_index, mag_top, q99, q_rank, rank_cum, weibull_fit
from .estimator import Accumulator, Estimator
from .precision import is_lattice, lattice_cells


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
    """bincount of ``idx`` and, with ``side`` (index, bins), of the side histogram, in one count
    over the joint index (:func:`rmtbase.stats._binning.bincount`)."""
    if side is None:
        return bincount(idx, length), None
    j, nbins = side
    joint = bincount(idx * (nbins + 1) + j, length * (nbins + 1))
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
    ones_logs = jax.lax.complex(jnp.ones_like(a, dtype=ft), jnp.log(a).astype(ft))
    if on_accelerator():  # per-block histograms: no hot counters (_binning.blocked_sum)
        both = blocked_sum(im, ones_logs, MAG_BINS)
    else:
        both = jnp.zeros(MAG_BINS, ct).at[im].add(ones_logs)
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
    # the lowest rank looked up: the first kept rank of every trim, q99's
    below = min([trim_ranks(n, trim)[0] for trim in trims] + [q_rank(n)])
    cum = rank_cum(cnt, below)
    stats["weibull"] = [weibull_fit(cnt, sx, n, trim, dtype, cum) for trim in trims]
    stats["max_over_q99"] = geo["amax"] / q99(cnt, sx, geo["top"], n, is_lattice(storage), dtype,
                                              cum)
    return stats


#: The fused estimator (module docstring). ``occupied`` (lattice storages) and ``side`` (with a
#: side histogram) are yielded only in those cases.
FUSED = Estimator(
    "fused",
    statistics=("mean", "std", "skewness", "excess_kurtosis", "entropy", "delta_entropy",
                "kl_gaussian", "sigma_fit", "max_over_q99",
                # from count_finish's "weibull" list, named by trim by the callers
                "weibull_k", "weibull_lambda", "weibull_k_trim90", "weibull_lambda_trim90",
                "weibull_k_trim100", "weibull_lambda_trim100"),
    accumulators=(
        Accumulator("s1"), Accumulator("s2"),  # Σw, Σw²
        Accumulator("wmin", "min"), Accumulator("wmax", "max"),  # the entries' range
        Accumulator("hmin", "min"), Accumulator("hmax", "max"),  # the lattice cells' range
        Accumulator("sc2"), Accumulator("sc3"), Accumulator("sc4"),  # centred power sums
        Accumulator("hist"), Accumulator("occupied"),  # entropy histogram, bins with a value
        Accumulator("mag"), Accumulator("mag_sx"),  # |w| histogram: counts, Σ ln|w|
        Accumulator("side"),  # the side histogram
    ),
    range=range_pass, count=count_pass, finish=count_finish)
