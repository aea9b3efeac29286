"""Circuits a researcher can read: heads labelled by behaviour, every earlier source screened
(weights, first-order attribution) and confirmed or not by path patching, directly and through
the MLPs (docs/path-patching.md).

:func:`find_circuits` (rule: :mod:`.find`) returns an ``xr.Dataset`` along ``candidate``
(:mod:`.table`), :func:`circuit_list` its JSON objects. Importing this package does not import
torch or transformers."""

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
