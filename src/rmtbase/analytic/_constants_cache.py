"""On-disk cache of verified constant tables (for :mod:`.constants`).

``<user cache>/constants/v{FORMAT}-{digits}.json`` (:func:`rmtbase.files.user_cache.cache_dir`),
``{"format", "digits", "values": {name: decimal string}}``, written atomically. A file that is
unreadable or does not match, or that another user wrote or could rewrite, is ignored; a cache
that cannot be written is skipped. Bump
:data:`FORMAT` whenever a definition or the rounding rule changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["FORMAT", "path", "load", "store"]

#: Version of the cached values; bump to invalidate every cached table.
FORMAT = 1


def path(digits: int) -> Path:
    from ..files.user_cache import cache_dir

    return cache_dir() / "constants" / f"v{FORMAT}-{int(digits)}.json"


def _significant(text: str) -> int:
    return len(re.sub(r"[^0-9]", "", text).lstrip("0"))


def load(digits: int, names) -> dict[str, str] | None:
    """The cached values for ``digits`` if a valid file has exactly ``names``, else None (also
    where another user wrote it or could rewrite it: :mod:`rmtbase.files.cache_trust`)."""
    from ..files.cache_trust import readable

    if path(digits).exists() and not readable(path(digits), "constants table"):
        return None
    try:
        data = json.loads(path(digits).read_text(encoding="utf-8"))
        values = data["values"]
        ok = (data.get("format") == FORMAT and data.get("digits") == digits
              and isinstance(values, dict) and set(values) == set(names)
              and all(isinstance(v, str) and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v)
                      and _significant(v) == digits for v in values.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return dict(values) if ok else None


def store(digits: int, values: dict[str, str]) -> None:
    """Write ``values`` for ``digits`` atomically; errors (read-only or full disk) are ignored."""
    from ..files.atomic import write_atomic

    def fill(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"format": FORMAT, "digits": digits, "values": values}, fh, indent=1)

    from ..files.cache_trust import may_replace

    if not may_replace(path(digits)):  # another user's file: left as it is
        return
    try:
        write_atomic(path(digits), fill)
        from ..files.cache_trust import keep_private

        keep_private(path(digits))
    except OSError:
        pass
