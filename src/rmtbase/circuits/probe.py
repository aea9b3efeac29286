"""The probe's statistics of every head on the circuit search's sequences, for models without
a tokenizer too (repeated random tokens): :func:`probe_heads`."""

from __future__ import annotations

import xarray as xr

from .capture import capture, probe_dataset
from .heads import HeadModel


def probe_heads(model, *, sequences=None, seed: int = 0, progress: bool = True) -> xr.Dataset:
    """The probe Dataset (one (layer, head) variable per
    :data:`rmtbase.probe.behaviour.BEHAVIOURS`, as :func:`rmtbase.probe.probe_model` writes)
    of ``model`` on ``sequences`` (as :func:`.run.find_circuits` takes them: None = repeated
    random tokens, ``"text"`` = the probe's text); attrs ``probe_source``
    (``"text"`` | ``"repeated_random_tokens"``) and ``sequences`` say which. gpt2 and the
    LLaMA family (the capture is the patching's)."""
    from .model import load_model
    from .run import make_sequences

    net, tok, name = load_model(model, tokenizer=sequences == "text")
    hm = HeadModel(net)
    seqs = make_sequences(net, tok, sequences, seed)
    _, totals = capture(hm, seqs, progress=progress)
    return probe_dataset(totals, seqs, name)


__all__ = ["probe_heads"]
