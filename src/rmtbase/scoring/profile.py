"""A head's profile on named axes: what kind of structure it has, in units that mean the same
for every model (issue 31 step 3).

Axes (``axis`` coordinate of ``profile_*`` in a score; each value, effect, null band, p, q and
flag per head):

- ``scale``: σ_Q·σ_K, the rms of W_Q's entries times that of W_K's (descriptive: no null; the
  baseline every other axis should be read against);
- ``concentration``: ``qk.npr``'s effect, a ratio to the null median (0.4 = energy in fewer
  directions than random);
- ``outliers``: ``n_spikes``, eigenvalues of W_QK above the null's largest (descriptive here;
  spectral concentration, not a count of learned directions: :mod:`rmtbase.decision.spikes`);
- ``alignment``: ⟨W_Q, W_K⟩_F/(‖W_Q‖‖W_K‖), a shift from the null median (~0): how much query
  and key read the same residual directions (attention of a token to tokens like itself);
- ``symmetry``: tr(W_QK²)/‖W_QK‖_F², a shift (null ~1/d): symmetric (+) or directional (−)
  attention;
- ``q_input_focus``, ``k_input_focus``: the squared coefficient of variation of W_Q's (W_K's)
  column energies, a shift from the null median (~2/d_h): how unevenly the factor reads the d
  residual dimensions;
- ``entry_tails``: ``k.excess_kurtosis``'s effect, a ratio of β₂ = excess + 3 to the null's.

The statistics of the new axes are :mod:`rmtbase.stats.alignment`'s; their Gaussian null is
drawn here, :data:`PROFILE_DRAWS` heads of i.i.d. N(0, 1) factors at the model's (d, d_h) put
through each layer's storage round trip (:func:`rmtbase.stats.precision.round_trip`), the same
storage as the layer's null table; the statistics are σ-free, so σ = 1 serves every head. p is
two-sided about the null median, add-one (Phipson & Smyth 2010); q is Benjamini–Hochberg over
the heads, per axis; flag is q ≤ alpha. The axes from scored statistics take their p from the
score. The profile is descriptive beside the per-head decision (``head_flag``), which it does
not enter. Under the permutation null the new axes' p are not computed (NaN; their values and
effects against the Gaussian draws are kept).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..decision.significance import benjamini_hochberg

#: Gaussian null draws of the new axes per storage.
PROFILE_DRAWS = 2000
_CHUNK = 250
#: axis -> (how its effect is read, what it means)
AXES = {
    "scale": ("value", "rms(W_Q) rms(W_K); descriptive, the baseline of the other axes"),
    "concentration": ("ratio", "qk.npr / null median: < 1, energy in fewer directions"),
    "outliers": ("value", "n_spikes: eigenvalues of W_QK above the null's largest (spectral "
                          "concentration, not a count of learned directions)"),
    "alignment": ("shift", "<W_Q, W_K>/(|W_Q||W_K|) - null median: query and key read the "
                           "same residual directions"),
    "symmetry": ("shift", "tr(W_QK^2)/|W_QK|^2 - null median: symmetric (+) or directional (-)"),
    "q_input_focus": ("shift", "CV^2 of W_Q's column energies - null median: uneven reading "
                               "of the residual stream"),
    "k_input_focus": ("shift", "CV^2 of W_K's column energies - null median"),
    "entry_tails": ("ratio", "beta_2 of W_K's entries / null median's (excess kurtosis + 3)"),
}
#: The new axes and the statistic of :mod:`rmtbase.stats.alignment` each reads.
FACTOR_AXES = ("alignment", "symmetry", "q_input_focus", "k_input_focus")


def factor_profile(wq, wk) -> dict[str, np.ndarray]:
    """The new axes' values of heads ``(..., d_h, d)`` (:mod:`rmtbase.stats.alignment`)."""
    from ..stats.alignment import alignment, input_focus, symmetry

    return {"alignment": np.asarray(alignment(wq, wk), dtype=np.float64),
            "symmetry": np.asarray(symmetry(wq, wk), dtype=np.float64),
            "q_input_focus": np.asarray(input_focus(wq), dtype=np.float64),
            "k_input_focus": np.asarray(input_focus(wk), dtype=np.float64)}


def profile_null(d: int, d_h: int, storage: str = "float32", n: int = PROFILE_DRAWS,
                 seed: int = 0) -> dict[str, np.ndarray]:
    """``{axis: (n,)}`` Gaussian null draws of :data:`FACTOR_AXES` at (d, d_h) and ``storage``
    (module docstring), in chunks of 250 heads; the same seed gives the same draws."""
    import jax

    from ..ensembles import named_key
    from ..stats.precision import round_trip

    key = named_key(jax.random.key(int(seed)), "profile")
    out: dict[str, list] = {a: [] for a in FACTOR_AXES}
    for i, start in enumerate(range(0, n, _CHUNK)):
        m = min(_CHUNK, n - start)
        kq, kk = jax.random.split(jax.random.fold_in(key, i))
        wq = jax.random.normal(kq, (m, d_h, d), dtype=np.float32)
        wk = jax.random.normal(kk, (m, d_h, d), dtype=np.float32)
        if storage != "float32":
            wq, wk = round_trip(wq, storage), round_trip(wk, storage)
        for a, v in factor_profile(wq, wk).items():
            out[a].append(v)
    return {a: np.concatenate(v) for a, v in out.items()}


def _against(value, draws):
    """(effect, band lo, band hi, p) of ``value`` against ``draws``: shift from the median,
    the 2.5 %/97.5 % quantiles likewise, two-sided add-one p about the median."""
    x = np.sort(draws[np.isfinite(draws)])
    med, lo, hi = np.quantile(x, (0.5, 0.025, 0.975))
    dev = np.abs(x - med)
    v = np.asarray(value, dtype=np.float64)
    exceed = (dev[None, :] >= np.abs(v.ravel() - med)[:, None] - 1e-15).sum(axis=1)
    p = ((1 + exceed) / (1 + x.size)).reshape(v.shape)
    return v - med, lo - med, hi - med, np.where(np.isfinite(v), p, np.nan)


def add_profile(ds: xr.Dataset, profiles: list[dict], null_storages: list[str], d: int,
                d_h: int, *, alpha: float, seed: int, gaussian: bool = True) -> None:
    """Add ``profile_value``, ``profile_effect``, ``profile_band_lo``/``_hi``, ``profile_p``,
    ``profile_q``, ``profile_flag`` over (layer, head, axis) to score ``ds`` (module
    docstring). ``profiles``: per layer :func:`factor_profile` of its heads; ``null_storages``:
    per layer the storage of its null."""
    shape = (ds.sizes["layer"], ds.sizes["head"])
    axes = [a for a in AXES if _available(ds, a)]
    val = {v: np.full(shape + (len(axes),), np.nan) for v in
           ("value", "effect", "band_lo", "band_hi", "p")}
    nulls = {s: profile_null(d, d_h, s, seed=seed) for s in dict.fromkeys(null_storages)}
    for j, a in enumerate(axes):
        if a in FACTOR_AXES:
            for li, (prof, s) in enumerate(zip(profiles, null_storages, strict=True)):
                eff, lo, hi, p = _against(prof[a], nulls[s][a])
                val["value"][li, :, j], val["effect"][li, :, j] = prof[a], eff
                val["band_lo"][li, :, j], val["band_hi"][li, :, j] = lo, hi
                val["p"][li, :, j] = p if gaussian else np.nan
        elif a == "scale":
            val["value"][..., j] = ds["sigma_q"].values * ds["sigma_k"].values
        elif a == "outliers":
            val["value"][..., j] = ds["n_spikes"].values
        else:
            stat = "qk.npr" if a == "concentration" else "k.excess_kurtosis"
            for v, src in (("value", "value"), ("effect", "effect_size"), ("p", "p_value"),
                           ("band_lo", "null_band_lo"), ("band_hi", "null_band_hi")):
                val[v][..., j] = ds[src].sel(stat=stat).values
    q = np.full_like(val["p"], np.nan)
    flag = np.zeros(q.shape, dtype=bool)
    for j in range(len(axes)):
        if np.isfinite(val["p"][..., j]).any():
            flag[..., j], q[..., j] = benjamini_hochberg(val["p"][..., j], alpha)
    dims = ("layer", "head", "axis")
    ds.coords["axis"] = axes
    for v, arr in val.items():
        ds[f"profile_{v}"] = (dims, arr)
    ds["profile_q"] = (dims, q)
    ds["profile_flag"] = (dims, flag)
    ds["axis_effect"] = (("axis",), np.array([AXES[a][0] for a in axes], dtype=str))
    ds["axis_meaning"] = (("axis",), np.array([AXES[a][1] for a in axes], dtype=str))
    ds.attrs["profile"] = (
        f"per-head axes (rmtbase.scoring.profile); new axes against {PROFILE_DRAWS} Gaussian "
        "null draws at each layer's storage" + ("" if gaussian else
                                                 "; their p not computed under the "
                                                 "permutation null"))


def _available(ds, axis: str) -> bool:
    if axis in FACTOR_AXES or axis == "scale":
        return True
    if axis == "outliers":
        return "n_spikes" in ds
    stat = "qk.npr" if axis == "concentration" else "k.excess_kurtosis"
    return "stat" in ds.coords and stat in ds["stat"].values and "effect_size" in ds


__all__ = ["AXES", "FACTOR_AXES", "PROFILE_DRAWS", "add_profile", "factor_profile",
           "profile_null"]
