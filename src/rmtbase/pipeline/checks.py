"""The preconditions of a score's later stages, checked before any work: the text probe
(:func:`check_probe`), the composition (:func:`check_composition`) and the circuit search
(:func:`check_search`: whether path patching runs and the text probe can). Each refuses in one
line (:class:`~rmtbase.errors.InputError` or :class:`~rmtbase.errors.ModelError`); the notes
of what will run go to stderr unless ``quiet``. Messages name the command line's flags, the
spelling most users meet."""

from __future__ import annotations

import sys


def check_probe(model) -> None:
    """The text probe's preconditions, in one line: the model can be probed (a folder's config
    and tokenizer, a GGUF's tokenizer) and one default window fits in memory
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


def check_composition(model, revision, settings, allow_pickle: bool, quiet: bool) -> None:
    """The composition of one model (``settings``: a
    :class:`~rmtbase.scoring.settings.CompositionSettings`): two layers or more, V/O weights,
    memory, a null with a composition null (:func:`rmtbase.scoring.composition.run.check_model`);
    the memory and work stated up front unless ``quiet``."""
    from ..models import default_model_path
    from ..scoring.composition.run import check_model
    from ..scoring.ov import check_ov

    model = default_model_path() if model is None else model
    null = settings.null
    pl = check_model(model, revision=revision, null=null, draws=settings.null_draws)
    check_ov(model, revision, allow_pickle)
    if not quiet:  # memory and work stated up front
        nulls = pl.get("null_flops", 0.0)  # the Gaussian nulls' draws, at most
        print(f"rmtbase: composition: {pl['pairs_per_kind']:,} pairs per kind, about "
              f"{pl['bytes'] / 2**30:.2f} GiB, {(pl['gemm_flops'] + nulls) / 1e12:.3g} TFLOP of "
              f"GEMMs" + (f" ({nulls / 1e12:.3g} of them the null draws, at most "
                          f"{pl['null_draws']:,} a null)" if nulls else "")
              + (f" ({null.name} null)" if null.per_head else ""), file=sys.stderr)


def _patched():
    """Path patching's families, as config ``model_type`` (rmtbase.circuits.core.families)."""
    from ..circuits.core.families import SUPPORTED

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

    from ..circuits.core.families import text_config
    from ..circuits.head.sequences import repeat_lengths
    from ..errors import InputError

    tc = text_config(cfg)
    tc = tc if isinstance(tc, dict) else vars(tc)
    if "vocab_size" not in tc:  # a GGUF's header: checked once the model is read
        return
    if not repeat_lengths(SimpleNamespace(**tc), spec):
        raise InputError("--composition --probe: no repeat length fits this model's context "
                         "and vocabulary; use --text")


def check_search(model, search, quiet: bool) -> dict:
    """{"patch": path patching runs, "text": the text probe runs, "model_type"} for the circuit
    search after a composition with the probe (``search``: its
    :class:`~rmtbase.circuits.head.find.Search`, whose ``text`` is the text file asked for or None
    and ``lengths`` ``"auto"`` or the repeat lengths), before any work; notes on stderr unless
    ``quiet``. An encoder is labelled by the text probe and its circuits screened by weights
    only, said so."""
    from ..circuits.core.families import check_family
    from ..errors import InputError
    from ..models import default_model_path
    from ..models.loading import model_config

    cfg = model_config(default_model_path() if model is None else model)
    mt = str(cfg.get("model_type", "") or "")
    got = {"patch": mt in _patched(), "text": has_tokenizer(model), "model_type": mt}
    text, spec = search.text, search.lengths
    if not got["text"] and not got["patch"]:  # refused before any note of what would run
        raise InputError(f"--probe needs a tokenizer for a {mt or 'model'} model (path "
                         f"patching with repeated random tokens runs causal language models: "
                         f"{', '.join(_patched())})")
    if got["patch"]:
        check_family(cfg)  # a variant path patching does not follow: one line, before work
    elif spec != "auto":
        raise InputError(f"--repeat-length: path patching does not run {mt or 'this'} models")
    if text is not None and spec != "auto":
        raise InputError("--repeat-length is for repeated random tokens, not --text")
    if not quiet and not got["patch"]:
        print(f"rmtbase: --probe: path patching runs causal language models, not "
              f"{mt or 'this one'}: heads are labelled from the text probe and the circuits "
              "are screened by weights only (not confirmed)", file=sys.stderr)
    if got["patch"] and text is None:  # on repeated random tokens
        _check_lengths(cfg, spec)
    if text is not None and got["patch"]:
        if not got["text"]:
            raise InputError("--text: the circuit search reads the text with the model's "
                             "tokenizer; this model has none (leave out --text: repeated "
                             "random tokens)")
        if not quiet:
            print(f"rmtbase: --text: the circuit search labels and patches on {text}'s "
                  "windows (without --text: repeated random tokens at several lengths)",
                  file=sys.stderr)
    if not got["text"] and not quiet:
        print("rmtbase: --probe: no tokenizer: the text probe's behaviour columns are left "
              "out; heads are labelled and patched on repeated random tokens",
              file=sys.stderr)
    return got


__all__ = ["check_composition", "check_probe", "check_search", "has_tokenizer"]
