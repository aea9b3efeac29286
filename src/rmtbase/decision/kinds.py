"""Heads grouped by kind, read from the profile axes (``docs/kinds.md``).

A kind is one profile axis flagged (``profile_flag``) with a sign (``symmetric`` also needs
alignment unflagged or ``symmetry_unaligned`` flagged); ``near-null`` and ``other``.
``head_kinds``: every kind that holds, by departure; ``head_kind``: the one whose axis departs
most in band units; ``head_kind_axes``: each kind's axis and signed departure."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .order import axis_departure, departures

#: kind -> (axes, sign of the effect about the null median, meaning); order of display.
KINDS = {
    "concentrated": (("concentration",), -1, "energy in fewer directions than random"),
    "aligned": (("alignment",), +1, "query and key read the same directions"),
    "anti-aligned": (("alignment",), -1, "query and key read the same directions, opposite "
                                         "signs"),
    "symmetric": (("symmetry",), +1, "W_QK near symmetric (beyond any alignment)"),
    "directional": (("symmetry",), -1, "W_QK near antisymmetric: attention with a direction"),
    "input-focused": (("q_input_focus", "k_input_focus"), +1, "a few residual dimensions read "
                                                              "much more than the others"),
    "heavy-tailed": (("entry_tails",), +1, "W_K's entries heavier-tailed than Gaussian"),
}
NEAR_NULL, OTHER = "near-null", "other"
ALL_KINDS = (*KINDS, OTHER, NEAR_NULL)


def _centre(ds, axis) -> float:
    return 1.0 if str(ds["axis_effect"].sel(axis=axis).values) == "ratio" else 0.0


def _symmetric_unaligned(ds) -> np.ndarray:
    """(layer, head) bool: the symmetry stands with the alignment removed (flagged above the
    null); all False without ``symmetry_unaligned_flag``."""
    if "symmetry_unaligned_flag" not in ds:
        return np.zeros((ds.sizes["layer"], ds.sizes["head"]), bool)
    flag = ds["symmetry_unaligned_flag"].transpose("layer", "head").values.astype(bool)
    eff = ds["symmetry_unaligned_effect"].transpose("layer", "head").values
    return flag & (np.nan_to_num(eff) > 0)


def _unaligned_departure(ds) -> np.ndarray:
    """(layer, head) departure of ``symmetry_unaligned`` in the symmetry axis's band units
    (:func:`rmtbase.decision.order.axis_departure`); NaN without it."""
    if "symmetry_unaligned_effect" not in ds or "symmetry" not in ds["axis"].values:
        return np.full((ds.sizes["layer"], ds.sizes["head"]), np.nan)
    s = {"axis": "symmetry"}
    return np.abs(axis_departure(
        ds["symmetry_unaligned_effect"].transpose("layer", "head").values,
        ds["profile_band_lo"].sel(s).transpose("layer", "head").values,
        ds["profile_band_hi"].sel(s).transpose("layer", "head").values, "shift"))


def classify(ds: xr.Dataset):
    """(primary, kinds, axes): three (layer, head) arrays of str (module docstring) from a
    score's profile variables."""
    dep = departures(ds)
    tested = [str(a) for a in dep["axis"].values]
    L, H = ds.sizes["layer"], ds.sizes["head"]
    flag = {a: ds["profile_flag"].sel(axis=a).transpose("layer", "head").values.astype(bool)
            for a in tested}
    side = {a: np.sign(ds["profile_effect"].sel(axis=a).transpose("layer", "head").values
                       - _centre(ds, a)) for a in tested}
    size = {a: np.abs(dep.sel(axis=a).values) for a in tested}
    aligned = flag["alignment"] if "alignment" in flag else np.zeros((L, H), bool)
    aligned_any = aligned & ~_symmetric_unaligned(ds)
    unaligned = _unaligned_departure(ds)  # an aligned head's symmetry departs this far
    any_flag = np.zeros((L, H), bool)
    for a in tested:
        any_flag |= flag[a]
    primary = np.empty((L, H), dtype=object)
    kinds = np.empty((L, H), dtype=object)
    axes = np.empty((L, H), dtype=object)
    for i in range(L):
        for j in range(H):
            found = []  # (departure, kind, axis, signed departure)
            for kind, (names, sign, _) in KINDS.items():
                best = None
                for a in names:
                    if a in flag and flag[a][i, j] and side[a][i, j] == sign:
                        if best is None or size[a][i, j] > size[best][i, j]:
                            best = a
                if best is None or (kind == "symmetric" and aligned_any[i, j]):
                    continue
                far = float(size[best][i, j])
                if kind == "symmetric" and aligned[i, j]:  # sized without the alignment
                    best, far = "symmetry_unaligned", float(unaligned[i, j])
                found.append((far, kind, best, float(sign * far)))
            found.sort(key=lambda t: (-t[0], ALL_KINDS.index(t[1])))
            if found:
                primary[i, j] = found[0][1]
                kinds[i, j] = "+".join(k for _, k, _, _ in found)
                axes[i, j] = ", ".join(f"{a} {s:+.3g}" for _, _, a, s in found)
            else:
                primary[i, j] = OTHER if any_flag[i, j] else NEAR_NULL
                kinds[i, j] = primary[i, j]
                axes[i, j] = ", ".join(f"{a} {float(side[a][i, j] * size[a][i, j]):+.3g}"
                                       for a in tested if flag[a][i, j])
    return primary.astype(str), kinds.astype(str), axes.astype(str)


def add_head_kind(ds: xr.Dataset) -> None:
    """Add ``head_kind`` (primary), ``head_kinds`` and ``head_kind_axes`` over (layer, head) to
    a score with a profile (module docstring)."""
    primary, kinds, axes = classify(ds)
    dims = ("layer", "head")
    ds["head_kind"] = (dims, primary)
    ds["head_kind"].attrs["definition"] = (
        "primary kind: the kind (rmtbase.decision.kinds, docs/kinds.md) whose profile axis the "
        "head departs on most, in units of that axis's null band; near-null: no axis flagged")
    ds["head_kinds"] = (dims, kinds)
    ds["head_kinds"].attrs["definition"] = "every kind of the head, '+'-joined, largest first"
    ds["head_kind_axes"] = (dims, axes)
    ds["head_kind_axes"].attrs["definition"] = (
        "per kind the axis that put the head there and its departure (null band units)")


def kinds_of(ds: xr.Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(primary, kinds, axes) of a score: its ``head_kind*`` variables where it has them, else
    computed (:func:`classify`); None without a profile."""
    if "head_kind" in ds:
        get = [ds[v].transpose("layer", "head").values.astype(str)
               for v in ("head_kind", "head_kinds", "head_kind_axes") if v in ds]
        if len(get) == 3:
            return tuple(get)
    if "profile_effect" not in ds:
        return None
    return classify(ds)


def kind_counts(ds: xr.Dataset) -> dict[str, int]:
    """Primary kind -> number of heads (present heads only), kinds with none left out, largest
    count first (ties in :data:`ALL_KINDS` order); {} without a profile."""
    got = kinds_of(ds)
    if got is None:
        return {}
    primary = got[0]
    if "head_present" in ds:
        primary = primary[ds["head_present"].transpose("layer", "head").values.astype(bool)]
    names, counts = np.unique(primary.ravel(), return_counts=True)
    pairs = sorted(zip(names.tolist(), counts.tolist(), strict=True),
                   key=lambda t: (-t[1], ALL_KINDS.index(t[0]) if t[0] in ALL_KINDS else 99))
    return {str(k): int(n) for k, n in pairs}


def kinds_phrase(ds: xr.Dataset) -> str:
    """``14 directional, 9 aligned, 3 near-null`` (:func:`kind_counts`); "" without a profile."""
    return ", ".join(f"{n} {k}" for k, n in kind_counts(ds).items())


__all__ = ["ALL_KINDS", "KINDS", "NEAR_NULL", "OTHER", "add_head_kind", "classify",
           "kind_counts", "kinds_of", "kinds_phrase"]
