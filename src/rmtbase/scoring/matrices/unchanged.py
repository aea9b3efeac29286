"""Heads a delta leaves exactly unchanged: scored on a placeholder, then taken out.

:func:`placeholder` puts Gaussian factors (fixed key, the changed heads' rms) in their place;
:func:`take_out` sets their results to NaN / False / "" and recomputes BH over the changed heads
only; ``unchanged`` (layer, head) records them."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...decision.significance import benjamini_hochberg


def placeholder(w: np.ndarray, zero: np.ndarray, seed: int = 0) -> np.ndarray:
    """``w`` (heads, d_h, d) with the heads where ``zero`` is True replaced by Gaussian
    entries at the rms of the other heads (1 where none is left)."""
    if not zero.any():
        return w
    live = w[~zero]
    rms = float(np.sqrt(np.mean(np.square(live, dtype=np.float64)))) if live.size else 1.0
    rng = np.random.default_rng(seed)
    out = w.copy()
    out[zero] = (rms * rng.standard_normal(out[zero].shape)).astype(w.dtype)
    return out


def _blank(arr: np.ndarray, mask: np.ndarray) -> np.ndarray:
    arr = arr.copy()
    fill = {"b": False, "i": 0, "u": 0, "U": "", "S": b"", "O": ""}.get(arr.dtype.kind, np.nan)
    arr[mask] = fill
    return arr


def take_out(ds: xr.Dataset, unchanged: np.ndarray, alpha: float = 0.05,
             group_size: int = 1) -> xr.Dataset:
    """Remove the heads where ``unchanged`` (layer, head) is True from ``ds`` (module
    docstring); a no-op where none is."""
    unchanged = np.asarray(unchanged, dtype=bool)
    ds["unchanged"] = (("layer", "head"), unchanged)
    ds["unchanged"].attrs["definition"] = ("the head's W_Q and W_K are bit-identical to the "
                                           "base's: not scored (NaN), not in any BH family")
    if not unchanged.any():
        return ds
    family = {n: np.isfinite(ds[n].values) for n in ("q_value", "head_q_value", "profile_q")
              if n in ds}
    for name, var in ds.data_vars.items():
        if var.dims[:2] == ("layer", "head") and name != "unchanged":
            mask = np.broadcast_to(unchanged.reshape(unchanged.shape + (1,) * (var.ndim - 2)),
                                   var.shape)
            ds[name] = (var.dims, _blank(var.values, mask), var.attrs)
    if "q_value" in ds:
        p = np.where(family["q_value"], ds["p_value"].values, np.nan)
        flag, q = benjamini_hochberg(p, alpha)
        if group_size > 1:  # GQA: heads sharing a key head share the k.* q of its first head
            first = (np.arange(q.shape[1]) // group_size) * group_size
            for j, n in enumerate(ds["stat"].values):
                if str(n).startswith("k."):
                    q[:, :, j] = q[:, first, j]
        ds["q_value"].values = np.where(unchanged[..., None], np.nan, q)
        ds["flag"].values = np.where(np.isfinite(ds["q_value"].values),
                                     ds["q_value"].values <= alpha, False)
    if "head_q_value" in ds:
        p = np.where(family["head_q_value"], ds["head_p_value"].values, np.nan)
        flag, q = benjamini_hochberg(p, alpha)
        ds["head_q_value"].values, ds["head_flag"].values = q, flag
    if "profile_q" in ds:
        p = np.where(family["profile_q"], ds["profile_p"].values, np.nan)
        for j in range(p.shape[-1]):
            if np.isfinite(p[..., j]).any():
                f, q = benjamini_hochberg(p[..., j], alpha)
                ds["profile_q"].values[..., j], ds["profile_flag"].values[..., j] = q, f
    return ds
