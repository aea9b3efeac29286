"""``rmtbase score MODEL --composition --probe``: after the composition, the circuit search
(:func:`rmtbase.circuits.find_circuits`).

:func:`check` says before any work whether path patching runs (the family, from the config
alone) and the text probe can (a tokenizer; also for ``--text FILE``), and checks
``--repeat-length``; an encoder is labelled by the text probe, its circuits screened by
weights only, said so. :func:`outputs` loads the model once, for the search and the text probe
(``plan.loaded``), and writes ``composition.nc`` and ``circuits.nc``."""

from __future__ import annotations

import sys


def _patched():
    """Path patching's families, as config ``model_type`` (rmtbase.circuits.families)."""
    from ..circuits.families import SUPPORTED

    return SUPPORTED


def has_tokenizer(model) -> bool:
    """Whether the text probe can read ``model``'s tokenizer (its preconditions pass)."""
    from ..errors import ModelError
    from ..probe.run import check_model

    try:
        check_model(model)
    except ModelError:
        return False
    return True


def _check_lengths(cfg: dict, spec) -> None:
    """The repeat lengths fit the model's positions and vocabulary (``--repeat-length``),
    before any work."""
    from types import SimpleNamespace

    from ..circuits.families import text_config
    from ..circuits.sequences import repeat_lengths
    from ..errors import InputError

    tc = text_config(cfg)
    tc = tc if isinstance(tc, dict) else vars(tc)
    if "vocab_size" not in tc:  # a GGUF's header: checked once the model is read
        return
    if not repeat_lengths(SimpleNamespace(**tc), spec):
        raise InputError("--composition --probe: no repeat length fits this model's context "
                         "and vocabulary; use --text")


def check(args, plan) -> dict:
    """{"patch": path patching runs, "text": the text probe runs, "model_type"} for
    ``--composition --probe`` (module docstring), before any work; notes on stderr."""
    from ..circuits.families import check_family
    from ..errors import InputError
    from ..models import default_model_path
    from ..models.loading import model_config

    cfg = model_config(default_model_path() if plan.model is None else plan.model)
    mt = str(cfg.get("model_type", "") or "")
    got = {"patch": mt in _patched(), "text": has_tokenizer(plan.model), "model_type": mt}
    spec = getattr(args, "repeat_length", "auto")
    if not got["text"] and not got["patch"]:  # refused before any note of what would run
        raise InputError(f"--probe needs a tokenizer for a {mt or 'model'} model (path "
                         f"patching with repeated random tokens runs causal language models: "
                         f"{', '.join(_patched())})")
    if got["patch"]:
        check_family(cfg)  # a variant path patching does not follow: one line, before work
    elif spec != "auto":
        raise InputError(f"--repeat-length: path patching does not run {mt or 'this'} models")
    if args.text is not None and spec != "auto":
        raise InputError("--repeat-length is for repeated random tokens, not --text")
    if not args.quiet and not got["patch"]:
        print(f"rmtbase: --probe: path patching runs causal language models, not "
              f"{mt or 'this one'}: heads are labelled from the text probe and the circuits "
              "are screened by weights only (not confirmed)", file=sys.stderr)
    if got["patch"] and args.text is None:  # on repeated random tokens
        _check_lengths(cfg, spec)
    if args.text is not None and got["patch"]:
        if not got["text"]:
            raise InputError("--text: the circuit search reads the text with the model's "
                             "tokenizer; this model has none (leave out --text: repeated "
                             "random tokens)")
        if not args.quiet:
            print(f"rmtbase: --text: the circuit search labels and patches on {args.text}'s "
                  "windows (without --text: repeated random tokens at several lengths)",
                  file=sys.stderr)
    if not got["text"] and not args.quiet:
        print("rmtbase: --probe: no tokenizer: the text probe's behaviour columns are left "
              "out; heads are labelled and patched on repeated random tokens",
              file=sys.stderr)
    return got


def outputs(args, plan, checked: dict | None) -> dict:
    """{"composition.nc", ("circuits.nc"), ("figures/composition.png")}: the composition, with
    ``checked["patch"]`` the circuit search (same model and seed), and its figure."""
    from ..progress import stage
    from .score_extras import composition_extras

    stage("rmtbase", "composition: every cross-layer head pair, Q, K and V", enabled=not args.quiet)
    out = composition_extras(plan.model, plan.revision, args)
    if checked and checked["patch"]:
        from ..circuits import find_circuits
        from ..models import default_model_path
        from ..probe.loader import load

        stage("rmtbase", "circuits: heads labelled by behaviour, top sources path-patched",
              enabled=not args.quiet)
        # one load for the circuit search and the text probe (score_modes.single frees it)
        loaded = load(default_model_path() if plan.model is None else plan.model,
                      tokenizer="required" if plan.text_probe else "no")
        out["circuits.nc"] = find_circuits(
            loaded, out["composition.nc"], seed=args.seed, progress=not args.quiet,
            text=plan.probe_text if args.text is not None else None,
            repeat_lengths=getattr(args, "repeat_length", "auto"), **on_receiver(args))
        plan.loaded = loaded if plan.text_probe else None
    return out


def on_receiver(args) -> dict:
    """``{"on_receiver": say}`` for :func:`rmtbase.circuits.find_circuits` where the search
    takes it and lines are wanted (neither ``--json`` nor ``--quiet``), else {}: ``say`` writes
    each receiver's lines (:func:`rmtbase.report.circuit_lines.receiver_lines`, each cut to two
    rows of 80 columns) on stderr, with the progress (:func:`rmtbase.progress.message`), as
    soon as that receiver is done; the answer on stdout stays the screen of what was found at
    the end, and summary.txt holds every line whole."""
    from ..circuits.find import Search

    fields = Search.__dataclass_fields__
    if getattr(args, "json", False) or getattr(args, "quiet", False) \
            or "on_receiver" not in fields:
        return {}
    from ..progress import message
    from ..report.circuit_lines import TERMINAL_WIDTH, fit_rows, receiver_lines

    ablation = getattr(args, "ablation", None) or (
        fields["ablation"].default if "ablation" in fields else None)

    def say(rows) -> None:
        for t in receiver_lines(list(rows), ablation=ablation):
            for row in fit_rows(f"rmtbase circuits: found {t}", TERMINAL_WIDTH):
                message(row)

    return {"on_receiver": say}


def redraw(out: dict, score, args) -> dict | None:
    """The context (:func:`rmtbase.report.circuit_context.context`) of the composition outputs
    ``out`` and ``score`` (its text probe's labels when no search ran), with
    ``figures/composition.png`` drawn (not with --no-figures)."""
    from ..report.circuit_context import context

    ctx = context(score, out)
    if ctx is None or args.no_figures:
        return ctx
    import matplotlib.pyplot as plt

    from ..report.composition_figure import plot_circuit

    ax = plot_circuit(ctx["composition"], circuits=ctx["circuits"], labels=ctx["labels"])
    out["figures/composition.png"] = ax.figure
    plt.close(ax.figure)
    return ctx


def with_labels(ds, ctx: dict | None):
    """``ds`` with ``head_label`` (layer, head), each head's behaviour label from the context;
    unchanged without labels."""
    if not ctx or not ctx["labels"]:
        return ds
    import numpy as np

    lab = np.array([[ctx["labels"].get((int(li), int(hi)), "none") for hi in ds["head"].values]
                    for li in ds["layer"].values], dtype=str)
    out = ds.copy()
    out["head_label"] = (("layer", "head"), lab, {
        "long_name": "behaviour label", "units": "1",
        "definition": "what the head does on the probe's sequences (rmtbase.circuits.labels: "
                      "induction, previous-token, duplicate-token, self/local, first-token, "
                      "none); head_kind says how its weights differ from random"})
    return out


def json_fields(ctx: dict) -> dict:
    """The ``--json`` additions of a composition context: ``found`` (lines) and, with the
    circuit search, ``circuits`` (``circuit_list`` objects)."""
    out = {"found": ctx["found"]}
    if ctx["circuits"] is not None:
        out["circuits"] = ctx["circuits"]
    return out


__all__ = ["check", "has_tokenizer", "json_fields", "on_receiver", "outputs", "redraw",
           "with_labels"]
