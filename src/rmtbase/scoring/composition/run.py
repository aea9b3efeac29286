"""``rmtbase.composition(model)``: Q-, K-, V-composition of every ordered cross-layer head pair and
the QK overlap within each layer, against the independent-Gaussian-factor null.

Definitions: :mod:`rmtbase.stats.composition`, ``docs/composition.md``; raw weights (norm gains
only with ``fold_ln``). p = (1 + #{null s ≥ s}) / (1 + N), upper; effect = s / median(null s);
BH over all pairs (``composition_q``) and per (kind, layer pair) (``composition_q_family``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from ...errors import InputError, with_keywords
from ...files.heap import gives_heap_back
from ...files.memory import check_memory
from ...stats import composition as C
from ...stats.gaussian_null import GaussianNull
from ...stats.null_protocol import Null
from ..settings import CompositionSettings
from .dataset import assemble, tail_p, upper_p  # noqa: F401 - re-exported
from .pairs import Pairs, null_scores  # noqa: F401 - null_scores re-exported

#: Bytes a float32 needs; the model side holds every earlier layer's column side.
_F32 = 4
_GAUSSIAN = GaussianNull()


#: The process itself (Python, JAX's runtime and buffers, xarray, the reader), beyond what
#: :func:`plan` counts: the peak RSS of ``benchmarks/composition.py`` at the LLaMA-3-8B shape
#: exceeded the counted bytes by 0.55 GiB at 3 layers and 0.85 GiB at 32 (the benchmark's own
#: factor generation is part of the second).
RUNTIME_BYTES = 600 * 2**20


def plan(n_layers: int, n_heads: int, n_kv: int, d: int, d_h: int) -> dict:
    """Memory (bytes) and work (FLOPs) of a composition run, before any weight is read: earlier
    layers' column sides, one layer's factors, one GEMM output, results and
    :data:`RUNTIME_BYTES`."""
    cols = n_layers * n_heads * d * d_h * _F32
    layer = (2 * n_heads + 2 * n_kv) * d_h * d * _F32 * 2
    gemm = (n_heads + 2 * n_kv) * d_h * n_heads * d_h * _F32 * 3
    out = 3 * n_layers**2 * n_heads**2 * 8 * 6
    pairs = n_layers * (n_layers - 1) // 2
    flops = pairs * 2.0 * (n_heads + 2 * n_kv) * d_h * d * n_heads * d_h
    return {"bytes": cols + layer + gemm + out + RUNTIME_BYTES, "gemm_flops": flops,
            "pairs_per_kind": pairs * n_heads**2}


def check_model(model, *, revision=None, base=None, null: Null = _GAUSSIAN,
                draws: int | None = None) -> dict:
    """Refuse (InputError, one line, before any weight is read) a model with one layer or no V/O
    weights, ``base`` given, a ``null`` without a composition null, or a run that cannot fit in
    memory; ``draws``: the null's (None: its
    :attr:`~rmtbase.stats.null_protocol.Null.composition_draws`). Returns :func:`plan`'s numbers
    with the model's sizes (the permutation plan for a
    per-head null; for the Gaussian null also ``null_flops``, ``null_draws``)."""
    from ...models import model_info

    if base is not None:
        raise InputError("composition is defined for one model's weights; it does not combine "
                         "with --base (a fine-tune's delta has no composition null)")
    null.require("composition_draws", "composition")
    draws = null.composition_draws if draws is None else int(draws)  # the null's own default
    # the within-layer QK overlap is tested against independent Gaussian factors alone
    null.require("gaussian_qk_overlap", "composition's QK-overlap test (independent Gaussian "
                 "factors)")
    info = model_info(model, revision)
    if info.n_layers < 2:
        raise InputError(f"{info.name} has {info.n_layers} layer: composition needs two layers "
                         "(heads of an earlier layer read by a later one)")
    p = plan(info.n_layers, info.n_heads, info.n_kv_heads, info.d, info.d_h)
    if null.per_head:
        from .permutation import plan as perm_plan

        p = {**p, **perm_plan(info.n_layers, info.n_heads, info.n_kv_heads, info.d, info.d_h,
                              draws)}
        p["bytes"] += RUNTIME_BYTES
    else:  # the Gaussian nulls' draws, at most all of them (composition_stopping)
        from .stopping import null_plan

        p.update(null_plan(info.d, info.d_h, info.n_heads, info.n_kv_heads, draws))
    # the project's one check (MemAvailable or $RMTBASE_MEMORY_LIMIT), this process counted
    # once: MemAvailable already leaves out what it holds (MemFree and the runtime counted
    # again would refuse runs that fit)
    check_memory(p["bytes"], f"composition of {info.name}", running=RUNTIME_BYTES)
    return {**p, "info": info}


def check_gains(ln_gains, n_layers: int, d: int) -> None:
    """InputError (one line) unless ``ln_gains`` is None or ``n_layers`` finite ``(d,)`` gains,
    none all zero (NaN gains gave all-NaN scores, a wrong count a bare IndexError)."""
    if ln_gains is None:
        return
    try:
        g = np.asarray(ln_gains, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"ln_gains must be {n_layers} gains of length {d} (one per layer), "
                         "numbers of one shape") from None
    if g.shape != (n_layers, d):
        raise InputError(f"ln_gains has shape {g.shape}, expected ({n_layers}, {d}): one "
                         f"(d,) gain per layer of the model's {n_layers}")
    bad = [i for i in range(n_layers) if not np.isfinite(g[i]).all() or not g[i].any()]
    if bad:
        why = "is all zero" if np.isfinite(g[bad[0]]).all() else "holds NaN or infinity"
        raise InputError(f"ln_gains of layer {bad[0]} {why} ({len(bad)} of {n_layers} layers "
                         "so); the gains must be finite and not all zero")


def _gains(ln_gains, layer: int, d: int):
    if ln_gains is None:
        return None
    g = np.asarray(ln_gains[layer], dtype=np.float32)
    if g.shape != (d,):
        raise InputError(f"ln_gains[{layer}] has shape {g.shape}, expected ({d},)")
    return g


_pair = jax.jit(C.pair_squares, static_argnums=(2, 4))
_cols = jax.jit(lambda wo_t, wv: C.col_matrix(C.col_side(wo_t, wv)))
_grams = jax.jit(C.grams)
_norms = jax.jit(C.layer_norms)



def composition_from_factors(layers, n_kv: int, *, ln_gains=None):
    """Scores from ``layers`` ``(wq, wk, wo_t, wv)``, each (H, d_h, d) float32, keys/values
    expanded: (comp (3, L, H, L, H), NaN where layer_to ≤ layer_from; overlap (L, H, H); norms
    {"qk", "ov": (L, H)}). ``ln_gains`` (L, d) folds into Q, K, V."""
    cols, comp_rows, out = [], [], []
    qk_n, ov_n, over = [], [], []
    for l2, (wq, wk, wo_t, wv) in enumerate(layers):
        h, dh, d = wq.shape
        group = h // n_kv
        g = _gains(ln_gains, l2, d)
        if g is not None:
            wq, wk, wv = wq * g, wk * g, wv * g
        wq, wk, wo_t, wv = (jnp.asarray(x, jnp.float32) for x in (wq, wk, wo_t, wv))
        nq, no = _norms(wq, wk, wo_t, wv)
        qk_n.append(np.asarray(nq, np.float64))
        ov_n.append(np.asarray(no, np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):  # zero heads: said below
            over.append(C.qk_overlap(wq, wk))
        gq, gk, go = _grams(wq), _grams(wk), _grams(wo_t)
        kinds = {"q": (wq, gk, 1), "k": (wk[::group], gq, group), "v": (wv[::group], go, group)}
        row = np.full((3, h, len(cols), h), np.nan)
        for l1, c1 in enumerate(cols):
            for i, kname in enumerate(C.KINDS):
                rows, g_row, grp = kinds[kname]
                sq = np.asarray(_pair(rows, g_row, grp, c1, out[l1][1]), np.float64)
                den = (ov_n[l2][:, None] if kname == "v" else qk_n[l2][:, None]) * ov_n[l1][None]
                with np.errstate(divide="ignore", invalid="ignore"):  # zero heads: said below
                    row[i, :, l1, :] = np.where(den > 0, np.sqrt(np.maximum(sq, 0.0) / den),
                                                np.nan)
        comp_rows.append(row)
        cols.append(_cols(wo_t, wv))
        out.append((h, dh, d))
    _say_zero_heads(qk_n, ov_n)
    n = len(out)
    h = out[0][0]
    comp = np.full((3, n, h, n, h), np.nan)
    for l2, row in enumerate(comp_rows):
        comp[:, :l2, :, l2, :] = row.transpose(0, 2, 3, 1)
    return comp, np.stack(over), {"qk": np.stack(qk_n), "ov": np.stack(ov_n)}


def _say_zero_heads(qk_n, ov_n) -> None:
    """One warning naming the heads whose W_QK or W_OV is zero (zero Q/K or V/O weights):
    their composition is undefined (0/0) and is NaN, as are its p and flag."""
    import warnings

    names = [f"L{l}H{h} ({what})" for what, norms in (("W_QK = 0", qk_n), ("W_OV = 0", ov_n))
             for l, row in enumerate(norms) for h in np.flatnonzero(~(np.asarray(row) > 0))]
    if names:
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        warnings.warn(f"rmtbase: composition is undefined for zero heads, NaN there: "
                      f"{', '.join(names[:8])}{more}", RuntimeWarning, stacklevel=3)


def _layers(model, revision, allow_pickle, bar: int = 0):
    from ...models import load_heads
    from ...models.finite import naming_heads
    from ...models.ov import load_ov_heads

    ov = load_ov_heads(model, revision=revision, allow_pickle=allow_pickle)  # checks V/O first
    qk = load_heads(model, revision=revision, allow_pickle=allow_pickle)
    storage = []

    def gen():
        with naming_heads(model, allow_pickle=allow_pickle, revision=revision):  # a NaN/inf tensor
            for a, b in zip(qk, ov, strict=True):
                storage.append((a.storage, a.quantisation, b.storage, b.quantisation))
                yield a.wq, a.wk, b.wq, b.wk
    if not bar:
        return gen(), storage
    from ...progress import counted  # a line per layer composed (rmtbase.progress)

    return counted(gen(), bar, desc="rmtbase composition", unit="layer"), storage


def _note_draws(ds, draws: int, alpha: float) -> None:
    """The attr ``composition_draws_note`` where the per-pair null's draws could move a flag
    (:func:`rmtbase.scoring.composition.permutation.draws_note`; ``rmtbase score`` prints it
    on stderr). An attr, not a Python warning: the Dataset is complete and correct as it is."""
    from .permutation import draws_note

    note = draws_note(int(np.isfinite(ds.composition_p.values).sum()), draws,
                      int(ds.attrs.get("composition_open_pairs", 0)), alpha)
    if note:
        ds.attrs["composition_draws_note"] = note


def check_folding(fold_ln: bool, ln_gains) -> None:
    """``fold_ln`` and ``ln_gains`` given together or not at all, before any work."""
    if fold_ln and ln_gains is None:
        raise InputError("fold_ln=True needs ln_gains (one (d,) gain per layer); reading norm "
                         "gains from a checkpoint is not implemented")
    if ln_gains is not None and not fold_ln:
        raise InputError("ln_gains are folded in only with fold_ln=True; pass fold_ln=True, or "
                         "leave ln_gains out")


def _more_attrs(ds, got, null, info, draws: int, alpha: float) -> None:
    """The attrs :func:`composition` adds after assembling: the null's name, the weights'
    source, the stopping rule, what the draws leave open, the null's description."""
    ds.attrs["null_kind"] = null.name  # the null's own name (assemble's is by the draws' kind)
    if info.source == "transformer_lens":  # which weights: as the model holds them
        ds.attrs["transformer_lens"] = info.model_class
    if got.drawn is not None:  # the Gaussian null, drawn as far as the flags need
        from ..stopping.rule import STOP_ERROR

        ds.attrs.update(composition_draws_cap=draws, stop_rule="decision",
                        stop_error=STOP_ERROR)
    if got.null_sorted is None:  # no tail beyond the draws: say where they limit a flag
        _note_draws(ds, draws, alpha)
    if got.description is not None:
        ds.attrs["null"] = got.description


@gives_heap_back
def composition(model, *, settings: CompositionSettings | None = None, fold_ln: bool = False,
                ln_gains=None, revision: str | None = None, allow_pickle: bool = False,
                progress: bool = False, **options) -> xr.Dataset:
    """Composition of every ordered cross-layer head pair of ``model`` against its null.

    settings: the null, draws, seed, BH level and null storage
    (:class:`~rmtbase.scoring.settings.CompositionSettings`); ``options``: those fields as
    keywords, replacing the record's. A null without a composition null is refused.
    ``fold_ln``: scale W_Q, W_K, W_V of layer l by ``ln_gains[l]`` (d,), required then.
    ``progress``: a bar over the layers."""
    s = with_keywords(CompositionSettings, settings, options, "composition")  # checked, once
    check_folding(fold_ln, ln_gains)
    seed, alpha, draws, null, null_storage = s.seed, s.alpha, s.null_draws, s.null, s.null_storage
    pl = check_model(model, revision=revision, null=null, draws=int(draws))
    info = pl["info"]
    check_gains(ln_gains, info.n_layers, info.d)
    layers, storage_rows = _layers(model, revision, allow_pickle,
                                   bar=info.n_layers if progress else 0)
    got = null.composition_null(Pairs(info, layers, storage_rows, composition_from_factors,
                                      ln_gains if fold_ln else None, null_storage,
                                      progress=progress, alpha=alpha),
                                draws=int(draws), seed=int(seed))
    used = int(draws) if got.drawn is None else int(got.drawn)
    ds = assemble(got.comp, got.overlap, got.norms, got.null_sorted, alpha=alpha, p=got.p,
                  median=got.median, attrs={
        "model": info.name, "d": info.d, "d_h": info.d_h, "n_kv_heads": info.n_kv_heads,
        "seed": int(seed), "draws": used, "null_storage": got.null_storage,
        "storage": ",".join(sorted({r[0] for r in storage_rows} | {r[2] for r in storage_rows})),
        "quantisation": ",".join(sorted({q for r in storage_rows for q in (r[1], r[3]) if q})),
        "fold_ln": int(bool(fold_ln)), "gemm_flops": pl["gemm_flops"],
        "planned_bytes": pl["bytes"]})
    _more_attrs(ds, got, null, info, int(draws), alpha)
    from .overlap import add_overlap_tests  # the overlap's Gaussian-factor null

    return add_overlap_tests(ds, seed=int(seed), draws=int(draws), alpha=alpha,
                             storage=got.overlap_storage, progress=progress)


__all__ = ["assemble", "check_model", "composition", "composition_from_factors", "null_scores",
           "plan", "upper_p"]
