"""``rmtbase score``'s options checked before any work: single values and their combinations
(rule tables), the null, --sort-by, models and revisions, --components, the probe's text and
preconditions, --composition, --ov's tensors and the output folder, into a :class:`Plan`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ..checks import MIN_NULL_DRAWS
from ..errors import InputError
from ..stats.null_protocol import Null
from ..stats.null_registry import REGISTRY
from . import model_args


@dataclass
class Plan:
    """What the options ask for, checked: the models and revisions, whether there are several,
    the --components names, the --probe text, the null."""

    models: list
    revisions: list | None
    several: bool
    components: list | None
    probe_text: str | None
    null: object
    #: --composition --probe: :func:`rmtbase.cli._circuits.check`'s answer, else None.
    circuits: dict | None = None
    #: The model loaded once by the circuit search for the text probe too (cli/_circuits).
    loaded: object = None

    @property
    def text_probe(self) -> bool:
        """Whether the text probe runs (--probe; with the circuit search, a tokenizer)."""
        return self.probe_text is not None and (self.circuits is None or self.circuits["text"])

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
    (lambda a: not 0.0 < a.alpha < 1.0, "--alpha must be in (0, 1), got {a.alpha}"),
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
                                          or not p.null.scores_deltas
                                          or p.probe_text is not None),
     lambda a, p: "--base scores one fine-tuned MODEL (or LoRA adapter) against its base with "
     "the Gaussian null; it does not combine with several models, --components, --probe or "
     f"--null {_lacking('scores_deltas')}"),
    (lambda a, p: (a.ov or a.directions) and (p.several or a.base is not None
                                              or p.components is not None
                                              or p.probe_text is not None),
     "--ov and --directions apply to one MODEL scored alone; they do not combine with several "
     "models, --base, --components or --probe"),
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
    """Every option check, before any work (tables above; then what needs the models: a
    probe's tokenizer, --composition, local paths, --ov's tensors, --out, --components)."""
    _refuse(_VALUE_RULES, args)
    null = args.null = Null.parse(args.null)  # once: the checks below read the value, and
    #  args.null is the value from here on (composition takes it too)
    if null.needs_element_draws(args.stats):
        from ..scoring.nulls.checks import check_element_draws

        check_element_draws(null, args.stats, args.element_draws, "--element-draws")
    _check_sort_by(args)
    models = model_args.expand_models(args.model or [])
    revisions = model_args.revisions(args.revision)
    several = len(models) > 1 or (revisions is not None and len(revisions) > 1)
    plan = Plan(models, revisions, several, None, None, null)
    _refuse(_PLAN_RULES[:2], args, plan)
    plan.components = components_arg(args, null)
    plan.probe_text = probe_text(args, several)
    if plan.probe_text is not None and args.composition and not several:
        from . import _circuits  # the circuit search: patching runs? a tokenizer?

        plan.circuits = _circuits.check(args, plan)
    if plan.probe_text is not None and plan.text_probe:
        check_probe(plan.model)  # no tokenizer, too little memory: before the score
    if plan.probe_text is not None:  # the probe or the circuit search runs the whole model
        check_finite_model(plan.model, args.allow_pickle)
    _refuse(_PLAN_RULES[2:], args, plan)
    _check_work(args, plan)
    return plan


def _check_work(args, plan) -> None:
    """The checks that read the models or the output folder (before any scoring)."""
    from ..files.output import check_output_dir
    from .default_out import default_out
    from .model_args import check_local

    if args.composition:  # one layer, no V/O, --base, memory: before any work
        check_composition(plan.models, plan.revisions, args, plan.several, plan.null)
    for m in [*plan.models, args.base]:
        check_local(m)
    if args.ov:  # every layer's V and O tensors, every head's W_V and W_O, before the QK pass
        check_ov(plan.model, plan.revision, args.allow_pickle, heads=True)
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
    needs = AXES[args.sort_by].needs if args.sort_by in AXES else None
    if needs is not None and args.stats not in (needs, "all"):
        raise InputError(f"--sort-by {args.sort_by} needs --stats {needs} or all")


def check_composition(models, revisions, args, several: bool, null) -> None:
    """--composition: one MODEL alone, two layers or more, V/O weights, memory, a null with a
    composition null (:func:`rmtbase.scoring.composition.run.check_model`); ``null``: the parsed
    --null."""
    from ..scoring.composition.run import check_model

    if args.base is not None:
        raise InputError("--composition is defined for one model's weights; it does not "
                         "combine with --base")
    if several:
        raise InputError("--composition applies to one MODEL scored alone")
    model = models[0] if models else None
    revision = revisions[0] if revisions else None
    if model is None:
        from ..models import default_model_path
        model = default_model_path()
    pl = check_model(model, revision=revision, null=null,
                     draws=args.draws or null.composition_draws)
    check_ov(model, revision, args.allow_pickle)
    if not args.quiet:  # memory and work stated up front
        import sys
        nulls = pl.get("null_flops", 0.0)  # the Gaussian nulls' draws, at most
        print(f"rmtbase: composition: {pl['pairs_per_kind']:,} pairs per kind, about "
              f"{pl['bytes'] / 2**30:.2f} GiB, {(pl['gemm_flops'] + nulls) / 1e12:.3g} TFLOP of "
              f"GEMMs" + (f" ({nulls / 1e12:.3g} of them the null draws, at most "
                          f"{pl['null_draws']:,} a null)" if nulls else "")
              + (f" ({null.name} null)" if null.per_head else ""), file=sys.stderr)


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


def probe_text(args, several: bool):
    """The probe's text (checked before any work) for --probe, else None."""
    if not args.probe:
        if args.text is not None:
            raise InputError("--text needs --probe")
        return None
    if several:
        raise InputError("--probe runs one model; give one MODEL and one revision")
    if args.revision is not None:
        raise InputError("--probe loads the model with transformers at its default revision; "
                         "leave out --revision")
    from ..probe import read_text

    return read_text(args.text)


def check_probe(model) -> None:
    """--probe's preconditions, in one line: the model can be probed (a folder's config and
    tokenizer, a GGUF's tokenizer) and one default window fits in memory
    (:func:`rmtbase.probe.run.check_window_memory`)."""
    from types import SimpleNamespace

    from ..models import default_model_path, model_info
    from ..models.loading import model_config
    from ..probe.run import check_model, check_window_memory, default_window

    check_model(model)
    path = default_model_path() if model is None else model
    info = model_info(path)
    ctx = None
    if info.source == "gguf":
        from ..models.gguf import check_gguf_tokenizer, gguf_context_length
        from ..models.gguf_header import read_header

        header = read_header(path)
        check_gguf_tokenizer(path, header)
        ctx = gguf_context_length(path, header)
    else:
        cfg = model_config(path)
        ctx = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    config = SimpleNamespace(num_hidden_layers=info.n_layers, num_attention_heads=info.n_heads,
                             max_position_embeddings=ctx if isinstance(ctx, int) else None)
    check_window_memory(config, default_window(config), info.name)


def check_finite_model(model, allow_pickle: bool) -> None:
    """--probe's precondition: no NaN or infinite float tensor (an MLP's too: the probe and the
    circuit search run the whole model), in one line naming the tensor and, for an attention
    tensor, the heads (:func:`rmtbase.models.finite.naming_heads`); read one tensor at a time (local safetensors,
    pickled weights with --allow-pickle, a GGUF's tensors dequantised, block formats too).
    Others are checked when loaded
    (:func:`rmtbase.probe.loader.check_finite_weights`)."""
    import numpy as np

    from ..models import default_model_path
    from ..models._reader import check_finite
    from ..models._resolve import resolve
    from ..models.finite import naming_heads

    model = default_model_path() if model is None else model
    resolved = resolve(model, None)
    with naming_heads(model, allow_pickle=allow_pickle):  # an attention tensor: its heads named
        if resolved.source == "gguf":
            from gguf.quants import dequantize

            from ..models.gguf import gguf_reader as _reader

            for t in _reader(resolved.folder).tensors:
                try:
                    values = np.asarray(dequantize(t.data, t.tensor_type))
                except Exception:  # noqa: BLE001 - a type gguf cannot read: the reader says so
                    continue
                check_finite(values, t.name, resolved.name)
            return
        if resolved.source != "folder":
            return
        weights = resolved.open_weights(allow_pickle)
        if weights.format == "pickle":  # --allow-pickle: each file's float tensors, in turn
            for name in sorted(weights.keys(), key=lambda n: (weights.file_of(n), n)):
                t = weights._load_pickle(weights.file_of(name)).get(name)
                if t is not None and t.is_floating_point():
                    check_finite(t.detach().float().numpy(), name,
                                 f"{resolved.name}/{weights.file_of(name)}")
            return
        if weights.format != "safetensors":
            return
        from ..models._safetensors import read_float32

        for name in sorted(weights.keys()):
            filename = weights.file_of(name)
            info = weights._header(filename)[name]
            if info["dtype"] in ("F64", "F32", "F16", "BF16"):
                check_finite(read_float32(weights._headers[filename]["path"], info), name,
                             f"{resolved.name}/{filename}")


def check_ov(model, revision, allow_pickle: bool, heads: bool = False) -> None:
    """--ov's precondition: every layer has its V and O tensors (named as the file names them);
    with ``heads``, each head's W_O and W_V read one layer at a time and a non-finite or
    all-zero one named (:func:`rmtbase.scoring.heads.pipeline.check_heads`)."""
    from ..models import default_model_path
    from ..models.loading import check_parts
    from ..models.ov import OV_WHY, load_ov_heads

    model = default_model_path() if model is None else model
    check_parts(model, ("v", "o"), revision=revision, allow_pickle=allow_pickle, why=OV_WHY)
    if heads:
        from ..scoring.heads.pipeline import check_heads

        for lh in load_ov_heads(model, revision=revision, allow_pickle=allow_pickle):
            check_heads(lh.layer, lh.wq, lh.wk, str(model), "W_O or W_V")


__all__ = ["Plan", "check_composition", "check_ov", "check_probe", "checked", "components_arg",
           "early", "probe_text"]
