"""Attention probe: what each head does on real text, beside what its weights say.

Public API (``docs/contract.md``, "Probe"): :func:`probe_model` (per (layer, head) behaviour
statistics of a model on text, an ``xr.Dataset``; conventions in :mod:`.behaviour`),
:func:`behaviours` (the same from one attention tensor), :func:`default_text`,
:func:`read_text`, :func:`windows` (texts and windowing), :func:`join` (behaviours added to a
score as ``behaviour_<name>``). Importing this package does not import torch or transformers."""

from .behaviour import BEHAVIOURS, behaviours
from .join import join
from .run import probe_model
from .text import DEFAULT_WINDOW, default_text, read_text, windows

__all__ = ["BEHAVIOURS", "DEFAULT_WINDOW", "behaviours", "default_text", "join", "probe_model",
           "read_text", "windows"]
