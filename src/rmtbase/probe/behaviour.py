"""What a head's attention does on text: per-head statistics of attention matrices (numpy).

One window's attention of one layer is ``A`` ``(heads, T, T)``, ``A[h, i, j]`` the weight query
``i`` puts on key ``j`` (rows sum to 1 over all keys; causal rows are 0 for ``j > i``).
``content`` marks text tokens (False for ``[CLS]``, ``[SEP]``, BOS, EOS); windows are never
padded (:mod:`.text`). Statistics average over content queries ``i ≥ 1``; keys are every
position, so a head parked on a special token shows high ``first_token``. Per head:

========== ===========================================================================
entropy     −Σ_j A[i, j] ln A[i, j], nats
prev_token  A[i, i−1], over queries whose ``i−1`` is a content token
next_token  A[i, i+1], over queries whose ``i+1`` is a content token; NaN for a causal model
first_token A[i, 0]: the sink (``[CLS]`` or BOS; the first text token without a BOS)
self        A[i, i]
mean_distance Σ_j A[i, j] |i − j|, in tokens
duplicate_token Σ_j A[i, j] over earlier keys ``j < i`` holding the same token id as ``i``,
            over queries that have at least one
induction   Σ_j A[i, j] over keys ``1 ≤ j ≤ i`` whose previous token ``j − 1`` holds the
            query's token id, over queries that have at least one
========== ===========================================================================

``duplicate_token`` and ``induction`` need the token ids (``ids``; else NaN); their key sets are
TransformerLens' head-detector patterns, averaged over the queries that have a target. Windows
pool as one set of queries (:func:`window_sums`, then :func:`finish`)."""

from __future__ import annotations

import numpy as np

#: The behaviour statistics, in output order.
BEHAVIOURS = ("entropy", "prev_token", "next_token", "first_token", "self", "mean_distance",
              "duplicate_token", "induction")

#: Units and one-line meanings (netCDF attrs, CSV documentation, figure titles).
DESCRIPTIONS = {
    "entropy": ("nats", "mean attention entropy over query positions"),
    "prev_token": ("1", "mean attention on the previous token, A[i, i-1]"),
    "next_token": ("1", "mean attention on the next token, A[i, i+1] (NaN for causal models)"),
    "first_token": ("1", "mean attention on position 0 ([CLS] / BOS), A[i, 0]"),
    "self": ("1", "mean attention on the query's own position, A[i, i]"),
    "mean_distance": ("tokens", "mean |i - j| under the attention row"),
    "duplicate_token": ("1", "mean attention on earlier occurrences of the query's token "
                             "(queries with one; TransformerLens' duplicate-token pattern)"),
    "induction": ("1", "mean attention on tokens after earlier occurrences of the query's "
                       "token (queries with one; TransformerLens' induction pattern)"),
}


def token_patterns(ids) -> tuple[np.ndarray, np.ndarray]:
    """(duplicate, induction) key masks ``(T, T)`` bool of token ids ``(T,)``: ``dup[i, j]``
    when ``j < i`` and ``ids[j] == ids[i]``; ``ind[i, j]`` when ``1 ≤ j ≤ i`` and
    ``dup[i, j − 1]`` (TransformerLens' detection patterns, module docstring)."""
    t = np.asarray(ids).ravel()
    dup = np.tril(t[:, None] == t[None, :], k=-1)
    ind = np.zeros_like(dup)
    ind[:, 1:] = dup[:, :-1]
    return dup, ind


def window_sums(attn, content, *, causal: bool,
                ids=None) -> dict[str, tuple[np.ndarray, int]]:
    """Per-head sums of each behaviour over one window's queries, with their query counts.

    attn: ``(heads, T, T)`` attention of one layer on one window. content: ``(T,)`` bool, True on
    text tokens. causal: ``next_token`` is then NaN. ids: ``(T,)`` token ids or None
    (``duplicate_token`` and ``induction`` then NaN). Returns ``{name: (sums (heads,), count)}``."""
    a = np.asarray(attn, dtype=np.float64)
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"attention must be (heads, T, T), got shape {a.shape}")
    c = np.asarray(content, dtype=bool)
    T = a.shape[1]
    if c.shape != (T,):
        raise ValueError(f"content mask must be ({T},), got shape {c.shape}")
    pos = np.arange(T)
    q = c & (pos >= 1)
    qi = pos[q]
    rows = a[:, q, :]                                           # (H, nq, T)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(rows > 0, rows * np.log(np.where(rows > 0, rows, 1.0)), 0.0)
    out = {"entropy": (-plogp.sum(axis=(1, 2)), qi.size)}
    prev = qi[c[qi - 1]]
    out["prev_token"] = (a[:, prev, prev - 1].sum(axis=1), prev.size)
    if causal:
        out["next_token"] = (np.zeros(a.shape[0]), 0)
    else:
        nq = qi[qi + 1 < T]
        nq = nq[c[nq + 1]]
        out["next_token"] = (a[:, nq, nq + 1].sum(axis=1), nq.size)
    out["first_token"] = (a[:, qi, 0].sum(axis=1), qi.size)
    out["self"] = (a[:, qi, qi].sum(axis=1), qi.size)
    dist = np.abs(qi[:, None] - pos[None, :]).astype(np.float64)  # (nq, T)
    out["mean_distance"] = ((rows * dist[None]).sum(axis=(1, 2)), qi.size)
    if ids is None:
        for k in ("duplicate_token", "induction"):
            out[k] = (np.zeros(a.shape[0]), 0)
        return out
    t = np.asarray(ids).ravel()
    if t.shape != (T,):
        raise ValueError(f"token ids must be ({T},), got shape {t.shape}")
    for k, mask in zip(("duplicate_token", "induction"), token_patterns(t), strict=True):
        m = mask[qi]                                            # (nq, T)
        has = m.any(axis=1)
        out[k] = ((rows[:, has, :] * m[has][None]).sum(axis=(1, 2)), int(has.sum()))
    return out


def add_sums(total: dict | None, part: dict) -> dict:
    """``total`` + ``part`` (both from :func:`window_sums`); ``total=None`` starts a sum."""
    if total is None:
        return {k: (np.array(s, dtype=np.float64), int(n)) for k, (s, n) in part.items()}
    return {k: (total[k][0] + part[k][0], total[k][1] + part[k][1]) for k in total}


def finish(total: dict) -> dict[str, np.ndarray]:
    """Means from pooled sums: ``{name: (heads,) float64}``, NaN where no query counted."""
    out = {}
    for k in BEHAVIOURS:
        s, n = total[k]
        out[k] = s / n if n > 0 else np.full(np.shape(s), np.nan)
    return out


def behaviours(attn, content=None, *, causal: bool, ids=None) -> dict[str, np.ndarray]:
    """The behaviour means of one attention tensor ``(heads, T, T)`` (module docstring);
    ``content=None``: every position is a text token; ``ids``: the token ids (needed for
    ``duplicate_token`` and ``induction``, NaN without)."""
    a = np.asarray(attn)
    if content is None:
        content = np.ones(a.shape[-1], dtype=bool)
    return finish(window_sums(a, content, causal=causal, ids=ids))


__all__ = ["BEHAVIOURS", "DESCRIPTIONS", "add_sums", "behaviours", "finish", "token_patterns",
           "window_sums"]
