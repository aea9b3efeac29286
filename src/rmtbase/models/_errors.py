"""One-line error text from foreign exceptions: a :class:`~rmtbase.errors.ModelError` carries only
the first non-empty line of a library's message, stripped."""

from __future__ import annotations


def one_line(exc: BaseException | str, limit: int = 300) -> str:
    """The first non-empty line of ``exc`` (its type name if it has no text), at most
    ``limit`` characters."""
    text = str(exc)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not line and isinstance(exc, BaseException):
        line = type(exc).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"
