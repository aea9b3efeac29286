"""Memory available to one computation, for the checks made before expensive work
(:mod:`rmtbase.baseline.limits`: null draws; :mod:`rmtbase.probe.run`: attention windows):
``$RMTBASE_MEMORY_LIMIT`` if set (e.g. ``8G``), else an accelerator's memory limit, else
``MemAvailable`` of ``/proc/meminfo``, else ``os.sysconf``."""

from __future__ import annotations

import math
import os

from ..errors import InputError

_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(text: str) -> int:
    """``"512M"``, ``"8G"``, ``"1.5T"`` or a plain number of bytes → bytes."""
    t = str(text).strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _SUFFIX else ""
    try:
        value = float(t[: len(t) - len(unit)]) * _SUFFIX[unit]
    except ValueError:
        raise InputError(f"RMTBASE_MEMORY_LIMIT must be bytes such as 8G or 512M, "
                         f"got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise InputError(f"RMTBASE_MEMORY_LIMIT must be positive, got {text!r}")
    return int(value)


def available_memory(backend: str | None = None) -> tuple[int | None, str]:
    """(bytes available for one computation, where the number comes from)."""
    env = os.environ.get("RMTBASE_MEMORY_LIMIT")
    if env:
        return parse_bytes(env), "RMTBASE_MEMORY_LIMIT"
    if backend is None:
        import jax

        backend = jax.default_backend()
    if backend != "cpu":
        import jax

        try:
            limit = (jax.devices()[0].memory_stats() or {}).get("bytes_limit")
        except Exception:  # noqa: BLE001 - a backend without memory statistics
            limit = None
        if limit:
            return int(limit), f"{backend} device memory"
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    except (OSError, ValueError, IndexError):
        pass
    try:
        return (os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
                "available physical memory")
    except (ValueError, OSError, AttributeError):
        return None, "unknown"


def fmt_bytes(n: float) -> str:
    """``1.5 GiB``-style size (three significant digits)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


__all__ = ["available_memory", "fmt_bytes", "parse_bytes"]
