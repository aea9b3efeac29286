"""The public face for plugins: everything a package extending rmtbase imports, from one place.

A plugin (``docs/extending.md``) imports from here only; where rmtbase keeps each name inside
the package may change, these names do not. Each is loaded on first use (no JAX import until a
name that needs it is read), so ``from rmtbase.extend import Storage`` in a plugin module
costs what the storage record costs.

The five kinds of plugin (entry-point groups of :data:`rmtbase.registry.GROUPS`):

- a null: :class:`Null` (or :class:`GaussianNull`, :class:`PermutationNull` to build on),
  whose ``reference(cells, storage, *, draws, seed, progress)`` returns a :class:`Reference`
  for the :class:`Cells`; the helpers a null uses to build its draws are :func:`layer_stats`
  (a layer's statistics, ``{"<matrix>.<stat>": (..., heads)}``: the joint draws, keyed like
  the heads' values) and :func:`factor_profile` (the factor axes of W_Q, W_K: the profile
  draws); :data:`GAUSSIAN_AXES` and :data:`GAUSSIAN_BAND` choose the Gaussian profile null and
  spectrum band; :func:`unregister_null` takes a null out;
- a storage format: a :class:`Storage` record (:func:`register_storage`);
- an architecture adapter: an :class:`Adapter` subclass (:func:`adapter_class` gives a
  shipped one's class to build on, :func:`register_adapter`);
- a head statistic: a spectral :class:`Statistic` record (:func:`register_statistic`);
- a profile axis: an :class:`Axis` record (:func:`register_axis`).

A plugin that fails to load is a :class:`PluginWarning`; one that fails when called, or returns
what its contract excludes, a :class:`PluginError` (an :class:`~rmtbase.errors.InputError`:
exit 2 from the command line; a dataset axis in a score is left out with that line as a
:class:`PluginWarning`), each one line naming the plugin."""

from __future__ import annotations

import importlib

#: Public name -> (module, attribute) where rmtbase keeps it now.
_NAMES = {
    # nulls
    "Null": ("rmtbase.stats.null_protocol", "Null"),
    "GaussianNull": ("rmtbase.stats.gaussian_null", "GaussianNull"),
    "PermutationNull": ("rmtbase.stats.permutation_null", "PermutationNull"),
    "unregister_null": ("rmtbase.stats.null_kind", "unregister"),
    "Reference": ("rmtbase.scoring.heads.reference", "Reference"),
    "Cells": ("rmtbase.scoring.heads.reference", "Cells"),
    "GAUSSIAN_AXES": ("rmtbase.scoring.heads.reference", "GAUSSIAN_AXES"),
    "GAUSSIAN_BAND": ("rmtbase.scoring.heads.reference", "GAUSSIAN_BAND"),
    "layer_stats": ("rmtbase.scoring.measures.layer_stats", "layer_stats"),
    "factor_profile": ("rmtbase.scoring.profile.axes", "factor_profile"),
    # storage formats
    "Storage": ("rmtbase.stats.storage", "Storage"),
    "register_storage": ("rmtbase.stats.storage", "register"),
    "unregister_storage": ("rmtbase.stats.storage", "unregister"),
    # adapters
    "Adapter": ("rmtbase.models._adapter", "Adapter"),
    "register_adapter": ("rmtbase.models.registry", "register"),
    "unregister_adapter": ("rmtbase.models.registry", "unregister"),
    # head statistics
    "Statistic": ("rmtbase.stats.statistic", "Statistic"),
    "register_statistic": ("rmtbase.stats.statistic", "register"),
    "unregister_statistic": ("rmtbase.stats.statistic", "unregister"),
    # profile axes
    "Axis": ("rmtbase.decision.axes", "Axis"),
    "register_axis": ("rmtbase.decision.axes", "register"),
    "unregister_axis": ("rmtbase.decision.axes", "unregister"),
    # registries and errors
    "GROUPS": ("rmtbase.registry", "GROUPS"),
    "PluginError": ("rmtbase.registry", "PluginError"),
    "PluginWarning": ("rmtbase.registry", "PluginWarning"),
    "InputError": ("rmtbase.errors", "InputError"),
}


def adapter_class(model_type: str) -> type:
    """The class of the shipped adapter of ``model_type`` (``"gpt2"``), to subclass; looks up
    rmtbase's own adapters only (no plugin is loaded)."""
    from .errors import InputError
    from .models.registry import ADAPTERS

    adapter = ADAPTERS.peek(model_type)
    if adapter is None or not ADAPTERS.shipped(model_type):
        raise InputError(f"rmtbase ships no adapter of model type {model_type!r}")
    return type(adapter)


__all__ = sorted([*_NAMES, "adapter_class"])


def __getattr__(name: str):
    if name in _NAMES:
        module, attr = _NAMES[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'rmtbase.extend' has no attribute {name!r}")


def __dir__():
    return __all__
