"""Circuits a researcher can read: heads labelled by behaviour at the model's own scale, every
earlier source of each labelled head screened (weights and a first-order attribution
estimate) and confirmed or not by path patching, directly and through the MLPs.

Public API:

- :func:`find_circuits` — the whole search (:mod:`.find` states the steps and the rule,
  :mod:`.run` drives it); an ``xr.Dataset`` along ``candidate`` (:mod:`.table`);
- :func:`circuit_list` — that Dataset as JSON objects;
- :func:`label_heads` — one behaviour label per head from a probe Dataset (:mod:`.labels`);
- :func:`probe_heads` — the probe's statistics on repeated random tokens (or text), for
  models without a tokenizer too;
- :func:`repeated_tokens`, :func:`repeated_sequences`, :func:`repeat_lengths` — the
  sequences (:mod:`.sequences`);
- :class:`HeadModel`, :class:`Patcher` — one head recomputed from a residual and path
  patching (:mod:`.heads`, :mod:`.patching`) for the families of
  :data:`.families.SUPPORTED`.

Importing this package does not import torch or transformers.
"""

from .heads import HeadModel
from .labels import LABELS, THRESHOLD, head_name, label_heads
from .patching import Patcher
from .probe import probe_heads
from .run import find_circuits
from .sequences import Sequences, repeat_lengths, repeated_sequences, repeated_tokens
from .table import circuit_list

__all__ = ["LABELS", "THRESHOLD", "HeadModel", "Patcher", "Sequences", "circuit_list",
           "find_circuits", "head_name", "label_heads", "probe_heads", "repeat_lengths",
           "repeated_sequences", "repeated_tokens"]
