"""The nulls rmtbase ships, registered by name on import: :class:`GaussianNull` and
:class:`PermutationNull`, subclasses of :class:`Null` (:mod:`rmtbase.stats.null_protocol`).
:data:`NULLS` is the registry's live view of the names; :func:`unregister` takes a null out."""

from __future__ import annotations

from ..errors import InputError
from .gaussian_null import GaussianNull
from .null_protocol import Null
from .null_registry import NULLS, REGISTRY
from .permutation_null import PermutationNull


def unregister(name: str) -> None:
    """Take the null named ``name`` out of the registry (a test's own null, after the test);
    the shipped nulls stay. KeyError if none is registered under it."""
    if name in (GaussianNull.name, PermutationNull.name):
        raise InputError(f"the shipped null {name!r} cannot be unregistered")
    REGISTRY.unregister(name)


__all__ = ["NULLS", "GaussianNull", "Null", "PermutationNull", "unregister"]
