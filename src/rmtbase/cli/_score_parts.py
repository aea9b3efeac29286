"""The parts of ``rmtbase score``'s run (:mod:`rmtbase.cli.score`) beside the scoring itself:
its arguments checked before any work (model globs, revisions, components, the probe's text)
and its optional extras (outlier directions, the probe joined to the score)."""

from __future__ import annotations

import glob
import os
import re

from ..errors import InputError


def directions(ds, model, revision, args) -> dict:
    """{"directions.nc": table} of the outlier directions of every circuit scored in ``ds``
    (:mod:`rmtbase.scoring.directions`; the weights are read a second time)."""
    from ..models import default_model_path, load_heads
    from ..models.ov import load_ov_heads
    from ..scoring.collection import entries
    from ..scoring.directions import combine_directions, directions_dataset

    path = model if model is not None else default_model_path()
    items = entries(ds) if "circuit" in ds.dims else [("qk", ds)]
    tables = []
    for circuit, e in items:
        load = load_ov_heads if circuit == "ov" else load_heads
        tables.append(directions_dataset(load(path, revision=revision,
                                              allow_pickle=args.allow_pickle), e, circuit))
    return {"directions.nc": combine_directions(tables) if len(tables) > 1 else tables[0]}


def check_composition(models, revisions, args, several: bool, null) -> None:
    """--composition: one MODEL alone (not --base, not several), two layers or more, V/O weights,
    memory, a null with a composition null (rmtbase.scoring.composition.check_model), before
    any work; ``null``: the parsed --null."""
    from ..scoring.composition import check_model

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
        print(f"rmtbase: composition: {pl['pairs_per_kind']:,} pairs per kind, about "
              f"{pl['bytes'] / 2**30:.2f} GiB, {pl['gemm_flops'] / 1e12:.3g} TFLOP of GEMMs"
              f"{f' ({null.name} null)' if null.per_head else ''}", file=sys.stderr)


def composition_extras(model, revision, args) -> dict:
    """{"composition.nc": Dataset} (its figure: rmtbase.cli._circuits.redraw; none with
    --no-figures) of rmtbase.composition, under ``args.null`` (the parsed --null: the same
    :class:`~rmtbase.stats.null_kind.Null` the heads were scored against)."""
    from ..models import default_model_path
    from ..scoring.composition import composition

    ds = composition(model if model is not None else default_model_path(), revision=revision,
                     seed=args.seed, alpha=args.alpha, allow_pickle=args.allow_pickle,
                     null=args.null, progress=not args.quiet,
                     **({"draws": args.draws} if args.draws else {}))
    if "composition_draws_note" in ds.attrs and not args.quiet:  # issue 56 item 3
        import sys
        print(ds.attrs["composition_draws_note"], file=sys.stderr)
    return {"composition.nc": ds}


def component_options(args, components) -> dict:
    """Options of score_components from the command line."""
    return dict(components=components, draws=args.component_draws, alpha=args.alpha,
                seed=args.seed, allow_pickle=args.allow_pickle,
                quantized_null=args.quantized_null)


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
    """--probe's preconditions, before the score (one-line error): the model can be probed
    (a folder's config.json and tokenizer files; a GGUF file's tokenizer, from its header) and
    one window of the probe's default length fits in memory
    (:func:`rmtbase.probe.run.check_window_memory`, from the config's sizes)."""
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


def check_ov(model, revision, allow_pickle: bool) -> None:
    """--ov's precondition, before the score: every layer has its V and O tensors (from the
    index or header; the message names the file's own tensor name)."""
    from ..models import default_model_path
    from ..models.loading import check_parts
    from ..models.ov import OV_WHY

    check_parts(default_model_path() if model is None else model, ("v", "o"),
                revision=revision, allow_pickle=allow_pickle, why=OV_WHY)


def join_probe(ds, model, text, *, progress: bool):
    """``ds`` with the probe's behaviours of the same model joined (:func:`rmtbase.probe.join`)."""
    from ..probe import join, probe_model
    from .probe import resolve_model

    where, name = resolve_model(model)
    return join(ds, probe_model(where, text=text, name=name, progress=progress))


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
    if args.component_draws is not None and args.component_draws < 2:
        raise InputError(f"--component-draws must be at least 2, got {args.component_draws}")
    if args.component_draws is not None:
        from ..baseline.matrix_null import check_matrix_null_size

        check_matrix_null_size(args.component_draws)  # before the heads are scored
    from ..models.components import parse_components

    return parse_components(args.components)


_GLOB = re.compile(r"[*?[]")


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def expand_models(items) -> list[str]:
    """Model arguments with globs (``ckpts/step*``) expanded, in natural order (step2 before
    step10); a glob that matches nothing is an error. Other arguments (URLs among them: a
    query string's ``?`` is no glob) pass unchanged."""
    out = []
    for item in items:
        if _GLOB.search(item) and "://" not in item and not os.path.exists(item):
            hits = sorted(glob.glob(os.path.expanduser(item)), key=_natural)
            if not hits:
                raise InputError(f"no checkpoint folder matches {item!r}")
            out.extend(hits)
        else:
            out.append(item)
    return out


def revisions(text):
    if text is None:
        return None
    revs = [r.strip() for r in text.split(",")]
    if not all(revs):
        raise InputError(f"--revision has an empty entry: {text!r}")
    if len(set(revs)) < len(revs):
        raise InputError(f"--revision names a revision twice: {text!r}")
    return revs


__all__ = ["check_ov", "check_probe", "component_options", "components_arg", "directions",
           "expand_models", "join_probe", "probe_text", "revisions"]
