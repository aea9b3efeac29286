"""The null of each layer: the storage it is drawn at and, under the Gaussian null, its tables.

A checkpoint's layers may be stored at different precisions (a GGUF file's per-tensor types, a
folder dequantised layer by layer): :func:`layer_quantisation` names what a layer was stored
in, :func:`layer_null` the storage its heads are measured at and its null drawn at, and
:func:`gaussian_verdict` tests every head against the null of its layer's storage — one table
per distinct storage (:class:`LayerNull`), each spectral reference extended sequentially on its
own — through :func:`rmtbase.decision.verdict.score_values_by_layer`. Used by
:func:`rmtbase.scoring.score.score_heads`; the rules are in its module docstring.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..decision.tails import TailModel
from ..decision.verdict import normalise, score_values_by_layer
from ..errors import TableError
from ..stats.precision import QUANT_FORMATS
from .description import layer_range
from .null_checks import undefined_under_null
from .stopping import GROWTH, MAX_DRAWS, STOP_ERROR, looks, stopping_note, unsettled


def is_spectral(name: str) -> bool:
    from ..stats import SPECTRAL_STATS

    return name.startswith("qk.") and name.split(".", 1)[1] in SPECTRAL_STATS


def null_arrays(table: xr.Dataset, names, d: int, d_h: int) -> dict:
    """{stat: 1-d numpy draws} from a σ = 1 baseline table (cell (d, d_h) if gridded); a
    spectral statistic the table lacks is computed from its stored spectrum
    (:func:`rmtbase.baseline.spectra.spectral_from_table`)."""
    from ..baseline.spectra import spectral_from_table
    from ..stats import table_name

    sel = {k: v for k, v in (("d", d), ("d_h", d_h)) if k in table.dims}
    cell = spectral_from_table(table.sel(sel) if sel else table, names)
    out = {}
    for name in (*names, "q.rms", "k.rms"):
        var = table_name(name)
        if var not in cell.data_vars:
            raise TableError(f"baseline table for d={d}, d_h={d_h} lacks {var!r} (for {name})")
        out[name] = np.asarray(cell[var].values, dtype=np.float64).ravel()
    return out


def _spectral_null(d, d_h, names, *, storage, seed, n, progress) -> dict:
    """Spectral null draws (at least ``n``; a larger stored table is used whole)."""
    from ..baseline.cache import null_table

    table = null_table(d, d_h, stats="spectral", min_draws=n, seed=seed, storage=storage,
                       progress=progress)
    return null_arrays(table, names, d, d_h)


def _thin_spectral(ds, values, ref, names, alpha) -> list[str]:
    """Spectral statistics on which a head that is, or is close to being, flagged
    (head q ≤ 2α) has fewer than 10 null draws beyond it: there more draws turn an
    extrapolated p into an empirical one (Besag & Clifford 1991's sequential rule)."""
    near = np.asarray(ds["head_q_value"].values <= 2 * alpha)
    if not near.any():
        return []
    out = []
    for s in names:
        model = TailModel(normalise(s, ref[s], ref["q.rms"], ref["k.rms"]))
        if model.needs_more(normalise(s, values[s], values["q.rms"], values["k.rms"])[near]):
            out.append(s)
    return out


def layer_quantisation(lh, wq, wk, storage, group):
    """The block quantisation layer ``lh`` was dequantised from: as a GGUF file says it
    (several types among the layer's tensors joined by "+"), else the lattice detected on W_Q
    and on W_K (:func:`rmtbase.stats.precision.detect_quantisation`; two different formats
    joined by "+"), else None."""
    from ..stats.precision import detect_quantisation

    said = getattr(lh, "quantisation", None)
    if said or wq.shape[-1] % 32:
        return said or None
    dq = detect_quantisation(wq, storage=storage)
    if dq is None:
        return None
    dk = detect_quantisation(wk[::group], storage=storage)
    return dq if dk in (None, dq) else "+".join(sorted((dq, dk)))


def layer_null(storage, detected, quantized_null):
    """(storage the layer's heads are measured at, storage its null is drawn at, whether its
    histogram statistics lack a matched null) for one layer: float ``storage`` and the block
    format ``detected`` (or None), under ``quantized_null`` (:mod:`rmtbase.scoring.score`)."""
    est, null_storage, unmatched = storage, storage, False
    # W_Q and W_K in different block types ("q4_k+q8_0": Mixtral-style Q4_K_M files): the null
    # puts both factors through one round trip and cannot match them, so under "auto" the
    # layer gets its float null with histogram statistics left out (what "none" does), and
    # the ``null`` attr names the layer and both types
    if detected in QUANT_FORMATS and quantized_null != "none":
        est = detected if quantized_null == "auto" else quantized_null
    if detected:
        if quantized_null == "none" or (quantized_null == "auto"
                                        and detected not in QUANT_FORMATS):
            unmatched = True
        else:
            null_storage = detected if quantized_null == "auto" else quantized_null
    elif quantized_null in QUANT_FORMATS:
        null_storage = quantized_null
    return est, null_storage, unmatched


class LayerNull:
    """The null of the layers stored alike: their positions among the scored layers, the
    storage their null is drawn at, its table, joint draws and (optional) larger spectral
    reference."""

    def __init__(self, storage: str, rows: list[int]):
        self.storage, self.rows = storage, np.asarray(rows, dtype=np.int64)
        self.table = self.joint = self.spectral_null = None

    @property
    def spectral_ref(self) -> dict:
        return self.joint if self.spectral_null is None else self.spectral_null


def gaussian_verdict(nulls, values, tested, kind, d, d_h, *, draws, seed, alpha, progress,
                      max_draws, group_size, unreliable):
    """The heads against the Gaussian null of each layer's storage (``nulls``, filled in here):
    tables, statistics undefined under some layer's null (left out for every head), the
    sequential extension of each spectral null. Returns (ds, tested, values, undefined)."""
    from ..baseline.cache import null_table
    from ..baseline.null import fast_spectral
    from ..progress import message
    from .stopping import open_reasons, tail_counts

    spectral_names = [k for k in tested if is_spectral(k)]
    undefined = {}
    for g in nulls:
        kw = {"stats": kind, "seed": seed, "storage": g.storage, "progress": progress}
        if draws is not None:
            kw["min_draws"] = int(draws)
        g.table = null_table(d, d_h, **kw)
        g.joint = null_arrays(g.table, tested, d, d_h)
        for k, (fin, n) in undefined_under_null(g.joint, tested).items():
            undefined.setdefault(k, (fin, n, g.storage))
    if undefined:  # e.g. Weibull fits of a Q4_0 null: exact zeros among the fitted ranks
        tested = [k for k in tested if k not in undefined]
        spectral_names = [k for k in spectral_names if k not in undefined]
        values = {k: v for k, v in values.items() if k not in undefined}
        for g in nulls:
            g.joint = {k: v for k, v in g.joint.items() if k not in undefined}
    if spectral_names and kind != "spectral":
        n_spec = max(int(draws or 0), 1000)
        for g in nulls:
            g.spectral_null = _spectral_null(d, d_h, spectral_names, storage=g.storage,
                                             seed=seed, n=n_spec, progress=progress)

    def verdict():
        groups = [(None if len(nulls) == 1 else g.rows, g.joint, g.spectral_null)
                  for g in nulls]
        return score_values_by_layer(values, values["q.rms"], values["k.rms"], groups,
                                     alpha=alpha, group_size=group_size,
                                     unreliable=unreliable)

    ds = verdict()
    decide = max_draws is None  # the stopping rule (rmtbase.scoring.stopping)
    cap = MAX_DRAWS if decide else int(max_draws)
    n_looks = looks(min((g.spectral_ref["q.rms"].size for g in nulls), default=1), cap) \
        if spectral_names else 1
    settled = True
    while spectral_names:
        open_heads = None
        if decide:
            groups = [(None if len(nulls) == 1 else g.rows, g.joint, g.spectral_null)
                      for g in nulls]
            open_heads = unsettled(groups, values, spectral_names, alpha=alpha,
                                   unreliable=unreliable, n_looks=n_looks)
            settled = not open_heads.any()
            counts = tail_counts(groups, values, spectral_names) \
                if progress and not settled else None  # which heads and statistics
        grown = False
        for g in nulls:
            if not fast_spectral("spectral", "lowrank", g.storage):
                continue
            ref = g.spectral_ref
            have = ref["q.rms"].size
            if decide:
                if have >= cap or not open_heads[g.rows].any():
                    continue
                why = f"{int(open_heads[g.rows].sum())} heads' decisions are not settled"
                if counts is not None:
                    mine = np.zeros_like(open_heads)
                    mine[g.rows] = open_heads[g.rows]
                    why += f" ({open_reasons(mine, *counts)})"
            else:
                part = ds.isel(layer=g.rows) if len(nulls) > 1 else ds
                sub = {k: v[g.rows] for k, v in values.items()} if len(nulls) > 1 else values
                thin = _thin_spectral(part, sub, ref, spectral_names, alpha)
                why = (f"heads near a flag lie beyond all but a few of {have} null draws of "
                       f"{', '.join(thin)}")
                if have >= cap or not thin:
                    continue
            n_next = min(cap, GROWTH * have)
            if progress:
                where = "" if len(nulls) == 1 else f" ({g.storage} layers)"
                message(f"rmtbase: {why}; extending the spectral null{where} to {n_next}")
            more = _spectral_null(d, d_h, spectral_names, storage=g.storage, seed=seed,
                                  n=n_next, progress=progress)
            got = int(np.asarray(more["q.rms"]).size)
            if progress and got != n_next:  # a larger shipped or cached table is used whole
                message(f"rmtbase: a stored spectral null of {got} draws serves it")
            if g.spectral_null is None:
                g.joint = more
            else:
                g.spectral_null = more
            grown = True
        if not grown:
            break
        ds = verdict()
    if spectral_names:
        used = int(min(g.spectral_ref["q.rms"].size for g in nulls))
        if decide:
            ds.attrs.update(stop_rule="decision", stop_error=STOP_ERROR,
                            stopping_note=stopping_note(used, settled, cap))
        else:
            ds.attrs["stop_rule"] = "tail"
    return ds, tested, values, undefined


def baseline_attrs(nulls, layer_ids) -> dict:
    """``baseline_<attr>`` from the null tables' attrs (strings and numbers): a value shared by
    every table as it is; where the layers' tables differ, numbers by their minimum and text
    per storage, as "value (layers ...)"."""
    out = {}
    keys = list(dict.fromkeys(k for g in nulls for k in g.table.attrs))
    for k in keys:
        vals = [g.table.attrs.get(k) for g in nulls]
        if not all(isinstance(v, str | int | float | np.integer | np.floating) for v in vals):
            continue
        if all(_same_attr(v, vals[0]) for v in vals):
            out[f"baseline_{k}"] = vals[0]
        elif all(isinstance(v, int | float | np.integer | np.floating) for v in vals):
            out[f"baseline_{k}"] = min(vals)
        else:
            out[f"baseline_{k}"] = "; ".join(
                f"{v} ({layer_range([layer_ids[i] for i in g.rows])})"
                for v, g in zip(vals, nulls, strict=True))
    return out


def _same_attr(a, b) -> bool:
    return type(a) is type(b) and a == b


def has_lambda_max(ref) -> bool:
    refs = [r for _, r in ref] if isinstance(ref, list) else [ref]
    return all("qk.lambda_max" in r for r in refs)


__all__ = ["LayerNull", "baseline_attrs", "gaussian_verdict", "has_lambda_max", "is_spectral",
           "layer_null", "layer_quantisation", "null_arrays"]
