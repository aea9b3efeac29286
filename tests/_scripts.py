"""The repository's scripts (``benchmarks/``, ``scripts/``) loaded as modules by path: they are
not a package, and tests import their functions to check what the scripts measure."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(relative: str, name: str | None = None):
    """The module of ``ROOT / relative`` (e.g. ``"benchmarks/gpu.py"``), executed afresh under
    ``name`` (default: the file's stem)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
