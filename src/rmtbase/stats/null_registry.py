"""The registry of nulls by name (a :class:`rmtbase.registry.Registry`, entry-point group
``rmtbase.nulls``): filled by ``Null.__init_subclass__``, read by ``Null.parse`` and
:data:`NULLS` (a live view). A plugin's entry point names its :class:`Null` subclass, whose
import registers it (the entry point's name must be the class's ``name``)."""

from __future__ import annotations

from ..registry import GROUPS, Names, Registry


def _add_plugin(name: str, cls) -> None:
    """A plugin's null: the class its entry point names, registered by being defined (or
    again, when it was imported before and taken out since)."""
    own = cls.__dict__.get("name") if isinstance(cls, type) else None
    if own and REGISTRY.peek(own) is None and hasattr(cls, "reference") \
            and hasattr(cls, "parse") and not is_abstract(cls):
        REGISTRY.register(own, cls)
    if REGISTRY.peek(getattr(cls, "name", None)) is not cls:
        raise TypeError(f"{cls!r} is not a registered null (a concrete Null subclass that sets "
                        "its own name)")
    if cls.name != name:
        raise TypeError(f"the entry point is named {name!r} but its null is named {cls.name!r}")


def _check(name: str, cls) -> None:
    """What every null not shipped passes, however registered: a concrete Null subclass that
    sets its own ``name`` (TypeError, one line)."""
    if not (isinstance(cls, type) and hasattr(cls, "reference") and hasattr(cls, "parse")
            and not is_abstract(cls) and cls.__dict__.get("name") == name):
        raise TypeError(f"{cls!r} is not a null named {name!r} (a concrete Null subclass that "
                        "sets its own name; defining it registers it)")


#: The registered nulls: {name: class}, in the order they were defined.
REGISTRY: Registry = Registry("null", GROUPS["null"], _add_plugin, _check)


def is_abstract(cls) -> bool:
    """Whether ``cls`` still lacks an abstract method of its bases (ABCMeta sets
    ``__abstractmethods__`` only after ``__init_subclass__`` has run, so it is asked here)."""
    names = {m for b in cls.__mro__[1:] for m in getattr(b, "__abstractmethods__", ())}
    return any(getattr(getattr(cls, m, None), "__isabstractmethod__", False) for m in names)


#: The nulls by name, in the order the CLI lists them (a live view of the registry).
NULLS = REGISTRY.names()


__all__ = ["NULLS", "REGISTRY", "Names", "is_abstract"]
