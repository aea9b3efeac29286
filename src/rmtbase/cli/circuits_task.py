"""``rmtbase circuits MODEL --task FILE``: a task's circuit (:mod:`rmtbase.circuits.task`;
docs/tasks.md), or with ``--evaluate CIRCUIT.json`` the faithfulness of a circuit the user
brings. Options are checked before the model is read; the outputs go to ``--out`` all or
nothing."""

from __future__ import annotations

import sys
import time

#: :data:`rmtbase.circuits.core.metric.METRICS` and
#: :data:`rmtbase.circuits.core.runner.COUNTERFACTUALS`, written out so that ``--help`` imports
#: neither numpy nor the circuit package (tests/test_circuits_task.py holds them equal).
METRICS = ("logit_diff", "logprob", "kl")
COUNTERFACTUALS = ("corrupted", "mean", "resample", "zero")


#: Edges of summary.txt printed on the screen, below all its lines before the edges.
SCREEN_EDGES = 10


def add_options(p) -> None:
    """The task options of ``rmtbase circuits``."""
    p.add_argument("--task", default=None, metavar="FILE",
                   help="a task file (JSON lines of clean, corrupted, answer, wrong; "
                        "docs/tasks.md), or a shipped task's name (ioi, greater_than, "
                        "greater_than_digits, induction): find the circuit of the model's "
                        "output metric on it")
    p.add_argument("--metric", choices=METRICS, default=None,
                   help="the task's output metric (default logit_diff)")
    p.add_argument("--counterfactual", choices=COUNTERFACTUALS, default=None,
                   help="what a removed edge or source carries: the corrupted prompt's value "
                        "(--task's default), its mean over the other prompts or sequences at "
                        "each position (the head search's default), its value on another "
                        "(resample) or zero; an edge is confirmed only where another "
                        "counterfactual keeps half its effect (in a pruned task circuit's "
                        "context, required unless it is corrupted: summary.json's rule)")
    p.add_argument("--evaluate", default=None, metavar="CIRCUIT.json",
                   help="with --task: score this circuit (MIB JSON or a list of edge names) "
                        "instead of finding one")
    p.add_argument("--composition", default=None, metavar="COMPOSITION.nc",
                   help="with --task: a composition.nc (of rmtbase circuits or score "
                        "--composition) whose rank, p and q of each head pair stand beside "
                        "the head-to-head edges")
    p.add_argument("--top", type=int, default=None,
                   help="with --task: edges listed (default 20); where the graph is too large "
                        "for exact pruning in context, the top of the ranking patched exactly "
                        "and the circuit's top ones confirmed in its context")
    p.add_argument("--holdout", type=float, default=None,
                   help="with --task: fraction of the prompt pairs held out; the edges are "
                        "ranked on the others and the circuit scored on these (default 0.5; "
                        "0: rank and score on all, in-sample)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch's threads for the forward passes (both modes; default: your "
                        "OMP_NUM_THREADS if set, else one per 200M block parameters, at "
                        "most the cores)")
    p.add_argument("--force", action="store_true", default=None,
                   help="with --task: search even where the model does not do the task (its "
                        "full model not above the empty graph by 3 se, or the answer beating "
                        "the wrong token on at most half of the pairs), which is refused "
                        "otherwise")


#: The task mode's options and their defaults (None on the parser, so that one given
#: without ``--task`` is seen and refused).
TASK_DEFAULTS = {"metric": "logit_diff", "counterfactual": "corrupted", "top": 20,
                 "holdout": 0.5, "force": False}
#: The head-behaviour search's options, refused with ``--task`` (None or False unless given).
HEAD_OPTIONS = ("k", "layers", "receivers", "text", "draws", "seed", "sinks", "mlp_paths",
                "repeat_length")


def given(args, names) -> list[str]:
    """The options of ``names`` that ``args`` sets, as flags: any value but the parser's
    defaults None and False (by identity: a given 0 or 0.0 is set)."""
    return ["--" + n.replace("_", "-") for n in names
            if (v := getattr(args, n, None)) is not None and v is not False]


def run(args) -> int:
    """The ``--task`` mode of ``rmtbase circuits``."""
    from pathlib import Path

    from ..circuits.task import search
    from ..circuits.task.taskfile import read_records
    from ..circuits.task.templates import resolve
    from ..errors import InputError
    from ..files.output import check_output_dir
    from .model_args import check_local

    head = given(args, HEAD_OPTIONS)
    if head:
        raise InputError(f"{head[0]} is an option of the head-behaviour search, not of --task")
    for name, value in TASK_DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    if args.top < 1:
        raise InputError(f"--top must be at least 1, got {args.top}")
    check_local(args.model)
    args.task = str(resolve(args.task))  # a shipped task's name: its file
    records = read_records(args.task)  # a bad file is refused before the model is read
    if not args.quiet:
        from ..progress import message

        stem = Path(args.task).stem  # a long file name cut: the line within 200 characters
        message(f"rmtbase: task {stem if len(stem) <= 60 else stem[:59] + '…'}: "
                f"{_size(records)}")
    if getattr(args, "composition", None) is not None and args.evaluate is None:
        from ..circuits.task.weights import read_composition

        read_composition(args.composition)
    t0 = time.perf_counter()
    if args.evaluate is not None:
        from ..circuits.task.export import read_circuit_file

        read_circuit_file(args.evaluate)  # a bad circuit file is refused before the model
        res = search.evaluate(args.model, args.task, args.evaluate, metric=args.metric,
                              counterfactual=args.counterfactual, progress=not args.quiet,
                              threads=args.threads)
        print(_json(evaluate_document(res, args.metric)))
        return 0
    if args.out is None:
        from .default_out import model_stem

        args.out = str(Path("rmtbase-circuits") / f"{model_stem(args.model)}-"
                                                  f"{Path(args.task).stem}")
    check_output_dir(args.out, search.KIND, overwrite=args.overwrite)
    res = search.find_task_circuit(args.model, args.task, metric=args.metric,
                                   counterfactual=args.counterfactual, top=args.top,
                                   holdout=args.holdout, composition=getattr(args, "composition", None),
                                   progress=not args.quiet, force=bool(args.force),
                                   threads=args.threads)
    s = search.summary(res)

    def report(folder):
        from ..report.task_report import write_task_report

        folder.write_text("summary.txt", fit_text("\n".join(lines) + "\n"))
        write_task_report(folder, res, s, figures=not getattr(args, "no_figures", False))

    from ..report.line_width import fit_text
    from ..report.task_report import summary_lines

    lines = summary_lines(s)

    written = search.write_outputs(res, args.out, extra=report)
    if getattr(args, "json", False):
        print(_json({"schema": "rmtbase.circuits.task/1",
                     "command": "rmtbase circuits --task", "out": str(args.out),
                     "files": sorted(str(p) for p in written), **s}))
    else:
        print(fit_text("\n".join(lines[:len(lines) - len(s["top_edges"]) + SCREEN_EDGES])))
    print(f"wrote {len(written)} files to {args.out} in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0


def _size(records) -> str:
    """The task's size as known before the model is read: pairs × tokens where the prompts are
    token ids, the pairs alone where they are text (tokenised once the model is read)."""
    from ..limits import MAX_TASK_TOKENS

    n = len(records)
    if any(isinstance(r[f], str) for r in records for f in ("clean", "corrupted")):
        return f"{n} prompt pairs (text: tokenised once the model is read)"
    lengths = {len(r["clean"]) for r in records}
    if len(lengths) > 1:
        return f"{n} prompt pairs"  # of unequal lengths: refused once tokenised
    t = lengths.pop()
    return f"{n} prompt pairs x {t} tokens = {n * t} token positions (at most {MAX_TASK_TOKENS})"


def evaluate_document(res: dict, metric: str) -> dict:
    """``--evaluate``'s JSON document of :func:`rmtbase.circuits.task.search.evaluate`'s result:
    the metric's name under ``metric``, the circuit's value of it under ``circuit_metric``."""
    res = dict(res)
    value = res.pop("metric")
    if isinstance(value, str):  # already the name
        return {"schema": "rmtbase.circuits.evaluate/1", **res, "metric": value}
    return {"schema": "rmtbase.circuits.evaluate/1", **res, "metric": metric,
            "circuit_metric": value}


def _json(doc: dict) -> str:
    """``doc`` as strict JSON (non-finite numbers null, never ``NaN``), indented."""
    from ..files.strict_json import dumps

    return dumps(doc, indent=1)


__all__ = ["add_options", "evaluate_document", "run"]
