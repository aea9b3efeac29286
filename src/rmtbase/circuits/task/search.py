"""A task's circuit end to end: load the causal LM and its tokenizer, read the task, score
every edge by attribution (:mod:`..core.attribution`), rank the edges by pruning in context
(:mod:`.prune`: on exact patches where they fit a budget, else on integrated gradients, the
top edges then patched exactly, :mod:`..core.exact`), draw the faithfulness curve
(:mod:`..core.faithfulness`) of that ranking; the reported circuit is the smallest top-``k``
reaching faithfulness 0.8 (all edges when none does), and beside it the circuit of the
confirmed edges is scored too (:mod:`.confirm`: the pruning's stopped circuit's edges, or
beyond the budget the reported circuit's top edges, each in its circuit's context).
:func:`evaluate` scores a circuit the user brings; :mod:`.outputs` writes the files."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...files.heap import gives_heap_back
from ...probe.threads import fit_threads, in_torch_threads
from ..core.attribution import attribute, default_steps
from ..core.counterfactual import DEFAULT_TASK
from ..core.exact import patch_edges
from ..core.faithfulness import Scorer, curve, evaluate_kept, top_k
from ..core.forward import TaskModel, config_graph
from ..core.loader import load_causal_lm
from ..core.runner import Runner
from . import prune
from .behaviour import check as check_behaviour
from .behaviour import line as behaviour_line
from .behaviour import measure as measure_behaviour
from .confirm import confirm_in_context, confirm_within, stop_rule
from .losses import output_losses
from .model_input import input_line
from .outputs import KIND, summary, write_outputs
from .settings import HOLDOUT, SearchSettings
from .taskfile import Task, check_task, distinct_pairs, read_records, tokenise
from .weights import head_edge_columns, read_composition


def load(model, task, announce=None):
    """(:class:`..core.forward.TaskModel`, :class:`.taskfile.Task`, model name) of ``model``
    and a task path or :class:`.taskfile.Task` (:func:`load_described`)."""
    return load_described(model, task, announce)[:3]


def load_described(model, task, announce=None):
    """:func:`load`'s three and :func:`.model_input.describe`'s dict; the graph forward checked
    against the model's. ``announce(config, task)`` is called once the task is read, before
    the weights where :func:`..core.loader.load_causal_lm` can."""
    from .model_input import describe
    from .taskfile import needs_tokenizer
    from .templates import resolve

    src = None if isinstance(task, Task) else resolve(task)
    t, records = (task, None) if src is None else (None, read_records(src))
    if t is not None:
        check_task(t)
    described = {}

    def before(config, tok):
        nonlocal t
        if t is None:
            t = tokenise(records, tok, vocab_size=int(config.vocab_size), name=Path(src).stem,
                         source=str(src))
        t, dropped = distinct_pairs(t)  # a repeated pair counts once
        npos = getattr(config, "n_positions", None) or getattr(
            config, "max_position_embeddings", None)
        if npos is not None and t.length > int(npos):
            raise InputError(f"the task's prompts are {t.length} tokens; the model takes {npos}")
        described.update(describe(t, records, tok, config), duplicates=dropped)
        if announce is not None:
            announce(config, t)

    net, _, name = load_causal_lm(model, tokenizer=records is not None and
                                  needs_tokenizer(records), before=before)
    tm = TaskModel(net)
    tm.check(t.clean[:4])
    return tm, t, name, described


def split(task: Task, holdout: float) -> tuple[Task, Task]:
    """(fit, held-out) prompts of ``task``: every ``1 / holdout``-th pair held out, spread
    through the file (about ``holdout · N`` of them; none for 0, then both are ``task``);
    each side needs 2 pairs (an se over prompts)."""
    if not holdout:
        return task, task
    n, out = task.n, held_out(task.n, holdout)
    if out.sum() < 2 or (~out).sum() < 2:
        raise InputError(f"holding out {holdout:g} of {n} distinct prompt pairs leaves fewer "
                         f"than 2 on a side; give more pairs or holdout=0 (fit and score on "
                         f"all, in-sample)")

    def take(m):
        return Task(task.clean[m], task.corrupted[m], task.answer[m], task.wrong[m],
                    task.name, task.source)
    return take(~out), take(out)


def held_out(n: int, holdout: float) -> np.ndarray:
    """``(n,)`` bool: the pairs :func:`split` holds out (every ``1 / holdout``-th; none for 0)."""
    out = np.zeros(int(n), dtype=bool)
    if holdout:
        out[np.unique(np.floor(np.arange(0, n, 1 / holdout)).astype(np.int64))] = True
    return out


@gives_heap_back
@in_torch_threads
def find_task_circuit(model, task, settings: SearchSettings | None = None, *, composition=None,
                      progress: bool = False, **changes) -> dict:
    """Everything :func:`write_outputs` writes, as a dict (module docstring), run as
    :class:`.settings.SearchSettings` ``settings`` with ``changes`` says (``metric=``, …).

    The prompts split into a fit and a held-out part (:func:`split`): edges are ranked on the
    fit prompts, the curve, the circuit and its faithfulness are measured on the held-out ones.
    A task the model does not do is refused first (:mod:`.behaviour`) unless ``force``.
    ``progress``: a bar per pass over the prompts on stderr; ``composition``: a composition
    Dataset or its ``.nc`` file, whose rank, p and q of each head pair stand beside the
    head-to-head edges (:mod:`.weights`), read before the model; ``threads=``:
    :mod:`rmtbase.probe.threads`."""
    s = SearchSettings.of(settings, **changes)
    comp = None if composition is None else read_composition(composition)
    say = _stage if progress else (lambda text: None)
    plan = partial(_plan, holdout=s.holdout, budget=s.prune_budget, top=s.top,
                   steps=s.prune_steps)
    tm, t, name, described, threads_used = _read(model, task, plan, say, progress)
    fit_task, held_task = split(t, s.holdout)
    columns = {} if comp is None else head_edge_columns(tm.graph, comp)
    r = Runner(tm, fit_task, metric=s.metric, counterfactual=s.counterfactual, batch=s.batch,
               progress=progress)
    seen = _behaviour(r, s.force, say)  # the model does the task, or it is refused here
    sc = Scorer(r if not s.holdout else Runner(tm, held_task, metric=s.metric,
                                               counterfactual=s.counterfactual, batch=s.batch,
                                               progress=progress))
    held_seen = measure_behaviour(sc.runner) if s.holdout else seen  # the curve's denominator
    steps = default_steps(r.metric) if s.steps is None else s.steps
    say(_split_line(tm.graph.n_edges, fit_task.n, held_task.n if s.holdout else 0,
                    s.counterfactual))
    score, se = attribute(r, steps=steps)
    ranked = _rank(r, s, seen["behaviour"], (score, se) if steps == s.prune_steps else None,
                   say)
    say("the faithfulness curve on the held-out pairs" if s.holdout else
        "the faithfulness curve on the fit pairs (in-sample)")
    found = _circuit(r, sc, s, ranked, seen["behaviour"], say)
    return {"model": name, "task": t, "tm": tm, "metric": s.metric,
            "counterfactual": s.counterfactual, "score": score, "se": se,
            "steps": steps, "ranking_method": ranked["method"], "top": s.top,
            "ranking": ranked["key"],
            "split": {"holdout": s.holdout, "fit": fit_task.n,
                      "held_out": held_task.n if s.holdout else 0, "in_sample": not s.holdout},
            "exact": {int(e): (float(a), float(b)) for e, a, b in zip(
                ranked["patched"], ranked["eff"], ranked["eff_se"], strict=True)},
            **found, "columns": columns, "input": described,
            "behaviour": seen, "held_behaviour": held_seen, "threads": threads_used}


def _rank(r, s: SearchSettings, behaviour: float, first, say) -> dict:
    """The ranking (``key``), the edges patched exactly with their effects (``patched``,
    ``eff``, ``eff_se``), the method's record and, after pruning in context, the stopped
    circuit's verdicts (else None); ``first``: the attribution, where it is the estimated
    pruning's first round."""
    n_edges, n = r.tm.graph.n_edges, r.task.n
    if s.prune_budget and prune.fits(n_edges, n, s.prune_budget):
        say(f"pruning in context: {prune.plan(n_edges):,} edge sets")
        pr = prune.prune(r, say=say, stop=stop_rule(behaviour, n), behaviour=behaviour)
        return {"key": pr["key"], "patched": np.arange(n_edges), "eff": pr["clean"],
                "eff_se": pr["clean_se"], "verdicts": confirm_in_context(r, pr, behaviour),
                "method": {"method": "pruning in context", "rounds": pr["rounds"],
                           "sets": pr["sets"], "skipped": pr["skipped"],
                           "fraction": prune.FRACTION,
                           "tail": prune.TAIL}}
    pr = prune.prune_estimated(r, steps=s.prune_steps, sign=np.sign(behaviour) or 1.0,
                               say=say, first=first)
    patched = pr["order"][:min(s.top, n_edges)]
    eff, eff_se = patch_edges(r, patched)
    return {"key": pr["key"], "patched": patched, "eff": eff, "eff_se": eff_se,
            "verdicts": None,
            "method": {"method": "pruning on integrated gradients", "rounds": pr["rounds"],
                       "keep": prune.KEEP, "steps": s.prune_steps, "tail": prune.TAIL}}


def _circuit(r, sc, s: SearchSettings, ranked: dict, behaviour: float, say) -> dict:
    """The curve of ``ranked``'s key on the scored pairs, the reported circuit (its smallest
    top-k reaching 0.8), its output losses, the verdicts (the stopped circuit's, else the
    reported circuit's top edges each removed from it alone) and the confirmed circuit."""
    n_edges = r.tm.graph.n_edges
    cur = curve(sc, ranked["key"], points=s.points)
    k = cur["smallest"] if cur["smallest"] is not None else n_edges
    kept = top_k(cur["order"], k, n_edges)
    ev = evaluate_kept(sc, kept)
    losses = output_losses(sc.runner, kept)
    verdicts, confirmed_in = ranked["verdicts"], "stopped"
    if verdicts is None:
        tested = cur["order"][:min(s.top, k)]
        say(f"confirming the circuit's top {tested.size} edges in its context")
        d, d_se = (ranked["eff"][:tested.size], ranked["eff_se"][:tested.size]) \
            if kept.all() else patch_edges(r, tested, within=kept)
        verdicts, confirmed_in = confirm_within(r, kept, tested, d, d_se, behaviour), "reported"
    confirmed = np.isin(np.arange(n_edges), [e for e, v in verdicts.items() if v["confirmed"]])
    return {"verdicts": verdicts, "confirmed_in": confirmed_in, "curve": cur, "kept": kept,
            "circuit": ev, "confirmed_circuit": evaluate_kept(sc, confirmed),
            "output_losses": losses}


def _plan(config, t, *, holdout: float, budget: int, top: int, steps: int) -> str:
    """The pruning plan's line (:func:`.prune.plan_line`) from the config, before the weights."""
    fit = t.n - int(held_out(t.n, holdout).sum())
    return prune.plan_line(config_graph(config).n_edges, t.n, t.length, fit, budget=budget,
                           top=top, steps=steps)


def _read(model, task, plan, say, progress: bool) -> tuple:
    """:func:`load_described`'s four and the threads chosen, each said (``plan``'s line too)."""
    say(f"reading {getattr(model, 'name_or_path', None) or model} and the task")
    tm, t, name, described = load_described(
        model, task, (lambda config, t: say(plan(config, t))) if progress else None)
    say(input_line(described))
    threads = fit_threads(tm.hm.layers)
    say(f"torch threads: {threads['torch']} ({threads['why']})")
    return tm, t, name, described, threads


def _behaviour(runner, force: bool, say) -> dict:
    """:func:`.behaviour.measure` on ``runner``'s pairs, said, and refused unless ``force``."""
    seen = measure_behaviour(runner)
    say(behaviour_line(seen))
    check_behaviour(seen, force)
    return seen


def _split_line(n_edges: int, fit: int, held: int, counterfactual: str) -> str:
    """Which pairs rank the edges and which score the circuit (``held`` 0: in-sample)."""
    if held:
        return (f"{n_edges:,} edges, {fit} pairs to rank them, {held} to score the circuit; "
                f"counterfactual {counterfactual}")
    return (f"{n_edges:,} edges, the same {fit} pairs rank them and score the circuit "
            f"(in-sample: --holdout 0); counterfactual {counterfactual}")


def _stage(text: str) -> None:
    """A stage's line on stderr, ``rmtbase circuits --task: …`` (what a heartbeat names),
    wrapped within 200 characters (:func:`rmtbase.progress.stage`)."""
    from ...progress import stage

    stage(KIND, text)


@gives_heap_back
@in_torch_threads
def evaluate(model, task, edges, *, metric: str = "logit_diff",
             counterfactual: str = DEFAULT_TASK, batch: int | None = None,
             progress: bool = False) -> dict:
    """A circuit the user brings scored on ``task`` (:func:`..core.faithfulness.evaluate_kept`):
    ``edges`` a circuit file (:func:`.export.read_circuit`) or an ``(n_edges,)`` bool;
    ``threads`` as :func:`find_task_circuit`'s."""
    from .export import read_circuit

    s = SearchSettings(metric=metric, counterfactual=counterfactual, batch=batch)  # checked
    tm, t, name, described = load_described(model, task)
    fit_threads(tm.hm.layers)
    kept = read_circuit(edges, tm.graph) if isinstance(edges, (str, Path)) else \
        np.asarray(edges, dtype=bool)
    sc = Scorer(Runner(tm, t, metric=s.metric, counterfactual=s.counterfactual, batch=s.batch,
                       progress=progress))
    return {"model": name, "task": t.name, "input": described, "metric": metric,
            "counterfactual": counterfactual, **evaluate_kept(sc, kept),
            "output_losses": output_losses(sc.runner, kept)}


__all__ = ["HOLDOUT", "KIND", "evaluate", "find_task_circuit", "held_out", "load",
           "load_described", "split", "summary", "write_outputs"]
