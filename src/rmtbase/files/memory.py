"""Memory available to one computation, for the checks made before expensive work:
``$RMTBASE_MEMORY_LIMIT`` if set (e.g. ``8G``), else an accelerator's memory limit, else
``MemAvailable`` of ``/proc/meminfo`` (reclaimable page cache included), else ``os.sysconf``."""

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


def resident_bytes() -> int:
    """Bytes this process holds in memory now (resident set, ``/proc/self/statm``; else the
    peak from ``getrusage``; 0 where neither is known)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError, AttributeError):  # pragma: no cover - not Unix
        return 0


def check_memory(need: int, what: str, *, running: int = 0, backend: str | None = None) -> int:
    """One-line :class:`InputError` if ``need`` bytes (for ``what``) do not fit in
    :func:`available_memory`; returns the bytes compared, ``need - min(running, resident)``,
    where ``running`` is the part of ``need`` already resident in this process.
    ``$RMTBASE_MEMORY_LIMIT`` budgets the whole computation, so ``need`` is compared with it
    whole."""
    avail, source = available_memory(backend)
    env = source == "RMTBASE_MEMORY_LIMIT"
    counted = int(need) if env else int(need) - min(int(running), resident_bytes())
    if avail is not None and counted > avail:
        hint = "" if env else "; set RMTBASE_MEMORY_LIMIT to change the limit"
        raise InputError(f"{what} needs about {fmt_bytes(counted)}, more than the "
                         f"{fmt_bytes(avail)} available ({source}{hint})")
    return counted


def fmt_bytes(n: float) -> str:
    """``1.5 GiB``-style size (three significant digits)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


__all__ = ["available_memory", "check_memory", "fmt_bytes", "parse_bytes", "resident_bytes"]
