"""The circuit search's driver (:func:`rmtbase.circuits.find.find_circuits` states what it
does): load, sequences, capture and labels, then the patches receiver by receiver."""

from __future__ import annotations

import xarray as xr

from ..errors import InputError
from ..probe.threads import one_thread
from ..progress import progress_bar, stage
from . import find as F
from .capture import capture, probe_dataset
from .heads import HeadModel
from .labels import THRESHOLD, head_name, label_heads
from .patching import KINDS, Patcher
from .sequences import SOURCES, Sequences, repeated_sequences, text_sequences
from .table import candidate_dataset

#: Text windows at most, for ``sequences="text"``.
MAX_TEXT_SEQUENCES = 16


def make_sequences(net, tokenizer, sequences, seed, text=None) -> Sequences:
    """The :class:`Sequences` that ``sequences`` names (:func:`.find.find_circuits`);
    ``text`` (a :class:`rmtbase.probe.text.Text` or a UTF-8 file; None: the probe's default
    text) for ``sequences="text"``."""
    if isinstance(sequences, Sequences):
        return sequences
    if sequences is None:
        sequences = "repeated_random_tokens"
    if sequences not in SOURCES:
        raise InputError(f"sequences must be one of {', '.join(SOURCES)} or a Sequences, "
                         f"got {sequences!r}")
    if sequences == "repeated_random_tokens":
        return repeated_sequences(net.config, seed=seed)
    if tokenizer is None:
        raise InputError("sequences='text' needs the model's tokenizer; this model has none")
    from ..probe.run import default_window
    from ..probe.text import Text, read_text

    txt = text if isinstance(text, Text) else read_text(text)
    return text_sequences(tokenizer, txt.text, default_window(net.config),
                          max_sequences=MAX_TEXT_SEQUENCES, min_sequences=2,
                          name=f"the text {txt.name}")


def _check_shape(hm: HeadModel, composition: xr.Dataset) -> None:
    n_l, n_h = composition.sizes["layer_from"], composition.sizes["head_from"]
    if (n_l, n_h) != (hm.n_layers, hm.n_heads):
        raise InputError(f"the composition has {n_l} layers x {n_h} heads, the model "
                         f"{hm.n_layers} x {hm.n_heads}: not the same model")


def _explicit(recv, labels) -> list:
    stat = labels["label_statistic"].transpose("layer", "head").values
    out = []
    for li, hi in recv:
        if not (1 <= int(li) < stat.shape[0] and 0 <= int(hi) < stat.shape[1]):
            raise InputError(f"receiver {head_name(li, hi)} is not a head after layer 0")
        out.append((int(li), int(hi), str(stat[int(li), int(hi)]) or None))
    return out


def _patch_receiver(pt: Patcher, composition, rec, k: int) -> list[dict]:
    """The rows of one receiver: per kind its top-k single patches and their joint one."""
    li, hi, stat = rec
    rows = []
    for kind in KINDS:
        ranked = F.ranked_sources(composition, li, hi, kind)[:k]
        sets = [[(m, s)] for m, s, _, _ in ranked] + [[(m, s) for m, s, _, _ in ranked]]
        *single, joint = pt.effects(li, hi, sets, kind, None if kind == "v" else stat)
        rows.extend(_judge([
            {"kind": kind, "layer_from": m, "head_from": s, "layer_to": li, "head_to": hi,
             "rank_weights": rank, "n_sources": li * pt.hm.n_heads, "composition": score,
             "metric": e.metric, "score_to": e.base, "effect_causal": e.effect,
             "effect_se": e.se} for (m, s, rank, score), e in zip(ranked, single, strict=True)],
            joint))
    return rows


def _judge(singles: list[dict], joint) -> list[dict]:
    """The rule of :mod:`.find` on one receiver's candidates of one kind."""
    from .patching import OUTPUT_CHANGE, TV

    for r in singles:
        is_score = r["metric"] not in (TV, OUTPUT_CHANGE)
        r["confirmed"] = F.passes(r["effect_causal"], r["effect_se"], r["score_to"], is_score)
    conf = [r for r in singles if r["confirmed"]]
    top = max(conf, key=lambda r: r["effect_causal"]) if conf else None
    is_score = joint.metric not in (TV, OUTPUT_CHANGE)
    redundant = not conf and F.passes(joint.effect, joint.se, joint.base, is_score)
    for r in singles:
        r.update(dominant=r is top, joint_effect=joint.effect, joint_se=joint.se,
                 redundant=bool(redundant))
    return singles


def find_circuits(model, composition: xr.Dataset, *, k: int = F.DEFAULT_K, sequences=None,
                  text=None, receivers_of_interest=None, seed: int = 0,
                  threshold: float = THRESHOLD, sinks: bool = False,
                  progress: bool = True) -> xr.Dataset:
    """Candidate circuits of ``model`` screened by ``composition`` and confirmed by path
    patching (module docstring; :mod:`.find` states the steps and the rule, :func:`.table.candidate_dataset` the output).

    model: a transformers model, a :class:`rmtbase.probe.loader.Loaded`, folder, ``.gguf``
    file or hub id (:func:`.model.load_model`); gpt2 and the LLaMA family
    (:data:`.heads.SUPPORTED`). composition: its composition
    Dataset. k: sources per receiver and kind. sequences: a :class:`.sequences.Sequences`,
    ``"text"`` (``text``, else the probe's default text: full windows of 256 tokens or the
    model's maximum, at most 16; a text shorter than two windows in two halves; needs a
    tokenizer), ``"repeated_random_tokens"`` (16 × (BOS + 2 ×
    50), ``seed``) or None (the same: the standard induction test; on the probe's text
    SmolLM2's induction heads score 0.10–0.26 and go unlabelled, on repeated random tokens
    0.46–0.88, ``docs/path-patching.md``).
    text: a :class:`rmtbase.probe.text.Text` or UTF-8 file for ``sequences="text"`` (given
    with ``sequences`` None, it means ``"text"``).
    receivers_of_interest: [(layer, head), …] instead of the labelled heads. threshold: the
    label threshold (:data:`.labels.THRESHOLD`). sinks: patch the ``first-token`` heads too
    (:mod:`.find`, step 2, says why they are not by default).
    """
    F.check_composition(composition)
    if int(k) < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    if text is not None and sequences is None:
        sequences = "text"
    if text is not None and sequences != "text":
        raise InputError(f"text is read with sequences='text', not {sequences!r}")
    if sequences is not None and not isinstance(sequences, Sequences) \
            and sequences not in SOURCES:
        raise InputError(f"sequences must be one of {', '.join(SOURCES)} or a Sequences, "
                         f"got {sequences!r}")
    n_l, n_h = composition.sizes["layer_to"], composition.sizes["head_to"]
    for li, hi in receivers_of_interest or ():
        if not (1 <= int(li) < n_l and 0 <= int(hi) < n_h):
            raise InputError(f"receiver {head_name(li, hi)} is not a head after layer 0 of "
                             f"this {n_l}-layer, {n_h}-head model")
    return run_circuits(model, composition, k=int(k), sequences=sequences, text=text,
                        receivers_of_interest=receivers_of_interest, seed=seed,
                        threshold=threshold, sinks=bool(sinks), progress=progress)


def run_circuits(model, composition, *, k, sequences, receivers_of_interest, seed, threshold,
                 progress, text=None, sinks=False) -> xr.Dataset:
    """:func:`.find.find_circuits` after its argument checks."""
    from .model import load_model

    net, tok, name = load_model(model, tokenizer=sequences == "text")
    hm = HeadModel(net)
    _check_shape(hm, composition)
    seqs = make_sequences(net, tok, sequences, seed, text)
    stage("rmtbase circuits", f"labels from {seqs.description}", enabled=progress)
    with one_thread():
        cap, totals = capture(hm, seqs, progress=progress)
    probe = probe_dataset(totals, seqs, name)
    labels = label_heads(probe, threshold=threshold)
    recv = (F.receivers(labels, composition, sinks=sinks) if receivers_of_interest is None
            else _explicit(receivers_of_interest, labels))
    n_sinks = 0 if sinks or receivers_of_interest is not None else \
        int((labels["label"].values[1:] == "first-token").sum())
    cost = F.plan(recv, min(k, (hm.n_layers - 1) * hm.n_heads), seqs.n, seqs.length)
    stage("rmtbase circuits", f"path patching {cost['receivers']} receivers: "
          f"{cost['patches']} patches (q, k, v x top {k} by weights + all {k} together) on "
          f"{cost['sequences']} sequences of {seqs.length} tokens"
          + (f"; {n_sinks} first-token sinks labelled, not patched" if n_sinks else ""),
          enabled=progress)
    pt = Patcher(hm, cap, seqs)
    rows: list[dict] = []
    with one_thread(), progress_bar(len(recv), desc="rmtbase circuits: path patching",
                                   unit="receiver", enabled=progress) as bar:
        for rec in sorted(recv, key=lambda r: r[:2]):  # by layer: shared source products
            rows.extend(_patch_receiver(pt, composition, rec, k))
            bar.update(1)
    ds = candidate_dataset(rows, labels, probe, seqs, k=k)
    ds.attrs.update(model=name, n_receivers=cost["receivers"], n_patches=cost["patches"],
                    sinks_patched=int(bool(sinks)), n_sinks_not_patched=n_sinks)
    return ds


__all__ = ["MAX_TEXT_SEQUENCES", "find_circuits", "make_sequences", "one_thread", "run_circuits"]
