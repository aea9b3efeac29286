"""The user cache directory: null tables, whole-matrix nulls, constants and JAX's compiled
programs live below it.

``$RMTBASE_CACHE`` if set, else the platform cache directory (``$XDG_CACHE_HOME/rmtbase`` or
``~/.cache/rmtbase`` on Linux, ``~/Library/Caches/rmtbase`` on macOS,
``%LOCALAPPDATA%\\rmtbase\\Cache`` on Windows).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_dir() -> Path:
    """The user cache directory (not created here)."""
    env = os.environ.get("RMTBASE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rmtbase"
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "rmtbase" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmtbase"


__all__ = ["cache_dir"]
