"""The nulls rmtbase ships, registered by name: :class:`GaussianNull`
(:mod:`rmtbase.stats.gaussian_null`) and :class:`PermutationNull`
(:mod:`rmtbase.stats.permutation_null`), subclasses of the protocol :class:`Null`
(:mod:`rmtbase.stats.null_protocol`, where the null as a value is described). Importing this
module registers both (:mod:`rmtbase.stats` imports it, so any import of a ``stats`` module
does); :data:`NULLS` is the registry's live view of the names
(:mod:`rmtbase.stats.null_registry`); :func:`unregister` takes a test's own null out again.
The public names ``rmtbase.stats.null_kind.{Null, GaussianNull, PermutationNull, NULLS,
unregister}`` (``docs/contract.md``) stay importable here.
"""

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
