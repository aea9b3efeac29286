"""Every line of ``summary.txt`` and the screen is at most :data:`MAX_LINE` characters: a long
list cut to ``+N more`` and where all of it is (:func:`listed`), longer prose wrapped with its
continuation rows indented (:func:`fit_text`)."""

from __future__ import annotations

import textwrap

#: Characters a written line holds at most.
MAX_LINE = 200
#: Extra indent of a wrapped line's continuation rows.
CONTINUATION = "    "


def listed(head: str, items: list[str], *, sep: str = "; ", where: str = "",
           width: int = MAX_LINE - 2) -> str:
    """``head`` and the first ``items`` that keep the line within ``width`` characters (one at
    least), then ``+N more`` and ``where`` (the file holding every item) when some are left;
    ``width`` leaves a two-space indent within :data:`MAX_LINE` by default."""
    whole = head + sep.join(items)
    if len(whole) <= width or len(items) <= 1:
        return whole
    n = 1
    while n < len(items) and len(_cut(head, items, sep, n + 1, where)) <= width:
        n += 1
    return _cut(head, items, sep, n, where)


def _cut(head: str, items: list[str], sep: str, n: int, where: str) -> str:
    more = f" +{len(items) - n} more" + (f" ({where})" if where else "")
    return head + sep.join(items[:n]) + more


def wrap_line(line: str, width: int = MAX_LINE) -> list[str]:
    """``line`` as rows of at most ``width`` characters: itself when it fits, else wrapped at
    spaces with the continuation rows indented :data:`CONTINUATION` beyond its own indent (a
    word longer than a row is broken)."""
    if len(line) <= width:
        return [line]
    body = line.lstrip(" ")
    indent = line[:min(len(line) - len(body), width // 4)]
    return textwrap.wrap(body, width=width, initial_indent=indent,
                         subsequent_indent=indent + CONTINUATION, break_on_hyphens=False,
                         drop_whitespace=True) or [line[:width]]


def fit_text(text: str, width: int = MAX_LINE) -> str:
    """``text`` with every line longer than ``width`` wrapped (:func:`wrap_line`)."""
    return "\n".join(r for line in text.split("\n") for r in wrap_line(line, width))


def longest(text: str) -> int:
    """The length of ``text``'s longest line (0 for none)."""
    return max((len(t) for t in text.splitlines()), default=0)


__all__ = ["CONTINUATION", "MAX_LINE", "fit_text", "listed", "longest", "wrap_line"]
