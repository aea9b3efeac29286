"""``rmtbase score``'s options checked before any work: single values and their combinations
(rule tables), the settings records, --sort-by, models and revisions, --components, --probe,
--composition and the output folder, into a :class:`Plan` holding one model's
:class:`~rmtbase.pipeline.ScoreRequest`; what a request's later stages need of the model is
checked by the library (:func:`rmtbase.pipeline.check_request`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..checks import MIN_NULL_DRAWS
from ..errors import InputError
from ..stats.null_registry import REGISTRY
from . import model_args
from ._fdr import fdr_level


@dataclass
class Plan:
    """What the options ask for, checked: the models and revisions, whether there are several,
    the --components names, whether --probe runs, the null, the score's settings and, for one
    model, the library request and what its checks found."""

    models: list
    revisions: list | None
    several: bool
    components: list | None
    probe: bool
    null: object
    #: The checked :class:`~rmtbase.scoring.settings.ScoreSettings` of the score.
    settings: object = None
    #: One model (not --base): the :class:`~rmtbase.pipeline.ScoreRequest` the options make.
    request: object = None
    #: :func:`rmtbase.pipeline.check_request`'s answer for :attr:`request`.
    prepared: object = None

    @property
    def model(self):
        return self.models[0] if self.models else None

    @property
    def revision(self):
        return self.revisions[0] if self.revisions else None


#: --growth-budget's range, CPU seconds: :data:`rmtbase.scoring.stopping.budget.MIN_SECONDS`,
#: :data:`~rmtbase.scoring.stopping.budget.MAX_SECONDS` (not imported: the CLI starts without
#: the scoring code; ``tests/test_growth_budget.py`` holds them equal).
BUDGET_SECONDS = (0.0, 7 * 24 * 3600.0)


#: Option checks made before any work, in order: (whether the options are refused, the
#: one-line message, formatted with ``a`` the options and ``p`` the :class:`~._scorePlan`
#: so far (None for the checks of single values)).
_VALUE_RULES = (
    (lambda a: a.draws is not None and a.draws < MIN_NULL_DRAWS,
     f"--draws must be at least {MIN_NULL_DRAWS} (the omnibus calibration of each head's p "
     "reads the 10 largest null statistics), got {a.draws}"),
    (lambda a: a.component_draws is not None and a.component_draws < MIN_NULL_DRAWS,
     f"--component-draws must be at least {MIN_NULL_DRAWS} (the omnibus calibration of each "
     "matrix's p reads the 10 largest null statistics), got {a.component_draws}"),
    (lambda a: a.max_draws is not None and a.max_draws < 2,
     "--max-draws must be at least 2, got {a.max_draws}"),
    (lambda a: a.element_draws < 0, "--element-draws must be >= 0, got {a.element_draws}"),
    (lambda a: not 0.0 < fdr_level(a) < 1.0,
     lambda a, _=None: f"{a._fdr_from} must be in (0, 1), got {a.fdr}"),
    (lambda a: a.top < 0, "--top must be >= 0, got {a.top}"),
    (lambda a: not 0 <= a.seed < 2**32, "--seed must be an integer in [0, 2**32), got {a.seed}"),
    (lambda a: a.workers is not None and a.workers < 1,
     "--workers must be at least 1, got {a.workers}"),
    (lambda a: isinstance(a.growth_budget, float)
     and not BUDGET_SECONDS[0] <= a.growth_budget <= BUDGET_SECONDS[1],
     lambda a, _=None: ("--growth-budget must be 'auto', 'none' or CPU seconds in "
                        f"[{BUDGET_SECONDS[0]:g}, {BUDGET_SECONDS[1]:g}], got "
                        f"{a.growth_budget:g}")),
)


def growth_budget(text: str):
    """argparse type of --growth-budget: "auto", None ("none") or CPU seconds (a float; its
    range is checked with the other values)."""
    low = text.strip().lower()
    if low in ("auto", "none"):
        return None if low == "none" else "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto', 'none' or CPU seconds, got {text!r}") from None


_PLAN_RULES = (
    (lambda a, p: a.base is not None and a.growth_budget != "auto",
     "--growth-budget bounds a model's own null growth; --base scores deltas without it"),
    (lambda a, p: not p.several and (a.workers is not None or a.scheduler is not None),
     "--workers/--scheduler distribute several checkpoints or models; give more than one"),
    (lambda a, p: not p.several and a.collection is not None,
     "--collection names the dimension of several checkpoints or models"),
    (lambda a, p: a.base is not None and (p.several or p.components is not None or not p.models
                                          or not p.null.scores_deltas or p.probe),
     lambda a, p: "--base scores one fine-tuned MODEL (or LoRA adapter) against its base with "
     "the Gaussian null; it does not combine with several models, --components, --probe or "
     f"--null {_lacking('scores_deltas')}"),
    (lambda a, p: (a.ov or a.directions) and (p.several or a.base is not None
                                              or p.components is not None or p.probe),
     "--ov and --directions apply to one MODEL scored alone; they do not combine with several "
     "models, --base, --components or --probe"),
    (lambda a, p: getattr(a, "heavy_tail_draws", None) is not None and not a.heavy_tail,
     "--heavy-tail-draws needs --heavy-tail"),
    (lambda a, p: getattr(a, "heavy_tail", False) and a.base is not None,
     "--heavy-tail scores the models' own matrices; for what changed from a base run "
     "rmtbase heavy-tail MODEL --base BASE"),
    (lambda a, p: getattr(a, "repeat_length", None) is not None
     and not (a.composition and p.probe),
     "--repeat-length sets the circuit search of --composition --probe; give both or leave it "
     "out"),
)


def _refuse(rules, *args) -> None:
    for refused, text in rules:
        if refused(*args):
            raise InputError(text(*args) if callable(text) else
                             text.format(a=args[0], p=args[1] if len(args) > 1 else None))


def _lacking(capability: str) -> str:
    """The registered nulls without ``capability`` (:mod:`rmtbase.stats.null_kind`), by name."""
    return "/".join(n for n, cls in REGISTRY.items() if not getattr(cls, capability))


def early(args: argparse.Namespace) -> None:
    """The checks of single values and of an ``--out`` that is a file, at start-up before the
    heavy imports; :func:`checked` repeats them with the rest."""
    from ._output import early_out

    _refuse(_VALUE_RULES, args)
    early_out(args)


def checked(args: argparse.Namespace) -> Plan:
    """Every option check, before any work: the tables above, the score's settings record,
    --sort-by, --components, --probe; then local paths, one model's request and its
    preconditions (:func:`rmtbase.pipeline.check_request`: the circuit search's, the probe's,
    finite weights, --composition's, --ov's tensors), --out and the --components' matrices."""
    from ..scoring.settings import ScoreSettings

    _refuse(_VALUE_RULES, args)
    settings = ScoreSettings(stats=args.stats, draws=args.draws, alpha=args.fdr,
                             seed=args.seed, null=args.null, quantized_null=args.quantized_null,
                             max_draws=args.max_draws, element_draws=args.element_draws,
                             growth_budget=args.growth_budget)
    null = args.null = settings.null  # parsed once, by the record; the value from here on
    if null.needs_element_draws(settings.kind):
        from ..scoring.nulls.checks import check_element_draws

        check_element_draws(null, settings.kind, args.element_draws, "--element-draws")
    _check_sort_by(args)
    models = model_args.expand_models(args.model or [])
    revisions = model_args.revisions(args.revision)
    several = len(models) > 1 or (revisions is not None and len(revisions) > 1)
    plan = Plan(models, revisions, several, None, False, null, settings)
    _refuse(_PLAN_RULES[:2], args, plan)
    plan.components = components_arg(args, null)
    plan.probe = probe_rules(args, several)
    _refuse(_PLAN_RULES[2:], args, plan)
    _check_work(args, plan)
    return plan


def request_of(args, plan: Plan):
    """The :class:`~rmtbase.pipeline.ScoreRequest` of one model's options: the score's
    settings, and the composition's (--composition: the same null, seed and level; --draws
    its draws too, else the null's own), the circuit search's (--composition --probe: the
    score's seed, --text and --repeat-length, :func:`rmtbase.cli.circuits.search_of`) and the
    whole matrices' (--component-draws, with the score's level, seed and --quantized-null)."""
    from ..pipeline import ScoreRequest
    from ..scoring.settings import ComponentSettings, CompositionSettings
    from .circuits import search_of

    level = fdr_level(args)  # --fdr, or --alpha's value, resolved once
    comp = CompositionSettings(null=plan.null, draws=args.draws, seed=args.seed,
                               alpha=level) if args.composition else None
    search = search_of(args, seed=args.seed, text=args.text) \
        if args.composition and args.probe else None
    parts = ComponentSettings(draws=args.component_draws, alpha=level, seed=args.seed,
                              quantized_null=args.quantized_null)
    return ScoreRequest(model=plan.model, revision=plan.revision, settings=plan.settings,
                        allow_pickle=args.allow_pickle, ov=args.ov, directions=args.directions,
                        components=None if plan.components is None else tuple(plan.components),
                        component_settings=parts, composition=comp, probe=args.probe,
                        text=args.text, search=search, heavy_tail=args.heavy_tail,
                        heavy_tail_draws=args.heavy_tail_draws)


def _check_work(args, plan) -> None:
    """The checks that read the models or the output folder (before any scoring)."""
    from ..files.output import check_output_dir
    from .default_out import default_out
    from .model_args import check_local

    if args.composition:  # one model's weights alone
        if args.base is not None:
            raise InputError("--composition is defined for one model's weights; it does not "
                             "combine with --base")
        if plan.several:
            raise InputError("--composition applies to one MODEL scored alone")
    for m in [*plan.models, args.base]:
        check_local(m)
    if not plan.several and args.base is None:  # the model's preconditions (the library's)
        from ..pipeline import check_request

        plan.request = request_of(args, plan)
        plan.prepared = check_request(plan.request, quiet=args.quiet)
    if args.out is None:
        args.out = default_out(plan.models, plan.revisions, base=args.base, ov=args.ov)
    check_output_dir(args.out, "rmtbase score", overwrite=args.overwrite)  # before any work
    if plan.components is not None:  # every entry's architecture has them: before any work
        from ..models import default_model_path
        from ..models.components import check_components
        from ..scoring.collection.trajectory import make_specs

        for spec in make_specs(plan.models or [default_model_path()], plan.revisions):
            check_components(spec.model, plan.components, revision=spec.revision,
                             allow_pickle=args.allow_pickle)


def _check_sort_by(args) -> None:
    """--sort-by names an order the score will have (rmtbase.decision.order), before any work."""
    if args.sort_by is None:
        return
    from ..decision.axes import REGISTRY as AXES
    from ..decision.order import sort_choices

    if args.sort_by not in sort_choices(AXES):
        raise InputError(f"--sort-by must be one of {', '.join(sort_choices(AXES))}, "
                         f"got {args.sort_by!r}")
    from ..scoring.settings import ScoreSettings

    needs = AXES[args.sort_by].needs if args.sort_by in AXES else None
    settings = ScoreSettings(stats=args.stats)
    if needs is not None and settings.kind not in (needs, "all"):
        raise InputError(f"--sort-by {args.sort_by} needs --stats {needs} or all")
    axis = AXES[args.sort_by] if args.sort_by in AXES else None
    if axis is not None and not AXES.shipped(args.sort_by) and args.sort_by not in \
            settings.axes and axis.statistic not in settings.axes:
        raise InputError(f"--sort-by {args.sort_by} is a plugin's axis: name it in --stats "
                         f"(--stats {settings.kind},{args.sort_by})")


def components_arg(args, null):
    """The --components names (validated), or None; --component-draws needs --components;
    ``null``: the --null value (parsed once, :func:`rmtbase.cli.score.checked`)."""
    if args.components is None:
        if args.component_draws is not None:
            raise InputError("--component-draws needs --components")
        return None
    if not null.scores_components:
        raise InputError("--components compares whole matrices with the Gaussian null; it "
                         f"does not combine with --null {null.name} (scores_components)")
    if args.component_draws is not None:
        from ..baseline.matrix_null import check_matrix_null_size

        check_matrix_null_size(args.component_draws)  # before the heads are scored
    from ..models.components import parse_components

    return parse_components(args.components)


def probe_rules(args, several: bool) -> bool:
    """Whether --probe runs, its combinations checked (its text is read and checked by the
    library, :func:`rmtbase.pipeline.check_request`)."""
    if not args.probe:
        if args.text is not None:
            raise InputError("--text needs --probe")
        return False
    if several:
        raise InputError("--probe runs one model; give one MODEL and one revision")
    if args.revision is not None:
        raise InputError("--probe loads the model with transformers at its default revision; "
                         "leave out --revision")
    return True


__all__ = ["Plan", "checked", "components_arg", "early", "probe_rules", "request_of"]
