"""``rmtbase circuits MODEL``: the circuit search alone (:func:`rmtbase.circuits.find_circuits`;
output :mod:`rmtbase.report.circuits_report`), every option checked before the model is read.

The options build the search's settings record, :class:`rmtbase.circuits.head.find.Search`
(:func:`search_of`), and the composition's,
:class:`rmtbase.scoring.settings.CompositionSettings`, which reach the library as they are; an
option not given is left to its record's default (the defaults the help states are the
records', held equal by tests/test_cli_circuits_command.py)."""

from __future__ import annotations

import argparse
import time

from ..errors import InputError
from . import _output as output
from ._common import positive_int


def lengths_arg(text: str):
    """``--repeat-length``: ``auto`` or comma-separated integers."""
    if text.strip() == "auto":
        return "auto"
    try:
        vals = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 'auto' or integers separated by commas, got {text!r}") from None
    return vals


def heads_arg(text: str):
    """``--receivers``: comma-separated heads ``L<layer>H<head>``."""
    import re

    out = []
    for t in text.split(","):
        m = re.fullmatch(r"\s*L(\d+)H(\d+)\s*", t)
        if not m:
            raise argparse.ArgumentTypeError(f"a head is written L<layer>H<head>, got {t!r}")
        out.append((int(m.group(1)), int(m.group(2))))
    return out


def layers_arg(text: str):
    """``--layers``: comma-separated layer numbers."""
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"layers are integers separated by commas, got "
                                         f"{text!r}") from None


def add_repeat_length(p) -> None:
    """The ``--repeat-length`` option (shared with ``score --composition --probe``)."""
    p.add_argument("--repeat-length", type=lengths_arg, default=None, metavar="N[,N...]|auto",
                   help="tokens per half of the repeated random sequences the heads are "
                        "labelled and patched on (default auto: 5, 10, 20, 50 where the "
                        "context and vocabulary allow, each head at the length where its "
                        "behaviour is strongest)")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "circuits", help="find circuits: behaviour labels, every source screened, patching",
        description=(
            "Label every head by behaviour on repeated random tokens at several lengths, "
            "screen every earlier source of each labelled receiver (composition by weights "
            "and a first-order attribution estimate), and confirm by exact path patching, "
            "direct and through the MLPs; each induction circuit's output loss: "
            "composition.nc, circuits.nc, summary.txt, figures/circuits.png and report.html, "
            "all or nothing. No head scoring."))
    p.add_argument("model", help="local folder, .gguf file or hub id of a causal language model")
    p.add_argument("--k", type=positive_int, default=None,
                   help="sources patched per receiver, kind and ranking when not every source "
                        "is (default 3)")
    p.add_argument("--layers", type=layers_arg, default=None, metavar="L[,L...]",
                   help="only receivers in these layers")
    p.add_argument("--receivers", type=heads_arg, default=None, metavar="LlHh[,...]",
                   help="these receivers instead of the labelled heads (an unlabelled one gets "
                        "dependencies, not circuits)")
    add_repeat_length(p)
    p.add_argument("--text", default=None, metavar="FILE",
                   help="label and patch on this UTF-8 text's windows instead (needs the "
                        "model's tokenizer)")
    p.add_argument("--draws", type=positive_int, default=None,
                   help="composition null draws (default: the composition's own)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the null and the sequences (default 0)")
    p.add_argument("--sinks", action="store_true", help="patch first-token heads too")
    p.add_argument("--mlp-paths", choices=tuple(MLP_PATHS), default=None,
                   help="screen paths through MLPs (default auto: when it costs at most 2 "
                        "TFLOP)")
    output.add_out(p, None, "rmtbase-circuits/<model name>")
    output.add_overwrite(p, "rmtbase circuits")
    output.add_json(p, "print one JSON document (found lines, circuits, files) on stdout")
    output.add_no_figures(p, "skip figures/circuits.png")
    output.add_quiet(p)
    from .circuits_task import add_options

    add_options(p)
    return p


#: --mlp-paths' words and the :attr:`rmtbase.circuits.head.find.Search.mlp_paths` each stands for.
MLP_PATHS = {"auto": "auto", "on": True, "off": False}

#: Start-up check (rmtbase.cli): an --out that is a file, refused before the imports.
early = output.early_out


def search_of(args, **fields):
    """The :class:`rmtbase.circuits.head.find.Search` of the options (``rmtbase circuits``'s, or
    ``score --composition --probe``'s: those it lacks are not given), checked when built; an
    option not given keeps the record's default. ``fields``: further fields (the score's
    ``seed`` and ``text``)."""
    from ..circuits.head.find import Search

    given = {"k": getattr(args, "k", None), "seed": getattr(args, "seed", None),
             "lengths": args.repeat_length, "text": getattr(args, "text", None),
             "receivers": getattr(args, "receivers", None),
             "layers": getattr(args, "layers", None),
             "mlp_paths": MLP_PATHS.get(getattr(args, "mlp_paths", None)),
             "counterfactual": getattr(args, "counterfactual", None)}
    given.update(fields)
    if getattr(args, "sinks", False):
        given["sinks"] = True
    return Search(**{k: v for k, v in given.items() if v is not None}, **on_receiver(args))


def check(args, search) -> dict:
    """Every option against the model's config, before any work (``search``: the options'
    :class:`~rmtbase.circuits.head.find.Search`): the family
    (:func:`rmtbase.circuits.core.families.check_family`), the receivers and layers against the
    model's size, the repeat lengths."""
    from types import SimpleNamespace

    from ..circuits.core.families import check_family, text_config
    from ..circuits.head.sequences import repeat_lengths
    from ..models.loading import model_config, model_info

    cfg = model_config(args.model)
    check_family(cfg)
    if search.receivers or search.layers:  # the sizes from the config or header alone
        info = model_info(args.model)
        n_l, n_h = info.n_layers, info.n_heads
    for li, hi in search.receivers or ():
        if not (li < n_l and hi < n_h):
            raise InputError(f"receiver L{li}H{hi} is not a head after layer 0 of this "
                             f"{n_l}-layer, {n_h}-head model")
    for li in search.layers or ():
        if not li < n_l:
            raise InputError(f"layers: {li} is not a layer after 0 of this {n_l}-layer model")
    tc = text_config(cfg)
    tc = tc if isinstance(tc, dict) else vars(tc)
    if search.text is not None:
        if search.lengths != "auto":
            raise InputError("--repeat-length is for repeated random tokens, not --text")
    elif "vocab_size" in tc:  # else (a GGUF's header) checked once the model is read
        got = repeat_lengths(SimpleNamespace(**tc), search.lengths)
        if not got:
            raise InputError("no repeat length fits this model's context and vocabulary; "
                             "use --text")
    return cfg


def run(args: argparse.Namespace) -> int:
    from ..files.output import check_output_dir
    from ..report.circuits_report import KIND
    from .model_args import check_local

    if args.task is not None or args.evaluate is not None:
        return _task(args)
    if getattr(args, "composition", None) is not None:
        raise InputError("--composition needs --task FILE (the head-behaviour search "
                         "computes its own)")
    from .circuits_task import TASK_DEFAULTS, given

    task_only = given(args, [k for k in TASK_DEFAULTS if k != "counterfactual"])
    if task_only:
        raise InputError(f"{task_only[0]} needs --task FILE")
    if getattr(args, "counterfactual", None) is not None:
        from ..circuits.core.counterfactual import check_kind

        check_kind(args.counterfactual)  # corrupted needs a task's pairs
    check_local(args.model)
    if args.out is None:
        from pathlib import Path

        from .default_out import model_stem

        args.out = str(Path("rmtbase-circuits") / model_stem(args.model))
    check_output_dir(args.out, KIND, overwrite=args.overwrite)
    from ..scoring.settings import CompositionSettings

    search = search_of(args)
    settings = CompositionSettings(draws=args.draws, seed=search.seed)
    check(args, search)
    if search.text is not None:  # a missing, empty or non-UTF-8 text: before any work
        from ..probe import read_text

        read_text(search.text)
    from ..probe.threads import torch_threads

    with torch_threads(args.threads):  # the tool's policy (rmtbase.probe.threads)
        return _search(args, search, settings)


def on_receiver(args) -> dict:
    """``{"on_receiver": say}`` for :func:`rmtbase.circuits.find_circuits` where lines are
    wanted (neither ``--json`` nor ``--quiet``), else {}: ``say`` writes
    each receiver's lines (:func:`rmtbase.report.circuit_lines.receiver_lines`, each cut to two
    rows of 80 columns) on stderr, with the progress (:func:`rmtbase.progress.message`), as
    soon as that receiver is done; the answer on stdout stays the screen of what was found at
    the end, and summary.txt holds every line whole."""
    if getattr(args, "json", False) or getattr(args, "quiet", False):
        return {}
    from ..circuits.core.counterfactual import DEFAULT_ABLATION
    from ..progress import message
    from ..report.circuit_lines import TERMINAL_WIDTH, fit_rows, receiver_lines

    ablation = getattr(args, "counterfactual", None) or DEFAULT_ABLATION

    def say(rows) -> None:
        for t in receiver_lines(list(rows), ablation=ablation):
            for row in fit_rows(f"rmtbase circuits: found {t}", TERMINAL_WIDTH):
                message(row)

    return {"on_receiver": say}


def _task(args) -> int:
    """``--task`` / ``--evaluate``: :mod:`.circuits_task`."""
    from .circuits_task import run as run_task

    if args.task is None:
        raise InputError("--evaluate needs --task FILE")
    return run_task(args)


def _plain(v):
    """A JSON value of a netCDF attribute (NaN as None)."""
    import numpy as np

    if isinstance(v, (np.floating, float)):
        return float(v) if np.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _losses(cds) -> list[dict]:
    """--json's ``output_losses``: one object per induction circuit (NaN as None)."""
    from ..report.circuit_losses import loss_rows

    return [{k: _plain(v) for k, v in r.items()} for r in loss_rows(cds)]


def _search(args, search, settings) -> int:
    """The composition (``settings``: ``--draws``, the search's seed) and the search
    (``search``), written and printed."""
    from ..circuits import find_circuits
    from ..progress import stage
    from ..report.circuit_context import context
    from ..report.circuit_lines import terminal
    from ..report.circuits_report import write_circuits
    from ..scoring.composition.run import composition

    t0 = time.perf_counter()
    stage("rmtbase circuits", "composition: every cross-layer head pair, Q, K and V",
          enabled=not args.quiet)
    comp = composition(args.model, settings=settings, progress=not args.quiet)
    cds = find_circuits(args.model, comp, search=search, progress=not args.quiet)
    ctx = context(None, {"composition.nc": comp, "circuits.nc": cds})
    written = write_circuits(ctx, cds, args.out, figures=not args.no_figures)
    if args.json:
        from .json_documents import print_json, written_doc

        doc = written_doc("circuits", args.out, written)
        doc.update(found=ctx["found"], circuits=ctx["circuits"],
                   summary={k: _plain(cds.attrs.get(k)) for k in (
                       "repeat_lengths", "n_receivers", "n_tests", "screen", "ablation",
                       "counterfactual", "resample_pairings",
                       "mlp_paths_screened", "expected_false_confirmations",
                       "spearman_weights_rank_vs_effect", "spearman_attribution_vs_effect",
                       "pairs_unlike_random")} | {
                       "composition_draws": _plain(comp.attrs.get("draws")),
                       "composition_open_pairs": _plain(comp.attrs.get(
                           "composition_open_pairs")),
                       "output_losses": _losses(cds)})
        print_json(doc)
    else:
        print("What was found:")  # with its rows, within 24 x 80 (circuit_lines.terminal)
        print("\n".join(f"  {t}" for t in terminal(ctx["found"])))
    output.say_wrote(written, args.out, t0, report=True)
    return 0
