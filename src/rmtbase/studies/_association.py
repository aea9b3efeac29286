"""Rank association of per-head weight variables with per-head behaviours (three tests).

- ``rho``: Spearman ρ(w, b); ``p_rho``: b's ranks permuted over all heads, two-sided, add-one
  (Phipson & Smyth 2010). A depth trend shared by both counts.
- ``partial_rho``: partial Spearman controlling for the covariates (log σ_Q σ_K) and layer
  indicators (rank residuals of least squares on [1, covariate ranks, layer indicators]);
  ``p_partial``: b's residuals permuted (Freedman & Lane 1984), two-sided. NaN for a variable
  the covariates determine.
- ``p_within_layer``: ρ against b shuffled within each layer, two-sided about the permutation
  mean: tests ρ's within-layer part.

q columns: Benjamini–Hochberg over the whole table, one family per p column."""

from __future__ import annotations

import numpy as np

__all__ = ["association_table", "bh", "layer_permutations"]


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x).astype(np.float64)


def _unit(r: np.ndarray) -> np.ndarray:
    """Rows centred and scaled to unit norm along the last axis (then Pearson = dot)."""
    c = r - r.mean(axis=-1, keepdims=True)
    n = np.linalg.norm(c, axis=-1, keepdims=True)
    return np.divide(c, n, out=np.zeros_like(c), where=n > 0)


def layer_permutations(layer: np.ndarray, n_perm: int, seed: int) -> np.ndarray:
    """(n_perm, n) index arrays, each permuting positions only within equal ``layer`` labels."""
    rng = np.random.default_rng(seed)
    n = layer.size
    out = np.tile(np.arange(n), (n_perm, 1))
    for lab in np.unique(layer):
        idx = np.flatnonzero(layer == lab)
        out[:, idx] = idx[rng.permuted(np.tile(np.arange(idx.size), (n_perm, 1)), axis=1)]
    return out


def bh(p) -> np.ndarray:
    """Benjamini–Hochberg q of ``p`` (NaN entries stay NaN and do not count in the family)."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok])]
    q = p[order] * m / np.arange(1, m + 1)
    out[order] = np.minimum(np.minimum.accumulate(q[::-1])[::-1], 1.0)
    return out


def _residuals(r: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Rows of ``r`` (k, n) minus their least-squares fit on ``design`` (n, m)."""
    coef, *_ = np.linalg.lstsq(design, r.T, rcond=None)
    return r - (design @ coef).T


def _two_sided(null: np.ndarray, stat: np.ndarray, centre) -> np.ndarray:
    exceed = (np.abs(null - centre) >= np.abs(stat - centre)[None, :] - 1e-12).sum(axis=0)
    return (1 + exceed) / (1 + null.shape[0])


def association_table(weights: dict[str, np.ndarray], behaviours: dict[str, np.ndarray],
                      layer: np.ndarray, covariates: dict[str, np.ndarray], *,
                      n_perm: int, seed: int = 0) -> list[dict]:
    """Rows ``{weight, behaviour, n, rho, p_rho, partial_rho, p_partial, p_within_layer, q_*}``
    over finite flattened per-head arrays; ``covariates`` controlled for beside the layer."""
    layer = np.asarray(layer)
    n = layer.size
    rng = np.random.default_rng(seed)
    full = np.stack([rng.permutation(n) for _ in range(n_perm)])
    within = layer_permutations(layer, n_perm, seed + 1)
    labels = np.unique(layer)
    design = np.column_stack([np.ones(n), *(_ranks(c) for c in covariates.values()),
                              *((layer == lab).astype(float) for lab in labels[1:])])
    wnames = list(weights)
    rw = np.stack([_ranks(weights[w]) for w in wnames])                 # (W, n)
    wx = _unit(rw)
    res_w = _residuals(rw, design)
    # a variable the covariates determine has no partial correlation
    degenerate = np.linalg.norm(res_w, axis=1) <= 1e-9 * np.linalg.norm(rw - rw.mean(1, keepdims=True), axis=1)
    ux = _unit(res_w)
    rows = []
    for b, y in behaviours.items():
        ry = _ranks(y)
        uy = _unit(ry)
        rho = wx @ uy
        p_rho = _two_sided(_unit(ry[full]) @ wx.T, rho, 0.0)
        res_y = _residuals(ry[None, :], design)[0]
        part = ux @ _unit(res_y)
        p_part = _two_sided(_unit(res_y[full]) @ ux.T, part, 0.0)
        null_in = _unit(ry[within]) @ wx.T
        p_in = _two_sided(null_in, rho, null_in.mean(axis=0))
        part = np.where(degenerate, np.nan, part)
        p_part = np.where(degenerate, np.nan, p_part)
        rows += [dict(weight=w, behaviour=b, n=int(n), rho=float(rho[i]), p_rho=float(p_rho[i]),
                      partial_rho=float(part[i]), p_partial=float(p_part[i]),
                      p_within_layer=float(p_in[i])) for i, w in enumerate(wnames)]
    for col in ("rho", "partial", "within_layer"):
        for r, q in zip(rows, bh([r[f"p_{col}"] for r in rows]), strict=True):
            r[f"q_{col}"] = float(q)
    return rows
