"""Heads left undecided by a budgeted null: their p bracketed, the flags BH on the upper ends.

Where the growth budget stopped a null table while some head's decision was open
(:mod:`rmtbase.scoring.stopping.budget`), each head's statistics p is known only to lie in a
bracket [p_lo, p_hi] (with probability ≥ 1 − ε, ε = the stopping rule's STOP_ERROR). The head p
(:mod:`.combined`: p = min(1, 2·min(p_S, p_A))) is monotone in p_S, so its bracket is that of
p_S put through it. With BH (1995) over all heads at α:

- ``head_flag`` = BH over the upper ends p_hi. As p_lo ≤ p ≤ p_hi head by head and BH is
  monotone, BH(p_hi) ⊆ BH(p) ⊆ BH(p_lo); a head outside BH(p_lo) \\ BH(p_hi) is flagged by all
  three or by none, so it keeps its flag on p exactly, and its p and q are those it has.
- ``head_undecided`` = BH(p_lo) \\ BH(p_hi): its flag could go either way within its bracket;
  it is reported "undecided at N draws" with its bracket, neither flagged nor cleared.

FDR: on the event that every p lies in its bracket (probability ≥ 1 − ε) the flags are BH on
p-values p_hi ≥ p, conservative p-values, for which BH's guarantee holds under the conditions
it holds for p (independence or PRDS: Benjamini & Hochberg 1995, Benjamini & Yekutieli 2001);
the event's complement adds at most ε: FDR ≤ α + ε.
"""

from __future__ import annotations

import numpy as np

from .combined import combined_p
from .significance import benjamini_hochberg


def bracket_flags(p_lo, p_hi, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(flag, undecided), (layer, head): BH at ``alpha`` over ``p_hi``, and the heads BH flags
    over ``p_lo`` but not over ``p_hi`` (module docstring). NaN p: neither."""
    lo = np.asarray(p_lo, dtype=np.float64)
    hi = np.asarray(p_hi, dtype=np.float64)
    if not np.isfinite(hi).any():
        z = np.zeros(hi.shape, dtype=bool)
        return z, z.copy()
    flag_hi = benjamini_hochberg(hi, alpha)[0]
    flag_lo = benjamini_hochberg(lo, alpha)[0]
    return flag_hi, flag_lo & ~flag_hi


def mark_undecided(ds, p_lo_stats, p_hi_stats, draws: str, alpha: float):
    """Write the budgeted decision into ``ds`` (in place; returns it): ``head_flag`` (BH over the
    upper ends), ``head_undecided``, ``head_p_lo`` / ``head_p_hi`` (the head p's bracket, NaN
    where decided), attrs ``undecided_heads`` and ``undecided_draws`` (``draws``: the tables'
    sizes in words). ``p_*_stats``: the bracket of the statistics p (``head_p_statistics``, or
    ``head_p_value`` where the score has no axes)."""
    lo_s = np.asarray(p_lo_stats, dtype=np.float64)
    hi_s = np.asarray(p_hi_stats, dtype=np.float64)
    p = ds["head_p_value"].transpose("layer", "head").values.astype(np.float64)
    if "head_p_axes" in ds:
        p_axes = ds["head_p_axes"].transpose("layer", "head").values.astype(np.float64)
        lo, hi = combined_p(lo_s, p_axes)[0], combined_p(hi_s, p_axes)[0]
    else:
        lo, hi = lo_s, hi_s
    lo, hi = np.fmin(lo, p), np.fmax(hi, p)  # the bracket holds the p there is
    flag, undecided = bracket_flags(lo, hi, alpha)
    dims = ("layer", "head")
    ds["head_flag"] = (dims, flag)
    ds["head_undecided"] = (dims, undecided, {"definition": (
        "the growth budget stopped the null while this head's flag could still go either way "
        "within [head_p_lo, head_p_hi]: neither flagged nor cleared (rmtbase.decision.undecided)")})
    ds["head_p_lo"] = (dims, np.where(undecided, lo, np.nan), {"definition": (
        "lower end of an undecided head's p bracket (probability >= 1 - stop_error)")})
    ds["head_p_hi"] = (dims, np.where(undecided, hi, np.nan), {"definition": (
        "upper end of an undecided head's p bracket; head_flag is BH over these upper ends")})
    ds.attrs["undecided_heads"] = int(undecided.sum())
    ds.attrs["undecided_draws"] = str(draws)
    return ds


def undecided_line(ds) -> str | None:
    """"N heads undecided at D draws: p in [lo, hi]" for a score with undecided heads, else
    None (lo, hi: the widest bracket among them)."""
    n = int(ds.attrs.get("undecided_heads", 0) or 0)
    if not n or "head_p_lo" not in ds:
        return None
    lo = float(np.nanmin(ds["head_p_lo"].values))
    hi = float(np.nanmax(ds["head_p_hi"].values))
    return (f"{n} head{'s' if n != 1 else ''} undecided at {ds.attrs.get('undecided_draws', '')} "
            f"draws: p in [{lo:.3g}, {hi:.3g}] (the growth budget stopped the null; "
            "--growth-budget none draws until settled)")


__all__ = ["bracket_flags", "mark_undecided", "undecided_line"]
