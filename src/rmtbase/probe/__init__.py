"""Attention probe: what each head does on real text, beside what its weights say.

Public API (``docs/contract.md``, "Probe"):

- :func:`probe_model` — run a model on text window by window; per (layer, head) the mean
  attention entropy, previous/next-token, first-token (sink) and self attention and the mean
  attention distance (:mod:`.behaviour` states the conventions) as an ``xr.Dataset``;
- :func:`behaviours` — the same statistics from one attention tensor (numpy);
- :func:`default_text`, :func:`read_text`, :func:`windows` — the shipped public-domain text,
  a user's text file, and the windowing;
- :func:`join` — a probe's behaviours added to a score Dataset as ``behaviour_<name>``.

Importing this package does not import torch or transformers.
"""

from .behaviour import BEHAVIOURS, behaviours
from .join import join
from .run import probe_model
from .text import DEFAULT_WINDOW, default_text, read_text, windows

__all__ = ["BEHAVIOURS", "DEFAULT_WINDOW", "behaviours", "default_text", "join", "probe_model",
           "read_text", "windows"]
