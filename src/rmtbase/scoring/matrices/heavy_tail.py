"""WeightWatcher's heavy-tail metrics of a model's layer matrices, each against its null:
``score_heavy_tail``.

Per (layer, component) matrix ((out, in), stored values; :func:`rmtbase.models.load_components`)
the metrics of :mod:`rmtbase.stats.heavy_tail` and :mod:`rmtbase.stats.heavy_tail_mp`, and the
same metrics of the null's draws (:mod:`rmtbase.baseline.heavy_tail_null`: N(0, 1) at the
matrix's shape and storage, rescaled to its Σλ). Per metric: the add-one two-sided empirical p
(:func:`rmtbase.decision.significance.empirical_p`), the null median and 2.5 / 97.5 %
quantiles, and ``band_units`` = (value − median) / (half the 95 % band). log_norm = log₁₀ ‖W‖_F²
equals the null's by the conditioning: its p is NaN. Per matrix: ``folklore`` (α < 2
"over-trained", 2 ≤ α ≤ 6 "well trained", α > 6 "under-trained"; Martin & Mahoney 2021) and
``null_well_trained`` (the share of null draws the folklore calls well trained)."""

from __future__ import annotations

import datetime as _dt

import numpy as np
import xarray as xr

from ..._version import __version__
from ...errors import InputError
from ...stats.heavy_tail_mp import spectrum_table

#: The metrics scored, in table order.
METRICS = ("alpha", "alpha_weighted", "log_norm", "log_spectral_norm", "log_alpha_norm",
           "stable_rank", "mp_softrank", "num_spikes", "num_pl_spikes", "ks_distance",
           "rand_distance")
#: The folklore band of α read as "well trained" (WeightWatcher's documentation).
FOLKLORE_BAND = (2.0, 6.0)


def folklore(alpha: float) -> str:
    """WeightWatcher's reading of α (module docstring); "" for NaN."""
    if not np.isfinite(alpha):
        return ""
    lo, hi = FOLKLORE_BAND
    return "over-trained" if alpha < lo else ("well trained" if alpha <= hi else "under-trained")


def rescaled(null: dict, total: float) -> dict:
    """The null's metrics at Σλ = ``total``: λ → cλ, c = total / Σλ_draw, moves only the
    log-scale metrics (log₁₀ λ_max + log₁₀ c; α log₁₀ c more for alpha_weighted and
    log_alpha_norm; log_norm becomes log₁₀ total). WW's 10⁻⁵ threshold is absolute: at
    another scale it may admit or drop the smallest λ, which changes only whether those are
    candidate xmins (the fit at each candidate does not depend on them)."""
    out = dict(null)
    shift = np.log10(total / null["sum_lambda"])
    out["log_spectral_norm"] = null["log_spectral_norm"] + shift
    out["alpha_weighted"] = null["alpha"] * out["log_spectral_norm"]
    out["log_alpha_norm"] = null["log_alpha_norm"] + null["alpha"] * shift
    out["log_norm"] = np.full_like(shift, np.log10(total))
    return out


def matrix_metrics(w, seed: int = 0, randomize: bool = True) -> dict:
    """Every metric of :data:`METRICS` (and ``xmin``, ``bulk_max``, ``sum_lambda``, ``esd``,
    ``reason``) of one stored matrix ``w`` (m, n); rand_distance's permutation from
    ``fold_in(key(seed), tag)`` (NaN unless ``randomize``: it costs a second SVD). A matrix the
    metrics cannot describe (:func:`.heavy_tail_inputs.undescribed`) has every metric NaN and
    its ``reason``."""
    import jax

    from ...baseline.heavy_tail_null import PERMUTATION_TAG
    from ...stats.heavy_tail import EVALS_THRESH, matrix_spectrum
    from ...stats.heavy_tail_mp import rand_distance
    from .heavy_tail_inputs import undescribed

    why = undescribed(w)
    if why is not None:
        nan = {k: np.nan for k in (*METRICS, "xmin", "bulk_max", "sum_lambda")}
        return {**nan, "esd": np.zeros(0), "reason": why}
    lam = matrix_spectrum(w)
    got = {k: v[0] for k, v in spectrum_table(lam[None], *np.shape(w)).items()}
    key = jax.random.fold_in(jax.random.key(seed), PERMUTATION_TAG)
    got["rand_distance"] = rand_distance(w, key, lam) if randomize else np.nan
    got["esd"] = lam
    got["reason"] = "" if np.isfinite(got["alpha"]) else \
        f"{int(np.sum(lam > EVALS_THRESH))} eigenvalues above {EVALS_THRESH:g}: no power-law fit"
    return got


def null_metrics(m: int, n: int, storage: str, draws: int, seed: int = 0,
                 progress: bool = False) -> dict:
    """The metrics of the null's draws at σ = 1 (stored with its spectra; ``spectrum_table`` of
    them and rand_distance): ``{metric: (draws,)}``; :func:`rescaled` puts them at a matrix's
    scale."""
    from ...baseline.heavy_tail_null import heavy_tail_null_table

    table = heavy_tail_null_table(m, n, storage=storage, draws=draws, seed=seed,
                                  progress=progress)
    return {k.removeprefix("metric_"): table[k].values for k in table.data_vars
            if k.startswith("metric_") or k == "rand_distance"}


def compare(got: dict, null: dict) -> dict:
    """``{metric: (value, p, lo, median, hi, band_units)}`` of one matrix's metrics ``got``
    against ``null`` at its scale (:func:`rescaled`)."""
    from ...decision.significance import empirical_p

    out = {}
    for metric in METRICS:
        v, d = got[metric], np.asarray(null[metric], np.float64)
        d = d[np.isfinite(d)]
        if not d.size:  # no finite draw (the null's fit undefined at this shape)
            out[metric] = (v, np.nan, np.nan, np.nan, np.nan, np.nan)
            continue
        lo, med, hi = np.quantile(d, [0.025, 0.5, 0.975])
        p = np.nan if metric == "log_norm" else float(empirical_p(v, d)[0])
        half = (hi - lo) / 2
        out[metric] = (v, p, lo, med, hi, (v - med) / half if half > 0 else np.nan)
    return out


def null_spectra(ds: xr.Dataset, layer, component) -> np.ndarray:
    """The null's spectra ``(draws, M)`` of ``ds``'s matrix (layer, component), each at the
    matrix's Σλ (the scale :func:`rescaled` puts the null's metrics at)."""
    from ...baseline.heavy_tail_null import heavy_tail_null_table

    cell = ds.sel(layer=layer, component=component)
    lam = heavy_tail_null_table(int(cell["rows"]), int(cell["cols"]),
                                storage=str(cell["null_storage"].values),
                                draws=int(ds.attrs["draws"]), seed=int(ds.attrs["seed"])
                                )["lambda"].values
    total = 10.0 ** float(cell["value"].sel(metric="log_norm"))
    return lam * (total / lam.sum(axis=1))[:, None]


def null_alpha(ds: xr.Dataset) -> np.ndarray:
    """The null's α draws of every described matrix of ``ds`` (one table's draws per matrix,
    pooled; α is scale-free), read from the cached null tables."""
    from ...baseline.heavy_tail_null import heavy_tail_null_table

    out, tables = [], {}
    for layer in ds["layer"].values:
        for comp in ds["component"].values:
            cell = ds.sel(layer=layer, component=comp)
            if int(cell["rows"]) == 0 or not np.isfinite(float(cell["value"].sel(
                    metric="log_norm"))):
                continue
            key = (int(cell["rows"]), int(cell["cols"]), str(cell["null_storage"].values))
            if key not in tables:
                tables[key] = heavy_tail_null_table(
                    *key[:2], storage=key[2], draws=int(ds.attrs["draws"]),
                    seed=int(ds.attrs["seed"]))["metric_alpha"].values
            out.append(tables[key])
    return np.concatenate(out) if out else np.zeros(0)


def _fill(cells, draws: int, seed: int, progress: bool):
    """The arrays of :func:`_scored` by name: ``layers``, ``names``, ``out`` per (layer,
    component, metric), ``per`` per (layer, component), and the ``described`` matrices'
    (metrics, (null key, null at its scale))."""
    from ...baseline.matrix_null import null_shape

    layers = sorted({c[0] for c in cells})
    names = list(dict.fromkeys(c[1] for c in cells))
    shape3 = (len(layers), len(names), len(METRICS))
    out = {v: np.full(shape3, np.nan) for v in ("value", "p_value", "null_median", "null_lo",
                                                 "null_hi", "band_units")}
    per = {"xmin": np.full(shape3[:2], np.nan), "null_well_trained": np.full(shape3[:2], np.nan),
           "rows": np.zeros(shape3[:2], np.int64), "cols": np.zeros(shape3[:2], np.int64),
           **{k: np.full(shape3[:2], "", dtype=object)
              for k in ("folklore", "storage", "null_storage", "reason")}}
    nulls, described = {}, []
    for layer, name, shape, storage, null_storage, got in cells:
        li, ci = layers.index(layer), names.index(name)
        per["rows"][li, ci], per["cols"][li, ci] = shape
        per["storage"][li, ci], per["null_storage"][li, ci] = storage, null_storage
        per["reason"][li, ci] = got["reason"]
        if not np.isfinite(got["sum_lambda"]):  # not described: no null drawn for it
            continue
        group = (null_shape(*shape, null_storage), null_storage)
        if group not in nulls:
            nulls[group] = null_metrics(*shape, null_storage, draws, seed, progress)
        null = rescaled(nulls[group], got["sum_lambda"])
        described.append((li, ci, got, (group, null)))
        rows = compare(got, null)
        for j, metric in enumerate(METRICS):
            for v, x in zip(("value", "p_value", "null_lo", "null_median", "null_hi",
                             "band_units"), rows[metric], strict=True):
                out[v][li, ci, j] = x
        a = null["alpha"]
        per["xmin"][li, ci] = got["xmin"]
        per["folklore"][li, ci] = folklore(got["alpha"])
        per["null_well_trained"][li, ci] = float(np.mean((a >= FOLKLORE_BAND[0])
                                                         & (a <= FOLKLORE_BAND[1])))
    return {"layers": layers, "names": names, "out": out, "per": per, "described": described}


def _scored(cells, draws: int, seed: int, progress: bool, fdr: float = 0.05) -> xr.Dataset:
    """The Dataset of :func:`score_heavy_tail` (no attributes) from its cells ``(layer, name,
    shape, storage, null storage, metrics)``, each against its group's null; α's BH flags at
    ``fdr`` and the model's summaries (:mod:`.heavy_tail_summary`)."""
    from .heavy_tail_summary import FIELDS, SUMMARY, alpha_flags, model_summaries

    filled = _fill(cells, draws, seed, progress)
    layers, names, out, per, described = (filled[k] for k in ("layers", "names", "out", "per",
                                                                "described"))
    dims = ("layer", "component", "metric")
    ds = xr.Dataset({k: (dims, v) for k, v in out.items()},
                    coords={"layer": np.array(layers, dtype=np.int64), "component": names,
                            "metric": list(METRICS)})
    for k, v in per.items():
        ds[k] = (dims[:2], v.astype(str) if v.dtype == object else v)
    flag, q = alpha_flags(ds["p_value"].sel(metric="alpha").values, fdr)
    ds["alpha_flag"], ds["alpha_q"] = (dims[:2], flag), (dims[:2], q)
    sums = model_summaries({m: np.array([g[m] for *_, g, _ in described]) for m in SUMMARY},
                           [n for *_, n in described])
    for j, f in enumerate(FIELDS):
        ds[f"summary_{f}"] = ("summary", np.array([sums[m][j] for m in SUMMARY]))
    ds = ds.assign_coords(summary=list(SUMMARY))
    esd = np.full((len(layers), len(names), max(c[5]["esd"].size for c in cells) or 1), np.nan)
    for layer, name, *_, got in cells:
        esd[layers.index(layer), names.index(name), :got["esd"].size] = got["esd"]
    ds["esd"] = (dims[:2] + ("eig",), esd)
    return ds


#: What :func:`score_heavy_tail` reads, by keyword: :func:`.heavy_tail_inputs.layer_matrices`'s.
READ = ("base", "components", "revision", "allow_pickle")


def score_heavy_tail(model=None, *, draws: int | None = None, seed: int = 0,
                     randomize: bool = True, progress: bool = False,
                     quantized_null: str = "auto", fdr: float = 0.05, **read) -> xr.Dataset:
    """The heavy-tail table of ``model`` (hub id, folder, .gguf file; None = the embedded
    MiniLM), or of ΔW against ``base`` (a fine-tune, or ``model`` a LoRA adapter folder;
    :mod:`.heavy_tail_inputs`): Dataset over (layer, component, metric) with ``value``,
    ``p_value``, ``null_median``, ``null_lo``, ``null_hi``, ``band_units``; per (layer,
    component) ``xmin``, ``folklore``, ``null_well_trained``, ``rows``, ``cols``, ``storage``,
    ``null_storage``, ``reason`` (why a matrix has no metrics, "" if it has), ``alpha_flag`` and
    ``alpha_q`` (BH over α's p at ``fdr``); per ``summary`` the model's means with their null
    (``summary_value``, ``summary_p``, …; :mod:`.heavy_tail_summary`). ``draws``: null draws per
    shape (default :data:`rmtbase.baseline.heavy_tail_null.DEFAULT_DRAWS`); ``randomize``:
    rand_distance too (a second SVD per matrix; else NaN); ``esd`` (layer, component, eig): λ
    ascending, NaN-padded; a missing component is NaN / "". ``quantized_null``: the null's
    storage, as ``score --quantized-null``. ``read``: :data:`READ` (``components`` "all",
    ``revision``, ``allow_pickle`` False by default)."""
    from ...baseline.heavy_tail_null import DEFAULT_DRAWS
    from ...checks import check_real
    from ...models import default_model_path
    from ...stats.names import check_quantized_null
    from .heavy_tail_attrs import described
    from .heavy_tail_inputs import layer_matrices

    check_quantized_null(quantized_null)
    if unknown := sorted(set(read) - set(READ)):
        raise InputError(f"score_heavy_tail takes no {', '.join(unknown)}; it reads "
                         f"{', '.join(READ)}")
    base, revision = read.get("base"), read.get("revision")
    fdr = check_real("fdr", fdr, 0.0, 1.0, open_min=True, open_max=True)
    draws = DEFAULT_DRAWS if draws is None else int(draws)
    name = _name(model, base, revision)
    if model is None:
        model = default_model_path()
    cells = [(layer, comp, tuple(w.shape), storage, null_storage,
              matrix_metrics(w, seed, randomize))
             for layer, comp, w, storage, null_storage in layer_matrices(
                 model, quantized_null=quantized_null, label=name, **read)]
    ds = _scored(cells, draws, seed, progress, fdr)
    described(ds, prefix="")
    ds.attrs.update(
        model=name, draws=int(draws), seed=int(seed), quantized_null=quantized_null,
        fdr=float(fdr), delta="" if base is None else "W - W_base (LoRA: s B A)",
        null=("i.i.d. N(0, 1) matrices of each matrix's shape at null_storage (its storage or "
              "quantized_null's; rmtbase.baseline.heavy_tail_null), spectra rescaled to the "
              "matrix's squared Frobenius norm"),
        definitions="WeightWatcher 0.7.7 analyze(): lambda = s^2(W) float64, no 1/N; PL fit "
                    "WWFit (fix_fingers=False, xmax=None); MP fit and rand_distance as "
                    "mp_fit=True, randomize=True",
        folklore_band=",".join(str(b) for b in FOLKLORE_BAND),
        conventions="nn.Linear (out, in) layout; stored values, no scaling",
        rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    return ds


def _name(model, base, revision) -> str:
    """The table's ``model`` attribute: the model's name, ``<tuned> vs <base>`` for a delta."""
    from ...models import model_info
    from ...models.lora import is_lora
    from ..description import model_label

    if model is None:
        from ...probe.run import DEFAULT_MODEL_NAME

        own = DEFAULT_MODEL_NAME.split("/")[-1]
    else:
        own = model_label(str(model)) if is_lora(model) else \
            model_label(model_info(model, revision=revision).name)
    return own if base is None else f"{own} vs {model_label(model_info(base).name)}"


__all__ = ["FOLKLORE_BAND", "METRICS", "compare", "folklore", "matrix_metrics", "null_alpha",
           "null_metrics", "null_spectra", "rescaled", "score_heavy_tail", "spectrum_table"]
