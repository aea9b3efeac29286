"""The probe's statistics of every head on the circuit search's sequences, for models without
a tokenizer too (repeated random tokens): :func:`probe_heads`."""

from __future__ import annotations

import xarray as xr

from ..core.capture import capture, probe_dataset
from ..core.heads import HeadModel


def probe_heads(model, *, sequences=None, seed: int = 0, repeat_length: int | None = None,
                progress: bool = True) -> xr.Dataset:
    """The probe Dataset (as :func:`rmtbase.probe.probe_model` writes it) of ``model`` on
    ``sequences``: None (repeated random tokens, ``repeat_length`` a half), ``"text"`` (the
    probe's text) or a :class:`.sequences.Sequences`; attrs ``probe_source`` and ``sequences``."""
    from ..core.loader import load_model
    from .run import make_sequences
    from .sequences import DEFAULT_HALF, repeated_sequences

    net, tok, name = load_model(model, tokenizer=sequences == "text")
    hm = HeadModel(net)
    if sequences is None or sequences == "repeated_random_tokens":
        seqs = repeated_sequences(net.config, n=repeat_length or DEFAULT_HALF, seed=seed)
    else:
        seqs = make_sequences(net, tok, sequences, seed)
    _, totals = capture(hm, seqs, progress=progress)
    return probe_dataset(totals, seqs, name)


__all__ = ["probe_heads"]
