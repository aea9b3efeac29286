"""The Dataset of :func:`rmtbase.decision.verdict.score_values_by_layer`: per-test
(:data:`SCORE_VARS`) and per-head (:data:`HEAD_VARS`) variables, coordinates and attrs; the
variables' meaning is in :mod:`rmtbase.decision.verdict`."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..stats.statistic import nan_reasons
from .effect import effect_kind, head_effect
from .family import DUPLICATES, GROUPS, group_of
from .scale import scaling

#: Data variables over (layer, head, stat), in output order.
SCORE_VARS = ("value", "null_mean", "null_std", "z", "distance", "effect", "p_value", "p_method",
              "q_value", "percentile", "flag", "effect_size", "null_band_lo", "null_band_hi")
#: Data variables over (layer, head).
HEAD_VARS = ("head_p_value", "head_p_method", "head_q_value", "head_flag", "head_effect",
             "head_top_stat", "head_n_stats")
#: Why an estimator returns NaN (reported, never silently dropped), from the records.
NAN_REASONS = nan_reasons()


def _dataset(out, heads, names, family, n_draws, alpha, null_kind, unreliable):
    """The Dataset of per-test arrays ``out`` (layer, head, stat) and per-head ``heads``."""
    shape = out["value"].shape[:-1]
    dims = ("layer", "head", "stat")
    coords = {"layer": np.arange(shape[0]), "head": np.arange(shape[1]), "stat": names}
    ds = xr.Dataset(coords=coords)
    for v in SCORE_VARS:
        data = out[v].astype(str) if v == "p_method" else out[v]
        ds[v] = (dims, data)
    for v in HEAD_VARS:
        data = heads[v].astype(str) if heads[v].dtype == object else heads[v]
        ds[v] = (("layer", "head"), data)
    groups = [g for g in GROUPS if any(group_of(n) == g for n in family)]
    if groups:
        ge = np.full(shape + (len(groups),), np.nan)
        for gi, g in enumerate(groups):
            sub = [n for n in family if group_of(n) == g]
            ge[..., gi] = head_effect(out["distance"], names, sub)[0]
        ds["group_effect"] = (("layer", "head", "stat_group"), ge)
        ds.coords["stat_group"] = groups
    ds["in_family"] = (("stat",), np.array([n in family for n in names]))
    ds["group"] = (("stat",), np.array([group_of(n) for n in names], dtype=str))
    ds["null_draws"] = (("stat",), np.array([n_draws[n] for n in names], dtype=np.int64))
    ds["sigma_power"] = (("stat",), np.array([scaling(n)[0] for n in names]))
    ds["effect_kind"] = (("stat",), np.array([effect_kind(n)[0] for n in names], dtype=str))
    nan = {}
    for j, n in enumerate(names):
        bad = int(np.sum(~np.isfinite(out["p_value"][..., j])))
        if bad:
            bare = n.split(".", 1)[1]
            nan[n] = {"count": bad, "reason": NAN_REASONS.get(bare, "the statistic is undefined "
                                                          "for this head (non-finite value)")}
    ds.attrs.update(alpha=alpha, null_kind=null_kind.name, decision_family=",".join(family),
                    unreliable=",".join(unreliable),
                    duplicates="; ".join(f"{k} -> {r} ({why})" for k, (r, why) in
                                         DUPLICATES.items() if k in names),
                    nan_tests=_json(nan))
    return ds


def _json(obj) -> str:
    import json

    return json.dumps(obj, sort_keys=True)
