"""The extra outputs of ``rmtbase score`` beside the score itself (:mod:`rmtbase.cli.score`):
the outlier directions (``--directions``), the composition (``--composition``) and the probe's
behaviours joined to the score (``--probe``)."""

from __future__ import annotations


def directions(ds, model, revision, args) -> dict:
    """{"directions.nc": table} of the outlier directions of every circuit scored in ``ds``
    (:mod:`rmtbase.scoring.measures.directions`; the weights are read a second time)."""
    from ..models import default_model_path, load_heads
    from ..models.ov import load_ov_heads
    from ..scoring.collection.combine import entries
    from ..scoring.measures.directions import combine_directions, directions_dataset

    path = model if model is not None else default_model_path()
    items = entries(ds) if "circuit" in ds.dims else [("qk", ds)]
    tables = []
    for circuit, e in items:
        load = load_ov_heads if circuit == "ov" else load_heads
        tables.append(directions_dataset(load(path, revision=revision,
                                              allow_pickle=args.allow_pickle), e, circuit))
    return {"directions.nc": combine_directions(tables) if len(tables) > 1 else tables[0]}


def composition_extras(model, revision, args) -> dict:
    """{"composition.nc": Dataset} of rmtbase.composition under ``args.null`` (the parsed --null
    the heads were scored against); its figure: :func:`rmtbase.cli._circuits.redraw`."""
    from ..models import default_model_path
    from ..scoring.composition.run import composition

    ds = composition(model if model is not None else default_model_path(), revision=revision,
                     seed=args.seed, alpha=args.alpha, allow_pickle=args.allow_pickle,
                     null=args.null, progress=not args.quiet,
                     **({"draws": args.draws} if args.draws else {}))
    if "composition_draws_note" in ds.attrs and not args.quiet:  # what the draws leave open
        import sys
        print(ds.attrs["composition_draws_note"], file=sys.stderr)
    return {"composition.nc": ds}


def join_probe(ds, model, text, *, progress: bool):
    """``ds`` with the probe's behaviours of the same model joined (:func:`rmtbase.probe.join`)."""
    from ..probe import join, probe_model
    from .probe import resolve_model

    where, name = resolve_model(model)
    return join(ds, probe_model(where, text=text, name=name, progress=progress))


__all__ = ["composition_extras", "directions", "join_probe"]
