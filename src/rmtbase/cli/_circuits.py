"""``rmtbase score MODEL --composition --probe``: after the composition, the circuit search
(:func:`rmtbase.circuits.find_circuits`: every head labelled by behaviour, each labelled
receiver's top sources by weights path-patched into its q, k and v input) and what the first
screen says (issue 55, item 3).

- :func:`check` (before any work): whether path patching runs on the model (gpt2 and the
  LLaMA family, :data:`rmtbase.circuits.heads.SUPPORTED`, from the config alone) and whether
  the text probe can (a tokenizer). A model the patching does not run is not refused: its heads
  are labelled from the text probe and the circuits stay screened by weights, said so. The
  search labels and patches on repeated random tokens (TransformerLens'
  ``generate_repeated_tokens`` convention, BOS + 2 × 50: the model needs 101 positions,
  checked here); a model without a tokenizer is not refused: the text probe's join is left
  out, said so. With ``--text FILE`` the search labels and patches on that text's windows
  instead (it needs the tokenizer; a text shorter than two windows is cut in two halves).
- The model is loaded once (:func:`rmtbase.probe.loader.load`) for the circuit search and the
  text probe: :func:`outputs` keeps it in ``plan.loaded`` for
  the text probe (:func:`rmtbase.cli.score_modes.single`), which releases it.
- :func:`outputs`: ``composition.nc`` and, with ``--probe``, ``circuits.nc``; :func:`redraw`
  the figure (``figures/composition.png``) with the circuits and labels; :func:`with_labels`
  each head's label as ``head_label`` in the score.
- :func:`json_fields`: the ``--json`` fields (``circuits``: ``circuit_list`` objects; the
  found lines come from :mod:`rmtbase.report.circuit_context`).
"""

from __future__ import annotations

import sys

#: Path patching's architectures, as config ``model_type`` (rmtbase.circuits.heads.SUPPORTED).
PATCHED = ("gpt2", "llama", "mistral", "qwen2", "qwen3")


def has_tokenizer(model) -> bool:
    """Whether the text probe can read ``model``'s tokenizer (its preconditions pass)."""
    from ..errors import ModelError
    from ..probe.run import check_model

    try:
        check_model(model)
    except ModelError:
        return False
    return True


def _check_positions(cfg: dict) -> None:
    """Repeated random tokens (BOS + 2 × n, the circuit search's sequences) fit the model's
    positions, before any work."""
    from ..circuits.sequences import DEFAULT_HALF
    from ..errors import InputError

    cap = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    need = 2 * DEFAULT_HALF + 1
    if isinstance(cap, int) and cap < need:
        raise InputError(f"--composition --probe patches on repeated random tokens of {need} "
                         f"positions; the model has {cap}")


def check(args, plan) -> dict:
    """{"patch": path patching runs, "text": the text probe runs, "model_type"} for
    ``--composition --probe`` (module docstring), before any work; notes on stderr."""
    from ..models import default_model_path
    from ..models.loading import model_config

    cfg = model_config(default_model_path() if plan.model is None else plan.model)
    mt = str(cfg.get("model_type", "") or "")
    got = {"patch": mt in PATCHED, "text": has_tokenizer(plan.model), "model_type": mt}
    if not got["text"] and not got["patch"]:  # refused before any note of what would run
        from ..errors import InputError

        raise InputError(f"--probe needs a tokenizer for a {mt or 'model'} model (path "
                         f"patching with repeated random tokens runs {', '.join(PATCHED)})")
    if not args.quiet and not got["patch"]:
        print(f"rmtbase: --probe: path patching runs {', '.join(PATCHED)} models, not "
              f"{mt or 'this one'}: heads are labelled from the text probe and the circuits "
              "are screened by weights only (not confirmed)", file=sys.stderr)
    if got["patch"] and args.text is None:  # on repeated random tokens (BOS + 2 x 50)
        _check_positions(cfg)
    if args.text is not None and got["patch"]:
        if not got["text"]:
            from ..errors import InputError

            raise InputError("--text: the circuit search reads the text with the model's "
                             "tokenizer; this model has none (leave out --text: repeated "
                             "random tokens)")
        if not args.quiet:
            print(f"rmtbase: --text: the circuit search labels and patches on {args.text}'s "
                  "windows (without --text: repeated random tokens, the standard induction "
                  "test)", file=sys.stderr)
    if not got["text"]:
        if not args.quiet:
            print("rmtbase: --probe: no tokenizer: the text probe's behaviour columns are left "
                  "out; heads are labelled and patched on repeated random tokens",
                  file=sys.stderr)
    return got


def outputs(args, plan, checked: dict | None) -> dict:
    """{"composition.nc", ("circuits.nc"), ("figures/composition.png")}: the composition
    (:func:`rmtbase.cli.score_extras.composition_extras`), with ``checked["patch"]`` the
    circuit search on the same model and seed, and the figure drawn with its circuits and
    labels."""
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
            text=plan.probe_text if args.text is not None else None)
        plan.loaded = loaded if plan.text_probe else None
    return out


def redraw(out: dict, score, args) -> dict | None:
    """The presentation's context (:func:`rmtbase.report.circuit_context.context`) of the
    composition outputs ``out`` and the ``score`` (labels from its text probe when no circuit
    search ran), with ``figures/composition.png`` drawn with the circuits and labels (not
    with --no-figures)."""
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
    """The score ``ds`` with ``head_label`` (layer, head): each head's behaviour label from the
    context (``circuits.nc``'s, or the text probe's by the same rule), beside its kind in
    scores.nc and heads.csv; ``ds`` unchanged without labels."""
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


__all__ = ["PATCHED", "check", "has_tokenizer", "json_fields", "outputs", "redraw",
           "with_labels"]
