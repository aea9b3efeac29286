"""The registry of nulls by name (issue 58): filled by the null classes themselves when they are
defined (``Null.__init_subclass__``, :mod:`rmtbase.stats.null_protocol`, as gguf-py's
quantisation classes register), read by ``Null.parse``, by :data:`NULLS` (a live view: the
CLI's ``--null`` choices) and by the re-read of a file's ``null_kind``. The shipped nulls are
registered by :mod:`rmtbase.stats.null_kind`.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The registered nulls: {name: class}, in the order they were defined.
REGISTRY: dict[str, type] = {}


def is_abstract(cls) -> bool:
    """Whether ``cls`` still lacks an abstract method of its bases (ABCMeta sets
    ``__abstractmethods__`` only after ``__init_subclass__`` has run, so it is asked here)."""
    names = {m for b in cls.__mro__[1:] for m in getattr(b, "__abstractmethods__", ())}
    return any(getattr(getattr(cls, m, None), "__isabstractmethod__", False) for m in names)


class Names(Sequence):
    """The registered nulls' names in the order they were defined (a live view: a null
    defined later is in it; it compares equal to the tuple of them)."""

    def __getitem__(self, i):
        return tuple(REGISTRY)[i]

    def __len__(self) -> int:
        return len(REGISTRY)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in REGISTRY

    def __eq__(self, other) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(tuple(self))


#: The nulls by name, in the order the CLI lists them (the registry's, module docstring).
NULLS = Names()


__all__ = ["NULLS", "REGISTRY", "Names", "is_abstract"]
