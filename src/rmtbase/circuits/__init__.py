"""Circuits a researcher can read: heads labelled by behaviour, candidate head pairs screened
by the weights (composition), confirmed or not by path patching (issue 55).

Public API:

- :func:`find_circuits` — the whole search: probe statistics and labels on the model's
  sequences, the top-k sources by composition of every receiver with a specific label (the
  first-token sinks on request, :mod:`.find`), each path-patched
  into the receiver's q, k and v input, with the ``confirmed``/``dominant``/``redundant`` rule
  (:mod:`.find`, :mod:`.run`); an ``xr.Dataset`` along ``candidate`` (:mod:`.table`);
- :func:`circuit_list` — that Dataset as JSON objects;
- :func:`label_heads` — one behaviour label per head from a probe Dataset (:mod:`.labels`);
- :func:`probe_heads` — the probe's statistics on repeated random tokens (or text) of a model
  without needing a tokenizer, ``probe_source`` in its attrs;
- :func:`repeated_tokens`, :func:`repeated_sequences` — TransformerLens'
  ``generate_repeated_tokens`` convention (:mod:`.sequences`);
- :class:`HeadModel`, :class:`Patcher` — one head recomputed from a residual and path
  patching (:mod:`.heads`, :mod:`.patching`) for gpt2 and the LLaMA family.

Importing this package does not import torch or transformers.
"""

from .heads import HeadModel
from .labels import LABELS, THRESHOLD, head_name, label_heads
from .patching import Patcher
from .probe import probe_heads
from .run import find_circuits
from .sequences import Sequences, repeated_sequences, repeated_tokens
from .table import circuit_list

__all__ = ["LABELS", "THRESHOLD", "HeadModel", "Patcher", "Sequences", "circuit_list",
           "find_circuits", "head_name", "label_heads", "probe_heads", "repeated_sequences",
           "repeated_tokens"]
