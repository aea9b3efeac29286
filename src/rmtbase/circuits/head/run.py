"""The circuit search's driver: sequences, capture, labels, then each receiver screened and
patched on its own length's sequences (the rule: :mod:`.find`)."""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from ...errors import InputError, with_keywords
from ...files.heap import gives_heap_back
from ...files.interrupts import deferred, fault_point
from ...probe.threads import fit_threads, one_thread
from ...progress import progress_bar, stage
from ..core.capture import capture, probe_dataset
from ..core.counterfactual import Counterfactual
from ..core.fingerprint import check_composition
from ..core.heads import HeadModel
from ..core.receiver import KINDS, Patcher, average
from . import find as F
from .labels import chance_levels, head_name, label_across
from .sequences import SOURCES, Sequences, length_sequences, repeat_lengths, text_sequences
from .table import candidate_dataset

#: Text windows at most, for ``sequences="text"``.
MAX_TEXT_SEQUENCES = 16
#: :func:`find_circuits`' keywords spelled otherwise than their :class:`.find.Search` fields.
SEARCH_ALIASES = {"receivers_of_interest": "receivers", "repeat_lengths": "lengths"}
#: Spellings still accepted for one release, with a DeprecationWarning.
DEPRECATED_ALIASES = {"ablation": "counterfactual"}
#: FLOPs of the via-MLP screen (forward + backward passes) run without being asked for.
MLP_BUDGET = 2e12


def make_sequences(net, tokenizer, sequences, seed, text=None) -> Sequences:
    """The text or given :class:`Sequences` that ``sequences`` names; ``text``: a
    :class:`rmtbase.probe.text.Text` or a UTF-8 file (None: the probe's default text)."""
    if isinstance(sequences, Sequences):
        return sequences
    if sequences != "text":
        raise InputError(f"sequences must be one of {', '.join(SOURCES)} or a Sequences, "
                         f"got {sequences!r}")
    if tokenizer is None:
        raise InputError("sequences='text' needs the model's tokenizer; this model has none")
    from ...probe.run import default_window
    from ...probe.text import Text, read_text

    txt = text if isinstance(text, Text) else read_text(text)
    return text_sequences(tokenizer, txt.text, default_window(net.config),
                          max_sequences=MAX_TEXT_SEQUENCES, min_sequences=2,
                          name=f"the text {txt.name}")


def _explicit(recv, labels) -> list:
    stat = labels["label_statistic"].transpose("layer", "head").values
    lab = labels["label"].transpose("layer", "head").values
    out = []
    for li, hi in recv:
        li, hi = int(li), int(hi)
        if not (1 <= li < stat.shape[0] and 0 <= hi < stat.shape[1]):
            raise InputError(f"receiver {head_name(li, hi)} is not a head after layer 0")
        s = str(stat[li, hi])
        specific = str(lab[li, hi]) not in ("none", "first-token")
        out.append((li, hi, s if s and (specific or str(lab[li, hi]) == "first-token") else None))
    return out


class _Length:
    """The capture of one set of sequences, and its patcher (under ``ablation``) and MLP paths
    (made lazily)."""

    def __init__(self, hm, seqs, cap, totals, ablation):
        from ..core.paths import has_mlps

        self.hm, self.seqs, self.cap, self.totals = hm, seqs, cap, totals
        self.pt = Patcher(hm, cap, seqs, ablation)
        self.mlps = has_mlps(hm)  # set to the via-MLP screen's decision before the search
        self._mlp = self._tm = None

    def task_model(self):
        """The graph forward (:class:`..core.forward.TaskModel`, to the logits' stage)."""
        from ..core.forward import TaskModel

        if self._tm is None:
            self._tm = TaskModel(self.hm.net, logits=False)
        return self._tm

    def mlp(self):
        """The via-MLP paths on the graph forward (:class:`..core.paths.ForwardPaths`)."""
        from ..core.paths import ForwardPaths

        if self._mlp is None:
            self._mlp = ForwardPaths(self.hm, self.seqs, self.cap, self.task_model())
        return self._mlp


def _captures(hm, seqsets, progress, ablation):
    out = {}
    for n, seqs in seqsets.items():
        stage("rmtbase circuits", f"labels from {seqs.description}", enabled=progress)
        with one_thread():
            cap, totals = capture(hm, seqs, progress=progress)
        out[n] = _Length(hm, seqs, cap, totals, ablation)
    return out


def run_circuits(model, composition, opts: F.Search, progress: bool = True) -> xr.Dataset:
    """:func:`find_circuits` after its argument checks (``opts``: the checked settings;
    ``progress``: stages and bars on stderr)."""
    with one_thread():  # torch's threads fight on a shared CPU (rmtbase.probe.threads)
        return _search(model, composition, opts, progress)


def _search(model, composition, opts: F.Search, progress: bool) -> xr.Dataset:
    """The search of :func:`run_circuits` on one torch thread."""
    from ..core.loader import load_model

    sequences, seed, k = opts.sequences, opts.seed, opts.k
    net, tok, name = load_model(model, tokenizer=sequences == "text")
    from .output_loss import attach_output_head

    attach_output_head(net, model)
    hm = HeadModel(net)
    fit_threads(hm.layers)  # the policy of an enclosing torch_threads block, if any
    check_composition(hm, composition)
    if sequences is None:
        from ..core.families import text_config

        cfg = text_config(net.config)
        seqsets = length_sequences(cfg, repeat_lengths(cfg, opts.lengths), seed=seed)
    else:
        seq = make_sequences(net, tok, sequences, seed, opts.text)
        seqsets = {seq.repeat or 0: seq}
    runs = _captures(hm, seqsets, progress, opts.counterfactual) if seqsets else {}
    probes = {n: probe_dataset(r.totals, r.seqs, name) for n, r in runs.items()}
    chances, counts = {}, {}
    for n, r in runs.items():
        chances[n], counts[n] = chance_levels(r.seqs)
    labels = label_across(probes, chances, counts, threshold=opts.threshold) if runs else \
        _no_labels(hm)
    recv = (F.receivers(labels, sinks=opts.sinks) if opts.receivers is None
            else _explicit(opts.receivers, labels))
    if opts.layers is not None:
        recv = [r for r in recv if r[0] in set(opts.layers)]
    length_of = labels["label_length"].transpose("layer", "head").values
    n_src = sum(li * hm.n_heads for li, _, _ in recv)
    exact_all = opts.screen == "exact" or (opts.screen == "auto"
                                           and 3 * n_src <= F.EXACT_BUDGET)
    tokens = max((r.seqs.n * r.seqs.length for r in runs.values()), default=0)
    from ..core.paths import forward_flops, has_mlps

    via = bool(recv) and has_mlps(hm)
    # the screen: a forward and a backward (2 forwards) per receiver and input; the exact
    # runs: one forward per source patched (every earlier head, or 3k per receiver)
    n_runs = hm.n_layers * hm.n_heads if exact_all else 3 * int(k) * len(recv)
    mlp_cost = forward_flops(net, tokens) * (1 + 9 * len(recv) + n_runs) if via else 0.0
    via = via and (mlp_cost <= MLP_BUDGET if opts.mlp_paths == "auto" else bool(opts.mlp_paths))
    patches = 3 * (n_src if exact_all else min(n_src, 2 * int(k) * len(recv))) + 3 * len(recv)
    which = ("every source" if exact_all else f"top {k} by weights and by attribution, and "
             "every source whose estimate nears the rule")
    stage("rmtbase circuits", f"{len(recv)} receiver(s) with a behaviour label; every earlier "
          f"source screened by attribution, {'' if exact_all else 'at least '}{patches:,} "
          f"exact patches ({which}) under {opts.counterfactual} ablation; paths via MLPs "
          f"{'screened' if via else 'not screened'}"
          + (f" ({mlp_cost / 1e12:.2g} TFLOP)" if mlp_cost else ""), enabled=progress)
    for r in runs.values():  # the circuit as a whole goes through MLPs where the screen does
        r.mlps = via
    rows: list[dict] = []
    screens: dict = {}
    with one_thread(), progress_bar(len(recv), desc="rmtbase circuits: path patching",
                                   unit="receiver", enabled=progress) as bar:
        for rec in sorted(recv, key=lambda r: r[:2]):
            run = runs[int(length_of[rec[0], rec[1]]) if len(runs) > 1 else next(iter(runs))]
            got, scr = _receiver(run, composition, rec, int(k), exact_all, via)
            rows.extend(got)
            screens[rec[:2]] = scr
            if opts.on_receiver is not None:
                from .table import candidate_dataset as _one
                from .table import circuit_list

                opts.on_receiver(circuit_list(_one(got, labels, {}, None, k=k)))
            bar.update(1)
    first = next(iter(runs.values())).seqs if runs else None
    ds = candidate_dataset(rows, labels, probes, first, k=k, screens=screens)
    with deferred():
        from .output_loss import add_circuit_losses

        add_circuit_losses(ds, rows, labels, runs, length_of, progress)
    n_tests = len(rows)
    ds.attrs.update(model=name, n_receivers=len(recv), n_patches=len(rows) + 3 * len(recv),
                    sinks_patched=int(opts.sinks), screen="exact" if exact_all else "top-k",
                    ablation=opts.counterfactual, counterfactual=opts.counterfactual,
                    resample_pairings=int(Counterfactual("resample", first.n).pairings)
                    if first is not None else 0,
                    mlp_paths_screened=int(via), n_tests=n_tests,
                    expected_false_confirmations=float(sum(F.false_rate(r["n_sequences"])
                                                           for r in rows)),
                    repeat_lengths=", ".join(str(n) for n in runs) if sequences is None else "",
                    n_sinks_not_patched=0 if opts.sinks or opts.receivers is not None else
                    int((labels["label"].values[1:] == "first-token").sum()))
    _summary_attrs(ds, composition)
    return ds


def _no_labels(hm):
    """Labels of a model no repeat length fits: every head ``none``."""
    ds = xr.Dataset(coords={"layer": np.arange(hm.n_layers), "head": np.arange(hm.n_heads)})
    shape = (hm.n_layers, hm.n_heads)
    ds["label"] = (("layer", "head"), np.full(shape, "none"))
    ds["label_score"] = (("layer", "head"), np.full(shape, np.nan))
    ds["label_statistic"] = (("layer", "head"), np.full(shape, ""))
    ds["label_length"] = (("layer", "head"), np.zeros(shape, dtype=np.int64))
    return ds


def _receiver(run, composition, rec, k, exact_all, via):
    """The rows of one receiver (every kind and path) and its screen {(kind, path): (layer, H)}."""
    from . import faithfulness

    rows, scr = [], {}
    for kind in KINDS:
        fault_point("circuits:screen")
        with deferred():  # a Ctrl-C is raised between kinds, never inside torch
            _receiver_kind(run, composition, rec, kind, k, exact_all, via, rows, scr)
    with deferred():
        faithfulness.apply(run, rec, rows, mlps=run.mlps)
    F.mark_dominant(rows)
    return rows, scr


def _receiver_kind(run, composition, rec, kind, k, exact_all, via, rows, scr) -> None:
    """One kind of one receiver: its rows and screens appended to ``rows``, ``scr``."""
    from ..core import screen as S

    pt, hm = run.pt, run.hm
    li, hi, stat = rec
    st = None if kind == "v" else stat
    ranked = F.ranked_sources(composition, li, hi, kind)
    attr = S.attribution(pt, li, hi, kind, st)
    scr[(kind, "direct")] = attr
    rank_attr = _ranks(attr)
    floor = F.CONFIRM_FRACTION * (1.0 if st is None else
                                  abs(float(np.nanmean(pt.base_scores(li, hi, st)))))
    chosen = F.exact_sources(ranked, attr, k, exact_all, floor)
    info = {(m, s): (r, sc) for m, s, r, sc in ranked}


    def effects_of(ablation, idx):
        out = []
        for lo in range(0, len(idx), 64):
            part = [chosen[i] for i in idx[lo:lo + 64]]
            out += pt.effects(li, hi, [[src] for src in part], kind, st, ablation)
        return out

    single = effects_of(None, list(range(len(chosen))))
    joint = pt.joint(li, hi, kind, st)
    got = [_row(kind, "direct", src, rec, info, attr, rank_attr, e, run, hm)
           for src, e in zip(chosen, single, strict=True)]
    F.measure_counterfactuals(effects_of, got, run.seqs.n, pt.ablation)
    rows.extend(F.judge(got, joint, labelled=stat is not None, n_seq=run.seqs.n,
                        ablation=pt.ablation))
    if via:
        vrows, vattr = _via_rows(run, composition, rec, kind, st, k, info, exact_all)
        scr[(kind, "via_mlp")] = vattr
        rows.extend(vrows)


def _ranks(a) -> np.ndarray:
    """1 = the largest |a|, same shape as ``a``; 0 where ``a`` is NaN (not ranked)."""
    flat = np.abs(np.asarray(a, dtype=np.float64)).ravel()
    ok = np.isfinite(flat)
    flat = np.where(ok, flat, -np.inf)
    r = np.empty(flat.size, dtype=np.int64)
    r[np.argsort(-flat, kind="stable")] = np.arange(1, flat.size + 1)
    return np.where(ok, r, 0).reshape(np.shape(a))


def _row(kind, path, src, rec, info, attr, rank_attr, e, run, hm):
    (m, s), (li, hi, _) = src, rec
    rank, score = info[(m, s)]
    return {"kind": kind, "path": path, "layer_from": m, "head_from": s, "layer_to": li,
            "head_to": hi, "rank_weights": rank, "rank_attribution": int(rank_attr[m, s]),
            "n_sources": li * hm.n_heads, "composition": score,
            "attribution": float(attr[m, s]), "metric": e.metric, "score_to": e.base,
            "effect_causal": e.effect, "effect_se": e.se,
            "length_to": int(run.seqs.repeat or 0), "n_sequences": run.seqs.n}


def _via_rows(run, composition, rec, kind, st, k, info, exact_all=False):
    """The via-MLP rows of one receiver and kind: every source (``exact_all``) or the top ``k``
    by via-MLP attribution patched, judged against every earlier head's joint via-MLP change."""
    from ..core import screen as S

    li, hi, _ = rec
    pt, paths, hm = run.pt, run.mlp(), run.hm
    got = S.metrics(pt, li, hi, kind, st)
    attr = (paths.attribution(li, *got, how=S.first_order_how(pt)) if got is not None
            else np.full((li, hm.n_heads), np.nan))
    rank_attr = _ranks(attr)
    flat = np.where(np.isfinite(attr), np.abs(attr), -np.inf).ravel()
    chosen = [(int(i // hm.n_heads), int(i % hm.n_heads))
              for i in np.argsort(-flat, kind="stable")[:len(flat) if exact_all else k]
              if exact_all or np.isfinite(flat[i])]
    x0 = run.cap.resid[li].float()

    def effects_of(ablation, idx):
        srcs = [chosen[i] for i in idx]
        if not srcs:
            return []
        per = []
        for how in pt.hows(ablation):
            ch = paths.changes(srcs, [li], how)
            per.append(pt.effects_from_residuals(li, hi, [x0 + ch[src][li] for src in srcs],
                                                 kind, st))
        return average(per)

    single = effects_of(None, list(range(len(chosen))))
    joint = average([pt.effects_from_residuals(li, hi, [x0 + paths.joint(li, how)], kind, st)
                     for how in pt.hows()])[0]
    got = [_row(kind, "via_mlp", src, rec, info, attr, rank_attr, e, run, hm)
           for src, e in zip(chosen, single, strict=True)]
    F.measure_counterfactuals(effects_of, got, run.seqs.n, pt.ablation)
    return F.judge(got, joint, labelled=rec[2] is not None, n_seq=run.seqs.n,
                   ablation=pt.ablation), attr


def _summary_attrs(ds, composition) -> None:
    """Per model: Spearman of the exact effect against the weights' rank and the attribution
    (direct rows), and the count of composition pairs unlike random."""
    from ..core.screen import spearman

    if ds.sizes.get("candidate", 0):
        direct = ds["path"].values == "direct"
        e = np.abs(ds["effect_causal"].values[direct])
        ds.attrs["spearman_weights_rank_vs_effect"] = spearman(-ds["rank_weights"].values[direct], e)
        ds.attrs["spearman_attribution_vs_effect"] = spearman(ds["attribution"].values[direct],
                                                              ds["effect_causal"].values[direct])
    if "composition_flag" in composition:
        ds.attrs["pairs_unlike_random"] = int(np.asarray(composition["composition_flag"]).sum())


@gives_heap_back
def find_circuits(model, composition: xr.Dataset, *, search: F.Search | None = None,
                  progress: bool = True, **options) -> xr.Dataset:
    """Circuits of ``model`` (:mod:`.find` states the rule, :mod:`.table` the output).

    model: a transformers model, :class:`rmtbase.probe.loader.Loaded`, folder, ``.gguf`` or hub
    id (:func:`~..core.loader.load_model`) of a :data:`~..core.heads.SUPPORTED` family. composition:
    its composition Dataset. search: the settings below as a :class:`.find.Search` record, used as
    it is (``receivers``, ``lengths`` for ``receivers_of_interest``, ``repeat_lengths``);
    ``options``: the same as keywords, replacing the record's (a new record, checked when
    built). progress: stages and bars on stderr. k: sources patched per receiver, kind and
    ranking when not all are.
    sequences: None (repeated random tokens at ``repeat_lengths``: ``"auto"``, an int or ints,
    :func:`.sequences.repeat_lengths`), ``"text"`` (``text`` or the probe's; needs a tokenizer)
    or a :class:`.sequences.Sequences`. receivers_of_interest: [(layer, head), …] instead of the
    labelled heads. seed: the sequences'. threshold: the labels'. sinks: patch ``first-token``
    heads too. screen: ``"auto"`` (every source exactly when within :data:`.find.EXACT_BUDGET`),
    ``"exact"`` or ``"top-k"``. mlp_paths: ``"auto"`` (within :data:`MLP_BUDGET` FLOPs), True or
    False. layers: receivers' layers kept (None: all). counterfactual (deprecated spelling
    ``ablation``): what a removed source's output is replaced by (:mod:`..core.counterfactual`:
    ``"mean"``, the default, ``"resample"`` or ``"zero"``). on_receiver: called with each
    receiver's finding rows as soon as it is done. Raises :class:`InputError` before loading."""
    for alias, field in (SEARCH_ALIASES | DEPRECATED_ALIASES).items():
        if alias in options:
            if field in options:
                raise TypeError(f"find_circuits() got both {alias!r} and {field!r}")
            if alias in DEPRECATED_ALIASES:
                warnings.warn(f"find_circuits({alias}=) is deprecated: use {field}=",
                              DeprecationWarning, stacklevel=2)
            options[field] = options.pop(alias)
    s = with_keywords(F.Search, search, options, "find_circuits")  # checked when built
    F.check_composition(composition)
    n_l, n_h = composition.sizes["layer_to"], composition.sizes["head_to"]
    for li, hi in s.receivers or ():
        if not (1 <= li < n_l and 0 <= hi < n_h):
            raise InputError(f"receiver {head_name(li, hi)} is not a head after layer 0 of "
                             f"this {n_l}-layer, {n_h}-head model")
    for li in s.layers or ():
        if not li < n_l:
            raise InputError(f"layers: {li!r} is not a layer after 0 of this {n_l}-layer model")
    return run_circuits(model, composition, s, bool(progress))

__all__ = ["MAX_TEXT_SEQUENCES", "MLP_BUDGET", "find_circuits", "make_sequences", "one_thread",
           "run_circuits"]
