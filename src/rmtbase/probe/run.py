"""The probe's forward loop: a model run on text one window at a time, its attention reduced to
per-head behaviour statistics (:mod:`.behaviour`) as it comes.

Windows run in batches whose attention fits :data:`ATTENTION_BYTES`, reduced layer by layer;
the numbers do not depend on the batching. Under GQA every query head gets its own row.
:func:`check_window_memory` refuses a window that does not fit, before the first;
:func:`is_causal`: all weights above the diagonal exactly 0 on the first window."""

from __future__ import annotations

import datetime as _dt
import os

import numpy as np
import xarray as xr

from .._version import __version__
from ..errors import InputError, ModelError
from ..progress import progress_bar
from . import behaviour as bh
from .loader import TOKENIZER_FILES, Loaded, check_finite_weights, locate
from .loader import load as load_model
from .loader import one_line as _one_line
from .text import DEFAULT_WINDOW, Text, read_text, windows
from .threads import one_thread

#: The embedded default model's name in outputs (its folder is named ``model``).
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

#: Cap on one batch's attention weights (float32 layers × heads × T² × batch), bytes.
ATTENTION_BYTES = 256 * 2**20
MAX_BATCH = 8


def check_model(model) -> None:
    """One-line :class:`ModelError` now, before any other work, if ``model`` cannot be probed
    for what its folder shows (no config.json, no tokenizer, a file that is not .gguf); a hub
    id passes (checked when loaded). ``None``: the embedded default model."""
    if model is not None:
        locate(model)


def load(model):
    """(tokenizer, model, name) for ``model`` (folder, .gguf file or hub id) by the one loader
    (:func:`.loader.load`, tokenizer required); one-line :class:`ModelError` when either
    cannot be loaded."""
    got = load_model(model)
    return got.tokenizer, got.net, got.name


def default_window(config) -> int:
    """:data:`.text.DEFAULT_WINDOW` capped by the config's ``max_position_embeddings``
    (or ``n_positions``)."""
    cap = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions",
                                                                       None)
    return int(min(DEFAULT_WINDOW, cap)) if cap else DEFAULT_WINDOW


def is_causal(attentions) -> bool:
    """True when every layer's finite weights above the diagonal are exactly 0 (a NaN, which
    fails every comparison, neither makes nor unmakes a causal model)."""
    import torch

    for a in attentions:
        upper = a[0].triu(1)
        if bool(((upper != 0) & torch.isfinite(upper)).any()):
            return False
    return True


def _check_finite_attention(att, label: str) -> None:
    """One-line :class:`ModelError` if a layer's attention weights hold NaN or inf (weights
    are checked finite at load; float32 overflow in the forward pass can still make them)."""
    import torch

    for li, a in enumerate(att):
        if not bool(torch.isfinite(a).all()):
            raise ModelError(f"attention weights of layer {li} of {label} are not finite "
                             "(NaN/inf in the forward pass: float32 overflow?); cannot probe it")


def _shape(config) -> tuple[int, int]:
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", 1)
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", 1)
    return int(layers), int(heads)


#: Eager attention's working arrays of one layer (scores, softmax, its dropout/mask copies),
#: in units of that layer's (heads, T, T) float32 weights, beside the weights kept per layer.
_WORK_LAYERS = 3


def window_bytes(config, window: int) -> int:
    """Estimated memory of one window's forward pass with ``output_attentions``: float32
    (heads, T, T) weights kept for every layer plus :data:`_WORK_LAYERS` layers' working
    arrays."""
    layers, heads = _shape(config)
    return 4 * heads * int(window) ** 2 * (layers + _WORK_LAYERS)


def check_window_memory(config, window: int, label: str) -> int:
    """One-line :class:`InputError` if one window of ``window`` tokens cannot fit in the
    memory available (module docstring); returns the estimate in bytes."""
    from ..files.memory import available_memory, fmt_bytes

    need = window_bytes(config, window)
    avail, source = available_memory("cpu")
    if avail is not None and need > avail:
        layers, heads = _shape(config)
        fits = int((avail / (4 * heads * (layers + _WORK_LAYERS))) ** 0.5)
        raise InputError(f"one window of {window} tokens of {label} needs about "
                         f"{fmt_bytes(need)} of attention weights ({layers} layers x {heads} "
                         f"heads x {window}^2 float32), more than the {fmt_bytes(avail)} "
                         f"available ({source}); use --window {max(3, fits)} or less")
    return need


def _batches(wins, config):
    """Consecutive windows of equal length, grouped under :data:`ATTENTION_BYTES`."""
    layers, heads = _shape(config)
    group: list = []
    for win in wins:
        t = win[0].size
        size = max(1, min(MAX_BATCH, ATTENTION_BYTES // (4 * int(layers) * int(heads) * t * t)))
        if group and (group[0][0].size != t or len(group) >= size):
            yield group
            group = []
        group.append(win)
    if group:
        yield group


def probe_model(model, *, text: Text | str | os.PathLike | None = None, window: int | None = None,
                name: str | None = None, progress: bool = True) -> xr.Dataset:
    """Attention behaviour of every (layer, head) of ``model`` on ``text``.

    model: local folder, ``.gguf`` file, hub id or a :class:`.loader.Loaded` with a tokenizer.
    text: a :class:`.text.Text`, a UTF-8 file path, or None for the default text. window: tokens
    per window, special tokens included (None: :func:`default_window`). name: the model's name in
    the output (default: the folder's name). Returns an ``xr.Dataset`` with one (layer, head)
    variable per behaviour and the text's SHA-256, token count, window and model name in attrs."""
    import torch

    if window is not None:  # a type, not coerced (2.7 is not 2), before any reading
        from ..checks import MAX_COUNT, check_int

        window = check_int("window", window, minimum=3, maximum=MAX_COUNT, why="tokens")
    txt = text if isinstance(text, Text) else read_text(text)
    got = load_model(model)
    tok, net, label = got.tokenizer, got.net, got.name
    if tok is None:
        raise ModelError(f"{label} was given without its tokenizer; the probe needs it")
    w = default_window(net.config) if window is None else int(window)
    cap = getattr(net.config, "max_position_embeddings", None)
    if w < 3:
        raise InputError(f"window must be at least 3 tokens, got {w}")
    if cap and w > cap:
        raise InputError(f"window {w} exceeds the model's max_position_embeddings {cap}")
    check_window_memory(net.config, w, label)  # before the text is tokenized or run
    wins = windows(tok, txt.text, w)
    totals: list[dict | None] = []
    causal = None
    with torch.inference_mode(), one_thread(), progress_bar(
            len(wins), desc="rmtbase probe", unit="window", enabled=progress) as bar:
        for group in _batches(wins, net.config):
            x = torch.from_numpy(np.stack([ids for ids, _ in group]))
            try:
                out = net(input_ids=x, attention_mask=torch.ones_like(x), output_attentions=True)
            except Exception as exc:
                raise ModelError(f"forward pass of {label} failed: {_one_line(exc)}") from exc
            att = getattr(out, "attentions", None)  # None: a model without attention
            if not att or att[0] is None:
                raise ModelError(f"{label} returned no attention weights (eager attention "
                                 "not supported by this architecture?)")
            _check_finite_attention(att, label)
            if causal is None:
                causal = is_causal(att)
                totals = [None] * len(att)
            for li, a in enumerate(att):
                for b, (ids, content) in enumerate(group):
                    part = bh.window_sums(a[b].float().numpy(), content, causal=causal,
                                          ids=ids)
                    totals[li] = bh.add_sums(totals[li], part)
            del out, att
            bar.update(len(group))
    means = [bh.finish(t) for t in totals]
    n_layers, n_heads = len(means), means[0]["entropy"].size
    ds = xr.Dataset(coords={"layer": np.arange(n_layers), "head": np.arange(n_heads)})
    for k in bh.BEHAVIOURS:
        units, meaning = bh.DESCRIPTIONS[k]
        ds[k] = (("layer", "head"), np.stack([m[k] for m in means]))
        ds[k].attrs.update(units=units, long_name=meaning)
    n_tok = int(sum(int(c.sum()) for _, c in wins))
    ds.attrs.update(
        Conventions="CF-1.8",
        title="rmtbase probe: attention behaviour per head on text",
        model=name or label, text_name=txt.name, text_sha256=txt.sha256, n_tokens=n_tok,
        n_windows=len(wins), window=w, attention="causal" if causal else "bidirectional",
        queries="text-token positions i >= 1; keys: all positions, special tokens included",
        special_tokens="per window, as the tokenizer adds them around one sequence; no padding",
        source=f"rmtbase {__version__}", rmtbase_version=__version__, probe_source="text",
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    return ds


__all__ = ["DEFAULT_MODEL_NAME", "TOKENIZER_FILES", "Loaded", "check_finite_weights",
           "check_model", "check_window_memory", "default_window", "is_causal", "load",
           "probe_model", "window_bytes"]
