"""Heads' statistics against null draws: per-statistic tests and one decision per head.

:func:`score_values` is pure numpy. Inputs: ``values[stat]`` (layer, head), the heads' entry rms
(σ_Q, σ_K), and ``null``: joint draws ``{stat: (N,)}`` (with ``q.rms``, ``k.rms``) or per head
``(layer, head, N)``; ``spectral_null`` (optional) is then the spectral statistics' reference,
the joint draws still calibrating the omnibus. Comparison is self-normalised
(:mod:`rmtbase.decision.scale`).

Per test (layer × head × stat): null moments, ``p_value`` (:class:`~.tails.TailModel`),
``distance`` (:mod:`rmtbase.decision.effect`), effect sizes with the null band, ``q_value`` /
``flag`` (BH over :mod:`rmtbase.decision.family`; duplicates get no q-value). Per head:
``head_p_value`` (:mod:`rmtbase.decision.omnibus`), ``head_q_value`` / ``head_flag`` (BH over
all heads at ``alpha``: the decision), effects."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError, TableError, check_keywords
from ..stats.null_protocol import Null
from .effect import distance, head_effect, natural_effect, null_moments
from .family import NOT_TESTED, in_family, stat_family_mask
from .omnibus import calibrated, cauchy_statistic, resolution_floor
from .resolution import resolution_note
from .scale import _check_rms, _to_raw, normalise
from .score_dataset import SCORE_VARS, _dataset
from .significance import _check_alpha, benjamini_hochberg
from .tails import TailModel

#: :func:`score_values`' decision keywords, those of :func:`score_values_by_layer`.
DECISION_OPTIONS = ("alpha", "null_kind", "group_size", "unreliable")


def _models(ref: np.ndarray, shape) -> tuple[np.ndarray, list]:
    """TailModels of a shared (N,) or per-head (L, H, N) reference; index by head."""
    if ref.ndim == 1:
        m = TailModel(ref)
        return np.zeros(shape, dtype=np.int64), [m]
    flat = ref.reshape(-1, ref.shape[-1])
    return np.arange(flat.shape[0]).reshape(shape), [TailModel(r) for r in flat]


def score_values(values: dict, rms_q, rms_k, null: dict, *, spectral_null: dict | None = None,
                 **options) -> xr.Dataset:
    """Test every head's statistics against the null and decide per head.

    values: {"<matrix>.<stat>": (layer, head)}; rms_q, rms_k: (layer, head); null: {stat: (N,) or
    (layer, head, N)} at σ = 1 with "q.rms", "k.rms". ``options``, as
    :func:`score_values_by_layer`'s (:data:`DECISION_OPTIONS`): alpha (BH level, 0.05), null_kind
    (a Null or its name, ``"gaussian"``), group_size (query heads per key head, 1), unreliable
    (statistics kept out of the decision)."""
    check_keywords(options, DECISION_OPTIONS, "score_values")
    return score_values_by_layer(values, rms_q, rms_k, [(None, null, spectral_null)],
                                 **options).drop_vars("head_p_exceedances")


def score_values_by_layer(values: dict, rms_q, rms_k, groups, *, alpha: float = 0.05,
                          null_kind: Null | str = "gaussian", group_size: int = 1,
                          unreliable=()) -> xr.Dataset:
    """:func:`score_values` with groups ``[(rows, null, spectral_null), ...]`` of layers (None =
    all), each against its own null; BH runs over all heads at once; one group is
    :func:`score_values` bit for bit, plus ``head_p_exceedances`` (for joint_stopping.p_bounds)."""
    alpha = _check_alpha(alpha)
    null_kind = Null.parse(null_kind)
    names = [n for n in values if n not in NOT_TESTED]
    rms_q = np.asarray(rms_q, dtype=np.float64)
    rms_k = np.asarray(rms_k, dtype=np.float64)
    _check_rms(rms_q, rms_k)
    shape = rms_q.shape
    family = in_family(names, null=null_kind, unreliable=unreliable)
    seen = np.zeros(shape[0], dtype=np.int64)
    out, heads, n_draws = None, None, {}
    for rows, null, spectral_null in groups:
        rows = np.arange(shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
        seen[rows] += 1
        sub = {k: np.asarray(v)[rows] for k, v in values.items()}
        g_out, models, g_draws = stat_tests(sub, names, rms_q[rows], rms_k[rows], null,
                                        spectral_null)
        g_heads = head_p(g_out, names, family, models, null, rms_q[rows].shape)
        if len(groups) == 1:
            out, heads, n_draws = g_out, g_heads, g_draws
            break
        if out is None:
            out = {k: np.full(shape + v.shape[2:], "" if v.dtype == object else np.nan,
                              dtype=v.dtype) for k, v in g_out.items()}
            heads = {k: np.full(shape, "" if v.dtype == object else 0, dtype=v.dtype)
                     for k, v in g_heads.items()}
        for k, v in g_out.items():
            out[k][rows] = v
        for k, v in g_heads.items():
            heads[k][rows] = v
        n_draws = {n: min(n_draws.get(n, g_draws[n]), g_draws[n]) for n in names}
    if np.any(seen != 1):
        raise InputError("score_values_by_layer: every layer must be in exactly one group")
    _stat_bh(out, names, family, shape, group_size, alpha)
    if family:
        flag, q = benjamini_hochberg(heads["head_p_value"], alpha)
        heads["head_q_value"], heads["head_flag"] = q, flag
    else:
        heads["head_q_value"] = np.full(shape, np.nan)
        heads["head_flag"] = np.zeros(shape, dtype=bool)
    ds = _dataset(out, heads, names, family, n_draws, alpha, null_kind, unreliable)
    ds["head_p_exceedances"] = (("layer", "head"), heads["head_p_exceedances"])
    ds.attrs["resolution_note"] = resolution_note({n: n_draws[n] for n in family},
                                                  int(np.prod(shape)), alpha, null_kind)
    return ds


def stat_tests(values, names, rms_q, rms_k, null, spectral_null):
    """Per-test arrays (:data:`SCORE_VARS` except q_value/flag) of heads (layer, head) against
    one null; also {stat: (index, TailModels, is_joint)} and {stat: draws}."""
    from ..stats import SPECTRAL_STATS

    shape = rms_q.shape
    out = {v: np.full(shape + (len(names),), np.nan) for v in SCORE_VARS}
    out["p_method"] = np.full(shape + (len(names),), "", dtype=object)
    n_draws, models = {}, {}
    for i, name in enumerate(names):
        spectral = name.split(".", 1)[1] in SPECTRAL_STATS and name.startswith("qk.")
        src = spectral_null if (spectral and spectral_null is not None) else null
        if name not in src:
            raise TableError(f"the null has no draws of {name}")
        ref = normalise(name, src[name], src["q.rms"], src["k.rms"])
        idx, mods = _models(ref, shape)
        models[name] = (idx, mods, src is null)
        n_draws[name] = int(np.min([m.n for m in mods]))
        if n_draws[name] < 2:
            raise TableError(f"the null has fewer than 2 draws of {name}")
        v = np.asarray(values[name], dtype=np.float64)
        vn = normalise(name, v, rms_q, rms_k)
        mean_n, std_n = np.empty(shape), np.empty(shape)
        groups = [((...,), mods[0])] if len(mods) == 1 else \
            [(h, mods[idx[h]]) for h in np.ndindex(shape)]
        for sel, m in groups:
            fin = m.x[np.isfinite(m.x)]
            mean_n[sel], std_n[sel] = fin.mean(), fin.std(ddof=1)
            out["distance"][sel + (i,)] = distance(name, vn[sel], *null_moments(name, m.x))
            size, lo, hi = natural_effect(name, vn[sel], m.x)
            out["effect_size"][sel + (i,)] = size
            out["null_band_lo"][sel + (i,)], out["null_band_hi"][sel + (i,)] = lo, hi
            ev = m.evaluate(vn[sel])
            out["p_value"][sel + (i,)] = ev["p"]
            out["effect"][sel + (i,)] = ev["effect"]
            out["p_method"][sel + (i,)] = ev["method"]
            n_lt = np.searchsorted(m.x, vn[sel], side="left")
            n_le = np.searchsorted(m.x, vn[sel], side="right")
            with np.errstate(invalid="ignore"):
                out["percentile"][sel + (i,)] = np.where(
                    np.isnan(vn[sel]), np.nan, 100.0 * (n_lt + 0.5 * (n_le - n_lt)) / m.n)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["z"][..., i] = np.where(std_n > 0, (vn - mean_n) / std_n, np.nan)
        out["value"][..., i] = v
        out["null_mean"][..., i] = _to_raw(name, mean_n, rms_q, rms_k)
        out["null_std"][..., i] = _to_raw(name, std_n, rms_q, rms_k, spread=True)
    return out, models, n_draws


def _stat_bh(out, names, family, shape, group_size, alpha):
    """Per-statistic BH over the family mask; duplicates take their representative's q."""
    mask = np.broadcast_to(stat_family_mask(names, family, shape[-1], group_size),
                           shape + (len(names),))
    p = np.where(mask, out["p_value"], np.nan)
    flag, q = benjamini_hochberg(p, alpha)
    if group_size > 1:  # GQA: heads sharing a key head share the k.* q-value of its first head
        for j, n in enumerate(names):
            if n.startswith("k.") and n in family:
                first = (np.arange(shape[-1]) // group_size) * group_size
                q[..., j] = q[..., first, j]
    out["q_value"] = q
    out["flag"] = np.where(np.isfinite(q), q <= alpha, False)


def null_cauchy(family, models, null, shape) -> dict:
    """``{heads: t (N',)}``, per head index (per-head draws) or ``(...,)`` (joint draws): each
    calibration draw's Cauchy statistic of its family p (left-one-out among joint draws)."""
    per_head = next(iter(models.values()))[0].max() > 0
    joint = {n: normalise(n, null[n], null["q.rms"], null["k.rms"]) for n in family}
    t = {}
    for h in np.ndindex(shape if per_head else (1,) * len(shape)):
        cols = []
        for n in family:
            idx, mods, is_joint = models[n]
            draws = joint[n][h] if joint[n].ndim > 1 else joint[n]
            cols.append(mods[idx[h]].evaluate(draws, loo=is_joint)["p"])
        p_null = np.stack(cols, axis=-1)
        # a calibration draw counts only with every family statistic defined (the permutation
        # null computes the product's element statistics for its first draws only)
        t[h if per_head else (...,)] = cauchy_statistic(p_null[np.isfinite(p_null).all(axis=-1)])
    return t


def head_p(out, names, family, models, null, shape, t_null=None) -> dict:
    """Calibrated Cauchy combination per head (see :mod:`rmtbase.decision.omnibus`), before
    the Benjamini–Hochberg step over heads; ``t_null``: :func:`null_cauchy` of this null."""
    fam_idx = [names.index(n) for n in family]
    heads = {"head_p_value": np.full(shape, np.nan),
             "head_p_method": np.full(shape, "", dtype=object),
             "head_effect": np.full(shape, np.nan),
             "head_top_stat": np.full(shape, "", dtype=object),
             "head_n_stats": np.zeros(shape, dtype=np.int64),
             "head_p_exceedances": np.full(shape, -1, dtype=np.int64)}
    if not fam_idx:
        return heads
    p_heads = out["p_value"][..., fam_idx]
    t_heads = cauchy_statistic(p_heads)
    heads["head_effect"], heads["head_top_stat"] = head_effect(out["distance"], names, family)
    t_null = null_cauchy(family, models, null, shape) if t_null is None else t_null
    for sel, t in t_null.items():
        # with the count it reads, kept for the joint stopping rule (joint_stopping.p_bounds)
        p, meth, heads["head_p_exceedances"][sel] = calibrated(t_heads[sel], t)
        heads["head_p_value"][sel] = resolution_floor(p, p_heads[sel])
        heads["head_p_method"][sel] = meth
    heads["head_n_stats"] = np.isfinite(p_heads).sum(axis=-1)
    return heads


__all__ = ["head_p", "null_cauchy", "score_values", "score_values_by_layer", "stat_tests"]
