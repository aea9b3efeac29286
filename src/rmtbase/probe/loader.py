"""The one loader of a transformers model for the probe and the circuit search: :func:`load`
returns a :class:`Loaded` (net, tokenizer or None, name), float32 with eager attention (so
``output_attentions=True`` returns the softmax weights), on the CPU, one torch thread; a
``.gguf`` file through transformers' GGUF reader (:func:`from_gguf`). Weights are checked
finite (:func:`check_finite_weights`)."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from .._library_bars import no_library_bars
from ..errors import ModelError
from .threads import one_thread

#: Files any one of which makes a folder's tokenizer loadable.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.txt", "vocab.json",
                   "spiece.model", "sentencepiece.bpe.model")


@dataclass(frozen=True)
class Loaded:
    """A loaded model: ``net`` (a transformers base model, eval mode, eager attention),
    ``tokenizer`` (None when not read or when the folder has none) and ``name`` (the
    folder's or file's name, never an absolute path)."""

    net: object
    tokenizer: object | None
    name: str


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def has_tokenizer_files(folder: Path) -> bool:
    return any((folder / f).is_file() for f in TOKENIZER_FILES)


def locate(model, *, need_tokenizer: bool = True) -> tuple[str, dict, str]:
    """(what from_pretrained gets, its extra keyword arguments, the model's name); one-line
    :class:`ModelError` for a file that is not ``.gguf``, a folder without config.json (or,
    with ``need_tokenizer``, without a tokenizer) or a path that does not exist."""
    text = os.fspath(model)
    p = Path(text).expanduser()
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise ModelError(f"{text} is a file; give the model's folder (config.json, weights "
                             "and tokenizer) or a .gguf file")
        return str(p.parent), {"gguf_file": p.name}, p.stem
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelError(f"no config.json in {p}")
        if need_tokenizer and not has_tokenizer_files(p):
            raise ModelError(f"no tokenizer in {p}: the probe needs tokenizer.json (or "
                             "vocab.txt, tokenizer.model, vocab.json + merges.txt) beside "
                             "config.json")
        return str(p), {"local_files_only": True}, p.resolve().name
    if text.startswith((".", "/", "~")) or text.count("/") > 1 or not text:
        raise ModelError(f"no such model folder: {text!r}")
    return text, {}, text  # a hub id: transformers' own cache / download


def _eager(net):
    setter = getattr(net, "set_attn_implementation", None)
    if getattr(net.config, "_attn_implementation", "eager") != "eager" and setter is not None:
        setter("eager")
    return net.eval()


def load(model, *, tokenizer: str = "required") -> Loaded:
    """``model`` loaded: a :class:`Loaded` (as it is), a ``PreTrainedModel`` (switched to eager
    attention; tokenizer None), a folder, a ``.gguf`` file or a hub id. ``tokenizer``:
    ``"required"``, ``"optional"`` (read where present) or ``"no"``. One-line :class:`ModelError`
    when it cannot load."""
    if isinstance(model, Loaded):
        return model
    if hasattr(model, "config") and hasattr(model, "forward"):
        name = str(getattr(model.config, "_name_or_path", "") or model.config.model_type)
        return Loaded(_eager(model), None, Path(name).name or name)
    import torch
    from transformers import AutoModel, AutoTokenizer

    src, kw, name = locate(model, need_tokenizer=tokenizer == "required")
    want_tok = tokenizer == "required" or (tokenizer == "optional" and (
        "gguf_file" in kw or not Path(src).is_dir() or has_tokenizer_files(Path(src))))
    tok = None
    with no_library_bars(), one_thread(), \
            (_read_once() if "gguf_file" in kw else contextlib.nullcontext()):
        if want_tok:
            try:
                tok = AutoTokenizer.from_pretrained(src, **kw)
            except Exception as exc:  # transformers raises many kinds
                raise ModelError(f"cannot load the tokenizer of {name}: {one_line(exc)}") \
                    from exc
        try:
            if "gguf_file" in kw:
                net = from_gguf(Path(src) / kw["gguf_file"])
            else:
                net = AutoModel.from_pretrained(src, attn_implementation="eager",
                                                dtype=torch.float32, **kw)
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"cannot load {name} with transformers: {one_line(exc)}") from exc
        net.eval()
        check_finite_weights(net, name)
    return Loaded(net, tok, name)


def check_finite_weights(net, name: str) -> None:
    """One-line :class:`ModelError` naming the first parameter of ``net`` with a NaN or
    infinite entry (as ``score`` refuses such weights): a NaN weight would make the attention
    NaN and every behaviour of its heads a wrong number."""
    import torch

    with torch.no_grad():
        for pname, p in net.named_parameters():
            if p.is_floating_point() and not bool(torch.isfinite(p).all()):
                bad = int(p.numel() - int(torch.isfinite(p).sum()))
                raise ModelError(f"tensor {pname!r} in {name} has {bad} non-finite (NaN/inf) "
                                 "entries; cannot probe it")


#: The tokenizer's arrays in a GGUF header (49,152 tokens and 48,900 merges in SmolLM2's):
#: transformers' config and tensor reading parses every field of the header, these too, and
#: uses none of them (the tokenizer is read by transformers' own metadata reader; the token
#: list only gives ``vocab_size`` when the header has no ``<arch>.vocab_size``, then kept).
_TOKENIZER_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                     "tokenizer.ggml.token_type", "tokenizer.ggml.scores")


class _Lean:
    """A ``gguf.GGUFReader`` whose ``fields`` leave out :data:`_TOKENIZER_ARRAYS` (the token
    list kept when no ``*.vocab_size`` field exists); everything else is the reader's."""

    def __init__(self, reader):
        self._reader = reader
        has_vocab = any(k.endswith(".vocab_size") for k in reader.fields)
        drop = _TOKENIZER_ARRAYS if has_vocab else _TOKENIZER_ARRAYS[1:]
        self.fields = {k: v for k, v in reader.fields.items() if k not in drop}

    def __getattr__(self, name):
        return getattr(self._reader, name)


@contextlib.contextmanager
def _read_once():
    """Inside the block, transformers' GGUF reading parses each file's header once (one reader and
    one metadata-only checkpoint per path, deep-copied to each caller) and builds gguf's
    tensor-name map once per (architecture, layers); its de-quantising progress bar is off.
    Restored on exit."""
    import gguf
    import numpy as np
    import transformers.modeling_gguf_pytorch_utils as tg

    if not isinstance(gguf.GGUFReader, type):  # inside an enclosing block: already patched
        yield
        return

    readers: dict = {}
    metadata: dict = {}
    reader_cls, name_map, checkpoint = gguf.GGUFReader, gguf.get_tensor_name_map, \
        tg.load_gguf_checkpoint

    class Plain(reader_cls):
        """gguf's reader over a plain ndarray view of its memory map (the same bytes, not
        copied): slicing an ``np.memmap`` runs its Python ``__array_finalize__`` once per
        slice, about 1.3 million times for SmolLM2's header, most of the reader's time."""

        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, value):
            self._plain = value.view(np.ndarray) if isinstance(value, np.memmap) else value

    def reader(path, *args, **kwargs):
        key = (os.path.realpath(os.fspath(path)), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = _Lean(Plain(path, *args, **kwargs))
        return readers[key]

    def load_checkpoint(path, return_tensors=False, *args, **kwargs):
        if return_tensors or args or kwargs:
            return checkpoint(path, return_tensors, *args, **kwargs)
        key = os.path.realpath(os.fspath(path))
        if key not in metadata:
            metadata[key] = checkpoint(path, False)
        return copy.deepcopy(metadata[key])

    bar = getattr(tg, "tqdm", None)
    gguf.GGUFReader, tg.load_gguf_checkpoint = reader, load_checkpoint
    gguf.get_tensor_name_map = functools.cache(name_map)
    if bar is not None:  # its de-quantising bar is tqdm's own (not transformers' switch)
        tg.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map, tg.load_gguf_checkpoint = \
            reader_cls, name_map, checkpoint
        if bar is not None:
            tg.tqdm = bar


def from_gguf(path: Path):
    """The base model of a GGUF file, de-quantised to float32 by transformers' GGUF reader, built
    without random initialisation (every weight but an unused ``lm_head`` from the file, else
    :class:`ModelError`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = Path(path)
    with _read_once():
        cfg = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
        cfg._attn_implementation = "eager"
        with no_init_weights():
            net = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                   dtype=torch.float32)
        tensors = load_gguf_checkpoint(str(path), return_tensors=True,
                                       model_to_load=net)["tensors"]
    missing, unexpected = net.load_state_dict(
        {k: torch.as_tensor(v, dtype=torch.float32) for k, v in tensors.items()}, strict=False)
    missing = [k for k in missing if not k.startswith("lm_head")]
    if missing or unexpected:
        raise ModelError(f"{path.name}: GGUF tensors do not fit the model "
                         f"({len(missing)} missing, {len(unexpected)} unexpected)")
    base = net.base_model
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if "lm_head.weight" in tensors and not getattr(text, "tie_word_embeddings", False):
        # an untied output head, kept as a plain tensor for the circuit search's output loss
        base.rmtbase_output_head = net.lm_head.weight.detach()
    return base


__all__ = ["TOKENIZER_FILES", "Loaded", "check_finite_weights", "from_gguf",
           "has_tokenizer_files", "load", "locate", "one_line"]
