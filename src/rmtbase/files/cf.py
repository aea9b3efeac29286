"""CF-convention attributes on every netCDF file of an output folder (issue 37).

:func:`annotate` returns a shallow copy of a Dataset (the caller's is not changed) with

- global ``Conventions = "CF-1.10"``, ``title``, ``history`` (creation time, rmtbase version,
  the command), ``source`` and ``references`` (kept where the Dataset already has them);
- on every data variable and coordinate a ``long_name`` (the variable's own ``long_name``, else
  the first clause of its ``definition``, else its name in words) and UDUNITS ``units``.

rmtbase's quantities are functions of dimensionless weights, so their UDUNITS unit is ``1``:
where a variable carried a unit UDUNITS does not know (``sigma^2``, ``nat``, ``sigma_Q sigma_K``)
that text moves to ``comment`` ("in units of ...") and ``units`` becomes ``1``; a variable with
a ``sigma_power`` says how it scales with the entry standard deviation in ``comment``. No
absolute path is written: a global attribute holding one is reduced to its last component.
A fixed string width that a variable's encoding carries from a file it was read from is dropped,
so that no string is cut to it.
"""

from __future__ import annotations

import datetime as _dt
import os
import re

import xarray as xr

CONVENTIONS = "CF-1.10"
#: Units UDUNITS parses that rmtbase's variables use as they are.
UDUNITS_OK = {"1", "s", "bytes", "byte", "percent"}
REFERENCES = (
    "rmtbase (CITATION.cff); Marchenko & Pastur (1967), Math. USSR-Sbornik 1; Burda et al. "
    "(2010), Phys. Rev. E 82; Benaych-Georges & Nadakuditi (2011), Adv. Math. 227; "
    "Phipson & Smyth (2010); Benjamini & Hochberg (1995); Ding (2026), arXiv:2605.18898")

_TITLES = {"rmtbase score": "rmtbase score: attention heads against the random-matrix null",
           "rmtbase probe": "rmtbase probe: attention behaviour of each head on text",
           "rmtbase compare": "rmtbase compare: models' profiles against their nulls"}


#: Long names of variables and coordinates that carry no ``definition`` of their own.
LONG_NAMES = {
    "layer": "layer index", "head": "attention head index (query head)",
    "stat": "statistic name", "stat_group": "group of statistics", "axis": "profile axis",
    "spike": "outlier index (1 = largest)", "rank": "eigenvalue rank (0 = largest)",
    "quantile": "quantile of the null", "qk_z": "W_QK entry / (sqrt(d_h) sigma_Q sigma_K), bin centre",
    "component": "weight matrix of the layer", "circuit": "circuit of the head (qk or ov)",
    "checkpoint": "checkpoint label", "model": "model label", "step": "training step",
    "profile_value": "value of the head on the profile axis, in the axis's own units",
    "profile_effect": "effect on the profile axis: ratio to or shift from the null median",
    "profile_band_lo": "2.5 % quantile of the null effect on the profile axis",
    "profile_band_hi": "97.5 % quantile of the null effect on the profile axis",
    "profile_p": "Monte Carlo p-value of the profile axis",
    "profile_q": "Benjamini-Hochberg q-value of the profile axis over heads",
    "profile_flag": "the head differs from the null on this axis (profile_q <= alpha)",
    "axis_effect": "kind of effect of the profile axis (ratio or shift)",
    "axis_meaning": "what the profile axis measures",
}


def _words(name: str) -> str:
    return re.sub(r"[_.]+", " ", str(name)).strip() or str(name)


def _long_name(name, attrs: dict) -> str:
    if attrs.get("long_name"):
        return str(attrs["long_name"])
    if str(name) in LONG_NAMES:
        return LONG_NAMES[str(name)]
    definition = str(attrs.get("definition", "")).strip()
    if definition:
        first = re.split(r"(?<=[a-z0-9)])[;:](?:\s|$)|\.\s", definition, maxsplit=1)[0]
        return first[:120].rstrip(" ,(") or _words(name)
    return _words(name)


def _var_attrs(name, attrs: dict) -> dict:
    out = dict(attrs)
    out["long_name"] = _long_name(name, attrs)
    unit = attrs.get("units")
    notes = [str(attrs["comment"])] if attrs.get("comment") else []
    if unit is not None and str(unit) not in UDUNITS_OK:
        notes.append(f"in units of {unit}")
    if "sigma_power" in attrs:
        notes.append(f"scales as sigma^{attrs['sigma_power']} with the entry standard deviation")
    out["units"] = str(unit) if unit is not None and str(unit) in UDUNITS_OK else "1"
    if notes:
        out["comment"] = "; ".join(dict.fromkeys(notes))
    return out


def _no_abs_path(value):
    if isinstance(value, str) and os.path.isabs(value) and "\n" not in value \
            and len(value) < 4096 and " " not in value.strip():
        return os.path.basename(value.rstrip("/")) or value
    return value


def annotate(ds: xr.Dataset, *, kind: str = "rmtbase", name: str = "") -> xr.Dataset:
    """``ds`` with CF global and per-variable attributes (module docstring), as a copy."""
    from .._version import __version__

    out = ds.copy(deep=False)
    for var in out.variables:
        out.variables[var].attrs = _var_attrs(var, dict(out.variables[var].attrs))
        enc = out.variables[var].encoding
        if getattr(enc.get("dtype"), "kind", "") in "US" and "dtype" in enc:
            # a string width read from an earlier file (xarray keeps it through concat and
            # would cut longer strings to it on writing: 'qk.spectral_entro')
            out.variables[var].encoding = {k: v for k, v in enc.items() if k != "dtype"}
    attrs = {k: _no_abs_path(v) for k, v in out.attrs.items()}
    model = attrs.get("model")
    base_title = _TITLES.get(kind, f"{kind}: {name}" if name else kind)
    attrs["Conventions"] = CONVENTIONS
    attrs.setdefault("title", f"{base_title} ({model})" if model else base_title)
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    line = f"{now} {kind} (rmtbase {__version__}) wrote {name or 'this file'}"
    history = str(attrs.get("history", "")).strip()
    attrs["history"] = f"{history}\n{line}" if history else line
    attrs.setdefault("source", f"rmtbase {__version__}: JAX Monte Carlo nulls and exact "
                               "random-matrix analytics")
    attrs.setdefault("references", REFERENCES)
    out.attrs = attrs
    return out


__all__ = ["CONVENTIONS", "annotate"]
