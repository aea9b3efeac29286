"""The model a circuit search runs: a loaded transformers model, or a folder / ``.gguf`` file /
hub id loaded as the probe loads it (:mod:`rmtbase.probe.run`: float32, eager attention so
that ``output_attentions`` returns the softmax weights, CPU), with its tokenizer when there is
one and it is asked for (only the text sequences need it). A folder without a tokenizer loads
(the circuit search uses repeated random tokens, :mod:`.sequences`); the probe proper needs
one."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelError


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _tokenizer(src: str, kw: dict, name: str):
    from transformers import AutoTokenizer

    from ..probe.run import TOKENIZER_FILES

    p = Path(src)
    if p.is_dir() and "gguf_file" not in kw and not any((p / f).is_file()
                                                         for f in TOKENIZER_FILES):
        return None
    try:
        return AutoTokenizer.from_pretrained(src, **kw)
    except Exception as exc:  # transformers raises many kinds
        raise ModelError(f"cannot load the tokenizer of {name}: {_one_line(exc)}") from exc


def _eager(net):
    """``net`` with eager attention (the recompute is checked against it)."""
    setter = getattr(net, "set_attn_implementation", None)
    if getattr(net.config, "_attn_implementation", "eager") != "eager" and setter is not None:
        setter("eager")
    return net


def load_model(model, *, tokenizer: bool = False):
    """(net, tokenizer or None, name). ``model``: a transformers ``PreTrainedModel`` (used as
    given, switched to eager attention, its tokenizer None), a folder (config.json, weights,
    tokenizer optional), a ``.gguf`` file or a hub id; the tokenizer is read only when
    ``tokenizer`` (reading a GGUF's costs seconds). One-line :class:`ModelError` when it
    cannot be loaded."""
    if hasattr(model, "config") and hasattr(model, "forward"):
        name = str(getattr(model.config, "_name_or_path", "") or model.config.model_type)
        return _eager(model).eval(), None, Path(name).name or name
    import torch
    from transformers import AutoModel

    from ..probe.run import _from_gguf, check_finite_weights
    from ..progress import no_library_bars

    text = os.fspath(model)
    p = Path(text).expanduser()
    if p.is_file() and p.suffix.lower() == ".gguf":
        src, kw, name = str(p.parent), {"gguf_file": p.name}, p.stem
    elif p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelError(f"no config.json in {p}")
        src, kw, name = str(p), {"local_files_only": True}, p.resolve().name
    elif p.exists() or text.startswith((".", "/", "~")):
        raise ModelError(f"not a model folder or .gguf file: {text!r}")
    else:
        src, kw, name = text, {}, text
    try:
        with no_library_bars():  # transformers' GGUF de-quantising and loading bars
            tok = _tokenizer(src, kw, name) if tokenizer else None
            if "gguf_file" in kw:
                net = _from_gguf(p)
            else:
                net = AutoModel.from_pretrained(src, attn_implementation="eager",
                                                dtype=torch.float32, **kw)
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"cannot load {name} with transformers: {_one_line(exc)}") from exc
    net.eval()
    check_finite_weights(net, name)
    return net, tok, name


__all__ = ["load_model"]
