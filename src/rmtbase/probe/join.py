"""A probe joined to a score: each behaviour becomes a (layer, head) variable ``behaviour_<name>``.

One variable per name in :data:`.behaviour.BEHAVIOURS` (one ``heads.csv`` column each); the
probe's provenance goes into the score's attrs as ``probe_<attr>``."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError
from .behaviour import BEHAVIOURS

PREFIX = "behaviour_"
_PROVENANCE = ("text_name", "text_sha256", "n_tokens", "n_windows", "window", "attention",
               "queries", "special_tokens", "model")


def join(scores: xr.Dataset, probe: xr.Dataset) -> xr.Dataset:
    """``scores`` with the behaviours of ``probe`` added as ``behaviour_<name>`` (layer, head)
    variables and ``probe_*`` attrs (module docstring); a new Dataset, inputs unchanged.
    One-line :class:`InputError` when the two do not have the same layers and heads."""
    for dim in ("layer", "head"):
        if dim not in scores.dims or dim not in probe.dims:
            raise InputError(f"cannot join the probe to the score: no {dim!r} dimension")
        a = np.asarray(scores[dim].values)
        b = np.asarray(probe[dim].values)
        if a.shape != b.shape or not np.array_equal(a, b):
            raise InputError(f"the probe's {dim}s ({b.size}) do not match the score's "
                             f"({a.size}); probe and score must be of one model")
    out = scores.copy()
    for name in BEHAVIOURS:
        if name in probe:
            v = probe[name].transpose("layer", "head").astype(np.float64)
            out[PREFIX + name] = (("layer", "head"), v.values, dict(v.attrs))
    for k in _PROVENANCE:
        if k in probe.attrs:
            out.attrs[f"probe_{k}"] = probe.attrs[k]
    return out


def behaviour_names(ds: xr.Dataset) -> list[str]:
    """The ``behaviour_*`` variables of a score, in :data:`BEHAVIOURS` order."""
    return [PREFIX + n for n in BEHAVIOURS if PREFIX + n in ds]


__all__ = ["PREFIX", "behaviour_names", "join"]
