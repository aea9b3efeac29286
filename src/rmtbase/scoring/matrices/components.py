"""Score whole weight matrices against the null at their own shape: ``score_components``.

Each layer's q, k, v, o and FFN matrices ((out, in), stored values, GQA k/v un-expanded) get
:data:`rmtbase.stats.matrix.MATRIX_STATS`, compared with N(0, σ²) matrices of the same shape and
storage (:mod:`rmtbase.baseline.matrix_null`). One decision per matrix (calibrated Cauchy
combination), BH over matrices (``component_flag``); per-test ``flag`` is descriptive. A missing
component is NaN, 0, "" or False."""

from __future__ import annotations

import datetime as _dt
import json

import numpy as np
import xarray as xr

from ..._version import __version__
from ...decision.family import HISTOGRAM, in_family
from ...decision.scale import scaling
from ...decision.score_dataset import SCORE_VARS
from ...decision.significance import benjamini_hochberg
from ...decision.verdict import score_values
from ...errors import with_keywords
from ...stats.names import check_quantized_null
from ..nulls.checks import undefined_under_null
from ..settings import ComponentSettings
from .cells import _Cell, _read

COMPONENT_VARS = ("component_p_value", "component_p_method", "component_q_value",
                  "component_flag", "component_effect", "component_top_stat",
                  "component_n_stats")
#: The Weibull paper's band of median terminal k of FFN and W_o matrices (middle-80 % fit,
#: 12 models of 7 families; arXiv:2605.18898, Sec. 3).
WEIBULL_BAND = (1.186, 1.204)


def _group_null(shape, storage, draws, seed, progress, threads) -> dict:
    from ...baseline.matrix_null import matrix_null_table
    from ...stats.matrix import MATRIX_STATS

    table = matrix_null_table(*shape, storage=storage, draws=draws, seed=seed,
                              progress=progress, threads=threads)
    null = {f"w.{s}": np.asarray(table[s].values, dtype=np.float64) for s in MATRIX_STATS}
    null["q.rms"] = null["k.rms"] = np.asarray(table["rms"].values, dtype=np.float64)
    return null


def _score_cells(cells: list[_Cell], *, alpha: float, draws: int, seed: int, progress=False,
                threads: int = 1) -> xr.Dataset:
    """Test every cell against the null of its (shape, null storage); the Dataset of the
    module docstring (no model attributes)."""
    from ...baseline.matrix_null import null_shape
    from ...stats.matrix import MATRIX_STATS

    layers = sorted({c.layer for c in cells})
    names = list(dict.fromkeys(c.name for c in cells))
    L, C, S = len(layers), len(names), len(MATRIX_STATS)
    pos = [(layers.index(c.layer), names.index(c.name)) for c in cells]
    out = {v: np.full((L, C, S), np.nan) for v in SCORE_VARS}
    out["p_method"] = np.full((L, C, S), "", dtype=object)
    comp = {"component_p_value": np.full((L, C), np.nan),
            "component_p_method": np.full((L, C), "", dtype=object),
            "component_effect": np.full((L, C), np.nan),
            "component_top_stat": np.full((L, C), "", dtype=object),
            "component_n_stats": np.zeros((L, C), dtype=np.int64),
            "null_draws": np.zeros((L, C), dtype=np.int64)}
    fam_mask = np.zeros((L, C, S), dtype=bool)
    groups: dict = {}
    undefined: set = set()
    for i, c in enumerate(cells):
        key = (null_shape(*c.shape, c.null_storage), c.null_storage, c.unreliable)
        groups.setdefault(key, []).append(i)
    for (shape, storage, unreliable), idx in groups.items():
        null = _group_null(shape, storage, draws, seed, progress, threads)
        values = {f"w.{s}": np.array([[cells[i].stats[s] for i in idx]]) for s in MATRIX_STATS}
        rms = np.array([[cells[i].stats["rms"] for i in idx]])
        bad = tuple(f"w.{s}" for s in HISTOGRAM) if unreliable else ()
        # a statistic undefined under this null (e.g. the Weibull fits of a Q8_0 or Q4_0
        # null, whose exact-zero level puts ln 0 among the fitted ranks) is left out of the
        # tests: NaN p, counted in nan_tests and named in undefined_under_null
        gone = undefined_under_null(null, list(values))
        undefined.update(k.removeprefix("w.") for k in gone)
        g = score_values({k: v for k, v in values.items() if k not in gone}, rms, rms,
                         {k: v for k, v in null.items() if k not in gone}, alpha=alpha,
                         unreliable=bad)
        g = g.reindex(stat=list(values))
        g["p_method"] = g["p_method"].fillna("")
        fam = g["in_family"].fillna(False).values.astype(bool)
        for j, i in enumerate(idx):
            li, ci = pos[i]
            for v in SCORE_VARS:
                out[v][li, ci] = g[v].values[0, j]
            fam_mask[li, ci] = fam
            for v in ("p_value", "p_method", "effect", "top_stat", "n_stats"):
                comp[f"component_{v}"][li, ci] = g[f"head_{v}"].values[0, j]
            comp["null_draws"][li, ci] = int(g["null_draws"].min())
    # BH over the whole model: per (matrix, statistic) test of the family, and per matrix
    out["flag"], out["q_value"] = benjamini_hochberg(np.where(fam_mask, out["p_value"], np.nan),
                                                     alpha)
    comp["component_flag"], comp["component_q_value"] = benjamini_hochberg(
        comp["component_p_value"], alpha)
    top = comp["component_top_stat"]
    comp["component_top_stat"] = np.array([str(s).removeprefix("w.") for s in top.ravel()],
                                          dtype=object).reshape(top.shape)
    ds = _dataset(cells, pos, layers, names, out, comp, alpha)
    ds.attrs["undefined_under_null"] = ",".join(sorted(undefined))
    return ds


def _dataset(cells, pos, layers, names, out, comp, alpha) -> xr.Dataset:
    from ...stats.matrix import MATRIX_STATS

    L, C = len(layers), len(names)
    dims = ("layer", "component", "stat")
    ds = xr.Dataset(coords={"layer": np.array(layers, dtype=np.int64), "component": names,
                            "stat": list(MATRIX_STATS)})
    for v in SCORE_VARS:
        ds[v] = (dims, out[v].astype(str) if v == "p_method" else out[v])
    for v in COMPONENT_VARS:
        a = comp[v]
        ds[v] = (("layer", "component"), a.astype(str) if a.dtype == object else a)
    per = {"rms": np.full((L, C), np.nan), "rows": np.zeros((L, C), dtype=np.int64),
           "cols": np.zeros((L, C), dtype=np.int64),
           "storage": np.full((L, C), "", dtype=object),
           "null_storage": np.full((L, C), "", dtype=object)}
    for c, (li, ci) in zip(cells, pos, strict=True):
        per["rms"][li, ci] = c.stats["rms"]
        per["rows"][li, ci], per["cols"][li, ci] = c.shape
        per["storage"][li, ci], per["null_storage"][li, ci] = c.storage, c.null_storage
    for k, a in per.items():
        ds[k] = (("layer", "component"), a.astype(str) if a.dtype == object else a)
    ds["null_draws"] = (("layer", "component"), comp["null_draws"])
    fam = in_family([f"w.{s}" for s in MATRIX_STATS])
    ds["in_family"] = (("stat",), np.array([f"w.{s}" in fam for s in MATRIX_STATS]))
    ds["sigma_power"] = (("stat",), np.array([scaling(f"w.{s}")[0] for s in MATRIX_STATS]))
    nan = {s: int(np.sum(np.isfinite(out["value"][..., j]) & ~np.isfinite(out["p_value"][..., j])))
           for j, s in enumerate(MATRIX_STATS)}
    ds.attrs.update(alpha=alpha, nan_tests=json.dumps({k: v for k, v in nan.items() if v}),
                    decision_family=",".join(s for s in MATRIX_STATS if f"w.{s}" in fam),
                    unreliable=";".join(f"L{c.layer} {c.name}" for c in cells if c.unreliable))
    _describe(ds)
    return ds


def _describe(ds: xr.Dataset) -> None:
    text = {
        "value": "statistic of the whole matrix (stored values, nn.Linear (out, in) layout)",
        "null_mean": "null mean at the matrix's shape, storage and rms, raw units",
        "null_std": "null standard deviation (ddof=1) at the matrix's rms, raw units",
        "z": "(value - null_mean) / null_std (descriptive)",
        "effect": "normal score of the value's place in the null (bounded, monotone)",
        "p_value": "two-sided tail-resolving Monte Carlo p (add-one empirical, GPD tail)",
        "q_value": "Benjamini-Hochberg over every (matrix, family statistic) test of the "
                   "model; descriptive",
        "flag": "q_value <= alpha (descriptive; the decision is component_flag)",
        "component_p_value": "Cauchy combination of the matrix's family p-values, calibrated "
                             "on the joint null draws of its shape",
        "component_q_value": "Benjamini-Hochberg over all matrices of the model",
        "component_flag": "component_q_value <= alpha: the matrix differs from the null",
        "rms": "root mean square of the entries (the matrix's sigma)",
        "storage": "storage precision of the matrix in the checkpoint",
        "null_storage": "storage the null draws were put through",
        "null_draws": "number of null draws at the matrix's shape",
    }
    for k, v in text.items():
        ds[k].attrs["definition"] = v


def _weibull_anchors() -> dict:
    from ...analytic.weibull import anchor

    return {f"weibull_k0{suffix}": anchor(a, b).k0
            for suffix, (a, b) in (("", (0.1, 0.9)), ("_trim90", (0.05, 0.95)),
                                   ("_trim100", (0.0, 1.0)))}


def score_components(model=None, *, components="all", revision=None,
                     settings: ComponentSettings | None = None, allow_pickle=False,
                     progress=True, **options) -> xr.Dataset:
    """Score every whole weight matrix of ``model`` (hub id, folder, loaded model; None = the
    embedded MiniLM). components: names for :func:`rmtbase.models.load_components`; settings:
    draws per shape, BH level, seed, quantized_null, threads
    (:class:`~rmtbase.scoring.settings.ComponentSettings`); ``options``: those fields as
    keywords, replacing the record's."""
    from ...baseline.matrix_null import DEFAULT_DRAWS, check_matrix_null_size
    from ...models import default_model_path, load_components, model_info
    from ..description import default_label, model_label
    from ..measures.qk_elements import scoring_threads

    s = with_keywords(ComponentSettings, settings, options, "score_components")  # checked
    alpha, seed, quantized_null, threads = s.alpha, s.seed, s.quantized_null, s.threads
    draws = DEFAULT_DRAWS if s.draws is None else s.draws
    check_matrix_null_size(draws)  # before any weight is read
    check_quantized_null(quantized_null)  # a failed plugin: its own line
    label = None
    if model is None:
        model, label = default_model_path(), default_label()
    info = model_info(model, revision=revision)
    layers = load_components(model, components=components, revision=revision,
                             allow_pickle=allow_pickle)
    cells = _read(layers, info, progress, quantized_null)
    ds = _score_cells(cells, alpha=alpha, draws=int(draws), seed=int(seed), progress=progress,
                     threads=threads or scoring_threads())
    detected = sorted({c.detected for c in cells if c.detected})
    ds.attrs.update(
        model=label or model_label(info.name), model_path=model_label(info.name),
        revision=str(info.revision or ""), architecture=str(info.architecture),
        n_layers=int(info.n_layers), draws=int(draws), seed=int(seed),
        storage_dtypes=",".join(sorted({c.storage for c in cells})),
        quantisation=",".join(detected) or "none", quantized_null=quantized_null,
        null=("i.i.d. N(0, sigma^2) entries at each matrix's own shape (m, n) and rms, stored "
              "like the matrix (float16/bfloat16 round trip or the detected block quantiser); "
              "(m, n) and (n, m) share one null for float storages"),
        decision=("one decision per matrix: Cauchy combination of its family p-values "
                  "calibrated on the joint null draws of its shape, Benjamini-Hochberg over "
                  "all matrices at alpha"),
        sigma_normalisation=("scale-carrying statistics compared self-normalised by the "
                             "matrix's own rms^p (log-shift for 'log' scaling), exact under "
                             "the null"),
        weibull_band=",".join(str(b) for b in WEIBULL_BAND),
        weibull_band_source=("median terminal k of FFN and W_o matrices over 12 models "
                             "(arXiv:2605.18898, Sec. 3)"),
        conventions="nn.Linear (out, in) layout; stored values, no scaling; GQA k, v not "
                    "expanded",
        rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        **_weibull_anchors())
    return ds


__all__ = ["COMPONENT_VARS", "WEIBULL_BAND", "score_components"]
