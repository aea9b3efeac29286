"""A head's profile on named axes, in units that mean the same for every model.

Axes (``axis`` of ``profile_*``; value, effect, null band, p, q, flag per head), each one record
of :mod:`rmtbase.decision.axes` (shipped ones below; plugins after them): ``scale``
σ_Q·σ_K; ``concentration`` ``qk.npr``'s effect (ratio to null median); ``outliers``
``n_spikes``; ``alignment`` ⟨W_Q, W_K⟩_F/(‖W_Q‖‖W_K‖) (shift, null ~0); ``symmetry``
tr(W_QK²)/‖W_QK‖_F² (shift, null ~1/d); ``q_input_focus``/``k_input_focus`` squared CV of
column energies (shift, null ~2/d_h); ``entry_tails`` ratio of β₂ = excess kurtosis + 3.
Factor axes are tested against :func:`profile_null` (or :func:`permutation_profile_null`); q:
BH over heads per axis; the four factor axes enter the head decision as p_A.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr

from ...decision.axes import REGISTRY as AXIS_REGISTRY
from ...decision.axes import AxisField
from ...decision.kinds import add_head_kind
from ...decision.significance import benjamini_hochberg
from .factors import (  # noqa: F401 - re-exported: the factor axes and their Gaussian null
    FACTOR_AXES,
    PROFILE_DRAWS,
    factor_profile,
    factor_profile_jax,
    null_storage,
    profile_null,
)

#: axis -> (how its effect is read, what it means): a live view of
#: :data:`rmtbase.decision.axes.REGISTRY` (plugins included)
AXES = AxisField(lambda a: (a.effect, a.meaning))
#: Memory for one block of heads' permuted factors (two (heads, chunk, d_h, d) float32 arrays).
_PERM_BLOCK_BYTES = 128 * 2**20


def _perm_profile_fn(d_h: int, d: int):
    """(H, n) heads of W_Q and W_K, (B, n) permutations of each -> {axis: (H, B)}."""
    import jax
    import jax.numpy as jnp

    def one(fq, fk, pq, pk):
        wq = jnp.take(fq, pq, axis=0).reshape(pq.shape[0], d_h, d)
        wk = jnp.take(fk, pk, axis=0).reshape(pk.shape[0], d_h, d)
        return factor_profile_jax(wq, wk)

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None)))


def permutation_profile_null(wq, wk, draws: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``{axis: (..., draws)}`` permutation null of :data:`FACTOR_AXES` for ``wq, wk`` (..., d_h,
    d), the permutations of :func:`rmtbase.scoring.nulls.permutation.permutations`, heads in bounded
    blocks."""
    import jax.numpy as jnp

    from ..nulls.permutation import CHUNK, permutations

    wq = np.asarray(wq, dtype=np.float32)
    wk = np.asarray(wk, dtype=np.float32)
    lead, (d_h, d) = wq.shape[:-2], wq.shape[-2:]
    n = d_h * d
    fq, fk = wq.reshape(-1, n), wk.reshape(-1, n)
    n_heads = fq.shape[0]
    block = max(1, _PERM_BLOCK_BYTES // (2 * CHUNK * n * 4))
    fn = _perm_profile_fn(d_h, d)
    parts: dict[str, list] = {a: [] for a in FACTOR_AXES}
    for c, start in enumerate(range(0, int(draws), CHUNK)):
        count = min(CHUNK, int(draws) - start)
        pq, pk = (jnp.asarray(x) for x in permutations(seed, c, n, count))
        res: dict[str, list] = {a: [] for a in FACTOR_AXES}
        for h in range(0, n_heads, block):
            out = fn(jnp.asarray(fq[h:h + block]), jnp.asarray(fk[h:h + block]), pq, pk)
            for a in FACTOR_AXES:
                res[a].append(np.asarray(out[a], dtype=np.float64))
        for a in FACTOR_AXES:
            parts[a].append(np.concatenate(res[a]))
    return {a: np.concatenate(v, axis=1).reshape(*lead, int(draws))
            for a, v in parts.items()}


class _Against(NamedTuple):
    """A value against null draws (:func:`_against`)."""

    effect: np.ndarray
    band_lo: float
    band_hi: float
    p: np.ndarray


def _against(value, draws) -> _Against:
    """(effect, band lo, band hi, p) of ``value`` against ``draws``: shift from the median, the
    2.5 %/97.5 % quantiles likewise, and :class:`rmtbase.decision.tails.TailModel`'s two-sided p
    (the p :func:`rmtbase.decision.combined.axes_p` combines)."""
    from ...decision.tails import TailModel

    x = np.sort(draws[np.isfinite(draws)])
    med, lo, hi = np.quantile(x, (0.5, 0.025, 0.975))
    v = np.asarray(value, dtype=np.float64)
    p = TailModel(x).evaluate(v)["p"]
    return _Against(v - med, lo - med, hi - med, np.where(np.isfinite(v), p, np.nan))


def _dataset_axis(ds: xr.Dataset, name: str, shape: tuple):
    """A dataset axis's ``fn(ds)``, (layer, head) values; a plugin axis that raises or returns
    another shape is one :class:`rmtbase.registry.PluginError` line naming it."""
    from ...registry import plugin_call

    def check(out):
        got = np.shape(out) if isinstance(out, np.ndarray | list | tuple | float | int) or \
            hasattr(out, "shape") else None
        if got is None:
            return f"a {type(out).__name__}, not (layer, head) values {shape}"
        if tuple(got) != tuple(shape):
            return f"shape {tuple(got)}, not (layer, head) {tuple(shape)}"
        return None

    return plugin_call(AXIS_REGISTRY, name, "fn(scores)", AXIS_REGISTRY[name].fn, ds,
                       check=check)


def _skip_failing(name: str, compute):
    """``compute()``, or None after one :class:`rmtbase.registry.PluginWarning` where the plugin
    axis ``name`` fails (:class:`rmtbase.registry.PluginError`): the score goes on without it."""
    import warnings

    from ...registry import PluginError, PluginWarning

    try:
        return compute()
    except PluginError as exc:
        if AXIS_REGISTRY.shipped(name):
            raise
        warnings.warn(f"{exc}; the axis is left out of this score", PluginWarning,
                      stacklevel=3)
        return None


def add_profile(ds: xr.Dataset, layers, d: int, d_h: int, *, alpha: float, seed: int,
                permutation: dict | None = None, progress: bool = False, start=None) -> dict:
    """Add ``profile_value``, ``_effect``, ``_band_lo``/``_hi``, ``_p``, ``_q``, ``_flag`` over
    (layer, head, axis) to ``ds``. ``layers``: ``profiles``, ``null_records`` per layer, maybe
    ``named_axes`` (plugin axes named or whose ``qk.<stat>`` is: the only ones that join);
    ``permutation``: per-head draws ``{axis: (layer, head, draws)}``, else the Gaussian null as
    far as decisions need (from ``start``). Returns the draws the axes were tested against."""
    profiles, null_storages = layers.profiles, layers.null_records
    shape = (ds.sizes["layer"], ds.sizes["head"])
    axes = _joining(ds, getattr(layers, "named_axes", frozenset()))
    by_data = {}  # dataset axes' values; a plugin's that fails is skipped with one warning
    for a in [a for a in axes if a not in FACTOR_AXES and AXIS_REGISTRY[a].source == "dataset"]:
        got = _skip_failing(a, lambda a=a: _dataset_axis(ds, a, shape))
        if got is None:
            axes.remove(a)
        else:
            by_data[a] = got
    val = {v: np.full(shape + (len(axes),), np.nan) for v in
           ("value", "effect", "band_lo", "band_hi", "p")}
    from .stopping import sequential_nulls

    nulls, used = ({}, {}) if permutation is not None else sequential_nulls(
        ds, profiles, null_storages, d, d_h, alpha=alpha, seed=seed, progress=progress, start=start)
    for j, a in enumerate(axes):
        if a in FACTOR_AXES:
            for li, (prof, s) in enumerate(zip(profiles, null_storages, strict=True)):
                val["value"][li, :, j] = prof[a]
                heads = ([(slice(None), nulls[null_storage(s)][a])] if permutation is None else
                         [(h, permutation[a][li, h]) for h in range(shape[1])])
                for h, draws in heads:
                    eff, lo, hi, p = _against(np.asarray(prof[a])[h], draws)
                    val["effect"][li, h, j], val["p"][li, h, j] = eff, p
                    val["band_lo"][li, h, j], val["band_hi"][li, h, j] = lo, hi
        elif AXIS_REGISTRY[a].source == "dataset":
            val["value"][..., j] = by_data[a]
        else:
            stat = AXIS_REGISTRY[a].statistic
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
    _add_unaligned(ds, profiles, null_storages, nulls, permutation, alpha)
    add_head_kind(ds)  # the kinds of heads (rmtbase.decision.kinds) from these axes
    ds.attrs["profile"] = _profile_attr(permutation, used)
    if used:
        ds.attrs["profile_null_draws"] = ", ".join(f"{s.name}: {n}" for s, n in used.items())
    return nulls if permutation is None else permutation


def _joining(ds, named) -> list[str]:
    """The axes that join: the shipped ones and the plugins' ``named`` (or whose statistic
    is), each where ``ds`` has what it reads."""
    return [a for a in AXES if (AXIS_REGISTRY.shipped(a) or a in named
                                or AXIS_REGISTRY[a].statistic in named) and _available(ds, a)]


def _add_unaligned(ds, profiles, null_storages, nulls, permutation, alpha: float) -> None:
    """``symmetry_unaligned`` and its ``_effect``, ``_p``, ``_flag`` (BH over heads): symmetry with
    W_K's part along W_Q removed (:mod:`rmtbase.stats.unaligned`) against the symmetry draws; none
    if absent."""
    if not profiles or any("symmetry_unaligned" not in p for p in profiles):
        return
    shape = (ds.sizes["layer"], ds.sizes["head"])
    eff, p = np.full(shape, np.nan), np.full(shape, np.nan)
    for li, (prof, s) in enumerate(zip(profiles, null_storages, strict=True)):
        v = np.asarray(prof["symmetry_unaligned"], np.float64)
        heads = ([(slice(None), nulls[null_storage(s)]["symmetry"])] if permutation is None
                 else [(h, permutation["symmetry"][li, h]) for h in range(shape[1])])
        for h, draws in heads:
            got = _against(v[h], draws)
            eff[li, h], p[li, h] = got.effect, got.p
    flag = benjamini_hochberg(p, alpha)[0] if np.isfinite(p).any() else np.zeros(shape, bool)
    dims = ("layer", "head")
    ds["symmetry_unaligned"] = (dims, np.stack([np.asarray(pr["symmetry_unaligned"], np.float64)
                                                for pr in profiles]), {
        "long_name": "symmetry with W_K's part along W_Q removed", "units": "1",
        "definition": "tr(W_QK'^2)/|W_QK'|^2, W_QK' = W_Q^T (W_K - c W_Q), "
                      "c = <W_Q, W_K>/|W_Q|^2 (rmtbase.stats.unaligned)"})
    ds["symmetry_unaligned_effect"] = (dims, eff, {"long_name": "shift from the symmetry null's "
                                                                "median", "units": "1"})
    ds["symmetry_unaligned_p"] = (dims, p, {"long_name": "p against the symmetry axis's null "
                                                         "draws", "units": "1"})
    ds["symmetry_unaligned_flag"] = (dims, np.asarray(flag, bool), {
        "long_name": f"BH over heads at {alpha}", "units": "1"})


def _profile_attr(permutation, used: dict) -> str:
    """The ``profile`` attr: which null the new axes were tested against."""
    return ("per-head axes (rmtbase.scoring.profile.axes); new axes against " +
            ("Gaussian null draws at each layer's null storage (float storages share "
             f"float32's): the first {', '.join(map(str, sorted(set(used.values()))))} of "
             f"{PROFILE_DRAWS}, as many as the decisions needed "
             "(rmtbase.scoring.profile.stopping)" if permutation is None
             else f"{next(iter(permutation.values())).shape[-1]} permutations of each head's "
                  "own entries"))


def _available(ds, axis: str) -> bool:
    return AXIS_REGISTRY[axis].available(ds)


__all__ = ["AXES", "FACTOR_AXES", "PROFILE_DRAWS", "add_profile", "factor_profile",
           "factor_profile_jax", "null_storage", "permutation_profile_null", "profile_null"]
