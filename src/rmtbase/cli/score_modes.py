"""The three ways ``rmtbase score`` scores: several entries into one collection, a fine-tune
against its base (``--base``), one model (:func:`rmtbase.pipeline.run_score`); each calls the
library, writes and prints, and returns a :class:`Scored`, its options checked before
(:class:`~rmtbase.cli.score_checks.Plan`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .score_checks import Plan


@dataclass
class Scored:
    """A score written: its Dataset, the --components one (or None), the files written, the
    extra outputs (--directions, --composition; or None)."""

    ds: object
    cds: object
    written: dict
    extras: dict | None = None
    #: --composition: :func:`rmtbase.report.circuit_context.context` (what was found).
    context: dict | None = None


def options(args, null) -> dict:
    """A collection's scoring keywords (its entries are keyed by them,
    :func:`rmtbase.scoring.collection.entries.entry_key`); ``null``: the parsed --null
    (:attr:`Plan.null`). One model is scored with :attr:`Plan.settings` instead."""
    out = dict(stats=args.stats, draws=args.draws, alpha=args.fdr,
               allow_pickle=args.allow_pickle, null=null,
               quantized_null=args.quantized_null, max_draws=args.max_draws,
               element_draws=args.element_draws, seed=args.seed)
    if args.growth_budget != "auto":  # the library's default otherwise
        out["growth_budget"] = args.growth_budget
    return out


def component_options(args, components) -> dict:
    """Options of score_components from the command line."""
    return dict(components=components, draws=args.component_draws, alpha=args.fdr,
                seed=args.seed, allow_pickle=args.allow_pickle,
                quantized_null=args.quantized_null)


def heavy_tail_options(args) -> dict:
    """score_heavy_tail's keywords from the command line (--heavy-tail-draws, the score's seed,
    level and --quantized-null)."""
    return dict(draws=args.heavy_tail_draws, seed=args.seed, fdr=args.fdr,
                allow_pickle=args.allow_pickle, quantized_null=args.quantized_null)


def _write(ds, args, **kw) -> dict:
    """Write ``ds`` (a score or a :class:`~rmtbase.pipeline.ScoreRun`) to --out."""
    from ..report.write import write_report

    if args.sort_by is not None:  # the order every writer reads (report.tables.head_order)
        (ds.scores if hasattr(ds, "scores") else ds).attrs["head_order"] = args.sort_by
    return write_report(ds, args.out, figures=not args.no_figures, top=args.top, **kw)


def several(args, plan: Plan, show) -> Scored:
    """Several entries (checkpoints or models) into one collection (sizes checked on the
    first entry before a Dask cluster starts)."""
    from ..models import model_info
    from ..report.collection_report import entry_lines
    from ..scoring.collection.entries import entries_dir
    from ..scoring.collection.trajectory import score_collection
    from ..scoring.nulls.checks import check_null_size

    check_null_size(model_info(plan.models[0], revision=plan.revision), plan.settings.kind,
                    None, args.draws, plan.null, args.element_draws)
    ds = score_collection(plan.models, revisions=plan.revisions, dim=args.collection,
                          workers=args.workers, scheduler=args.scheduler,
                          progress=not args.quiet, entries=entries_dir(args.out),
                          **options(args, plan.null))
    cds = None
    if plan.components is not None:  # one process, the same entries and dimension
        from ..scoring.collection.combine import collection_dim
        from ..scoring.collection.trajectory import score_component_collection

        cds = score_component_collection(plan.models, revisions=plan.revisions,
                                         dim=collection_dim(ds), progress=not args.quiet,
                                         **component_options(args, plan.components))
    ht = None
    if args.heavy_tail:  # the same entries, dimension and Dask workers
        from ..scoring.collection.combine import collection_dim
        from ..scoring.collection.heavy_tail import heavy_tail_collection

        ht = heavy_tail_collection(plan.models, revisions=plan.revisions,
                                   dim=collection_dim(ds), workers=args.workers,
                                   scheduler=args.scheduler, progress=not args.quiet,
                                   **heavy_tail_options(args))
    written = _write(ds, args, components=cds, heavy_tail=ht)
    show("\n".join(entry_lines(ds)))
    if cds is not None:
        from ..report.component_report import component_entry_lines

        show("")
        show("\n".join(component_entry_lines(cds)))
    return Scored(ds, cds, written)


def delta(args, plan: Plan, show) -> Scored:
    """A fine-tuned model (or LoRA adapter) against its base (--base)."""
    from ..report.tables import anomaly_table
    from ..scoring.matrices.delta import score_delta

    ds = score_delta(plan.models[0], args.base, revision=plan.revision,
                     allow_pickle=args.allow_pickle, settings=plan.settings,
                     progress=not args.quiet)
    written = _write(ds, args)
    show(anomaly_table(ds, args.top))
    return Scored(ds, None, written)


def single(args, plan: Plan, show) -> Scored:
    """One model (the default MiniLM when none is given): the library's run, written."""
    from ..pipeline import run_score
    from ..report.tables import anomaly_table

    run = run_score(plan.request, progress=not args.quiet, prepared=plan.prepared)
    ds, cds, extras = run.scores, run.components, run.extras or None
    ctx = None
    if run.composition is not None:  # what was found (the report computes it alike)
        from ..report.circuit_context import context

        ctx = context(ds, extras)
    written = _write(run, args)
    if ctx is not None:  # the first screen leads with what was found
        from ..report.composition_report import summary_lead

        show(summary_lead(ctx, terminal=True).rstrip())
    if args.ov:
        from ..scoring.collection.combine import entries

        for lab, e in entries(ds):
            show(f"== {lab}\n{anomaly_table(e, args.top)}")
    else:
        show(anomaly_table(ds, args.top))
    from ..decision.undecided import undecided_line

    if undecided_line(ds):  # heads the growth budget left open: neither flagged nor cleared
        show(undecided_line(ds))
    if ds.attrs.get("resolution_note"):
        from ..report.line_width import fit_text

        print(fit_text(f"rmtbase: {ds.attrs['resolution_note']}"), file=sys.stderr)
    if cds is not None:
        from ..report.component_report import component_table

        show("")
        show(component_table(cds))
    return Scored(ds, cds, written, extras, ctx)


__all__ = ["Scored", "component_options", "delta", "heavy_tail_options", "options", "several",
           "single"]
