"""Circuits a researcher can read: heads labelled by behaviour, every earlier source screened
(weights, first-order attribution) and confirmed or not by path patching, directly and through
the MLPs (docs/path-patching.md).

:func:`find_circuits` (rule: :mod:`.head.find`) returns an ``xr.Dataset`` along ``candidate``
(:mod:`.head.table`), :func:`circuit_list` its JSON objects. Importing this package does not import
torch or transformers."""

from .core.heads import HeadModel
from .core.receiver import Patcher
from .head.labels import LABELS, THRESHOLD, head_name, label_heads
from .head.probe import probe_heads
from .head.run import find_circuits
from .head.sequences import Sequences, repeat_lengths, repeated_sequences, repeated_tokens
from .head.table import circuit_list

__all__ = ["LABELS", "THRESHOLD", "HeadModel", "Patcher", "Sequences", "circuit_list",
           "find_circuits", "head_name", "label_heads", "probe_heads", "repeat_lengths",
           "repeated_sequences", "repeated_tokens"]
