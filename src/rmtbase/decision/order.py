"""The order of heads: by the size of their departure from the null, in units of the null's band.

Departure on an axis, against the null's 95 % band on its side (:mod:`rmtbase.scoring.profile.axes`):
shift e, band [lo, hi]: e / hi if e ≥ 0 else e / lo; ratio r: log r / log hi if r ≥ 1 else
log r / log lo (0 the null median, 1 the band's edge). The default order is
D = sqrt(mean_a d_a²) over the tested axes (≈ 0.6 for a null head, free of the p floor).
:func:`ranks`: "min" ranks, largest first (1, 2, 2, 4), NaN last."""

from __future__ import annotations

import numpy as np
import xarray as xr

#: The orders besides the axes: the combination (default) and the order of evidence.
DEPARTURE, EVIDENCE = "departure", "p"
DEFAULT_ORDER = DEPARTURE


def axis_departure(effect, lo, hi, kind: str) -> np.ndarray:
    """Departure in band units (module docstring) of effects ``effect`` against the null band
    ``[lo, hi]`` (broadcast): ``kind`` "shift" (about 0) or "ratio" (about 1)."""
    e, lo, hi = (np.asarray(x, dtype=np.float64) for x in (effect, lo, hi))
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "ratio":
            e, lo, hi = np.log(e), np.log(lo), np.log(hi)
        elif kind != "shift":
            raise ValueError(f"no departure for an axis read as {kind!r}")
        up = np.where(hi > 0, e / hi, np.nan)
        down = np.where(lo < 0, e / lo, np.nan)
        return np.where(e >= 0, up, down)


def tested_axes(ds: xr.Dataset) -> list[str]:
    """The profile axes with a null band (shift and ratio axes scored on some head)."""
    out = []
    for a in ds["axis"].values:
        kind = str(ds["axis_effect"].sel(axis=a).values)
        if kind in ("shift", "ratio") and np.isfinite(
                ds["profile_band_hi"].sel(axis=a).values).any():
            out.append(str(a))
    return out


def departures(ds: xr.Dataset) -> xr.DataArray:
    """(layer, head, axis) departures in band units of the tested axes (module docstring)."""
    axes = tested_axes(ds)
    out = []
    for a in axes:
        s = {"axis": a}
        out.append(axis_departure(
            ds["profile_effect"].sel(s).transpose("layer", "head").values,
            ds["profile_band_lo"].sel(s).transpose("layer", "head").values,
            ds["profile_band_hi"].sel(s).transpose("layer", "head").values,
            str(ds["axis_effect"].sel(s).values)))
    arr = np.stack(out, axis=-1) if out else np.full(
        (ds.sizes["layer"], ds.sizes["head"], 0), np.nan)
    return xr.DataArray(arr, dims=("layer", "head", "axis"),
                        coords={"layer": ds["layer"].values, "head": ds["head"].values,
                                "axis": axes})


def departure(ds: xr.Dataset) -> np.ndarray:
    """(layer, head) root mean square of :func:`departures` over the tested axes a head has
    (NaN where it has none)."""
    d = departures(ds).values
    n = np.isfinite(d).sum(axis=-1)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, np.sqrt(np.nansum(d * d, axis=-1) / np.maximum(n, 1)), np.nan)


def sort_choices(axes) -> list[str]:
    """The names ``--sort-by`` takes: departure, p, and the profile's ``axes`` (a score's
    ``axis`` coordinate, or :data:`rmtbase.scoring.profile.axes.AXES`)."""
    return [DEPARTURE, EVIDENCE, *[str(a) for a in axes]]


def sort_key(ds: xr.Dataset, by: str | None = None) -> np.ndarray:
    """(layer, head) key, larger first, of the order ``by`` (module docstring; default
    :data:`DEFAULT_ORDER`, or the evidence order for a score without a profile)."""
    by = by or DEFAULT_ORDER
    if by == EVIDENCE or "profile_effect" not in ds:
        p = ds["head_p_value"].transpose("layer", "head").values.astype(np.float64)
        return -p
    if by == DEPARTURE:
        return departure(ds)
    if by not in [str(a) for a in ds["axis"].values]:
        raise ValueError(f"unknown order {by!r}: one of {', '.join(sort_choices(ds['axis'].values))}")
    kind = str(ds["axis_effect"].sel(axis=by).values)
    if kind in ("shift", "ratio"):
        return departures(ds).sel(axis=by).values
    return ds["profile_value"].sel(axis=by).transpose("layer", "head").values.astype(float)


def ranks(key) -> np.ndarray:
    """"min" ranks (1 = largest) of ``key`` (any shape; NaN last, tied): equal keys share the
    smallest rank of their run."""
    k = np.asarray(key, dtype=np.float64)
    flat = np.where(np.isfinite(k), -k, np.inf).ravel()
    order = np.argsort(flat, kind="stable")
    sorted_ = flat[order]
    first = np.ones(flat.size, dtype=bool)
    first[1:] = sorted_[1:] != sorted_[:-1]
    run_start = np.maximum.accumulate(np.where(first, np.arange(flat.size), 0))
    out = np.empty(flat.size, dtype=np.int64)
    out[order] = run_start + 1
    return out.reshape(k.shape)


__all__ = ["DEFAULT_ORDER", "DEPARTURE", "EVIDENCE", "axis_departure", "departure",
           "departures", "ranks", "sort_choices", "sort_key", "tested_axes"]
