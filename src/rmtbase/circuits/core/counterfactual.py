"""What a removed source's output is replaced by: the counterfactual of path patching.

A source head S writes ``o_S = u_S W_O[S]`` into the residual, ``u_S = z_S r`` ``(N, T, d_h)``
its attention output times the clean post-norm scale (``r = 1`` for pre-norm blocks), over the
``N`` sequences of one run (all of one length ``T``). Removing S replaces ``o_S`` by a value the
model sees on inputs of the same distribution, ``o_cf = u_cf W_O[S]``; since ``o`` is linear in
``u``, the residual changes by exactly ``−Δ W_O[S]`` with ``Δ = u − u_cf``
(:meth:`Counterfactual.delta`):

- ``mean``: ``u_cf[n, t] = (1/(N−1)) Σ_{n'≠n} u[n', t]``, the mean over the other sequences
  **at each position** (token-wise mean ablation: Wang et al. 2022, arXiv:2211.00593), leaving
  the sequence's own output out so that a removed source keeps no ``1/N`` share of what it
  replaces; hence ``Δ = N/(N−1) · (u − ū)``.
  Per position, not over positions too, because a head's output depends on the position in
  ways no content removes: the first token, and the first against the repeated half of the
  probe's sequences, where an induction or previous-token head writes something else.
- ``resample``: the output on another sequence at the same position: pairing ``p = 1 … P``
  uses sequence ``(n + p) mod N`` (:func:`partners`; ``P = min(RESAMPLE_PAIRINGS, N − 1)``);
  an effect is the mean over the ``P`` pairings of its per-sequence values (causal scrubbing's
  resampling: Chan et al. 2022; Zhang & Nanda 2024, arXiv:2309.16042); a first-order estimate
  uses the pairings' mean ``Δ``.
- ``corrupted`` (the task search only: it has paired prompts): the output on the prompt's
  corrupted twin (Wang et al. 2022); the task search's ``resample`` takes the first pairing
  alone (``P = 1``: it runs many edge sets a prompt), its ``mean`` :func:`leave_one_out`.
- ``zero``: ``u_cf = 0``, a value the model never sees: a large constant output moves the
  receiver off its input distribution and looks causal when it carries nothing (Heimersheim
  & Nanda 2024, arXiv:2404.15255); kept to show such artefacts, never the default.

Each name means one thing in both searches (:data:`HEAD`, :data:`TASK`; ``--counterfactual``).
The head search's default, ``mean``, costs one patch per source (resample ``P``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The head search's counterfactuals and the task search's, each search's default first.
HEAD = ("mean", "resample", "zero")
TASK = ("corrupted", "mean", "resample", "zero")
ABLATIONS, DEFAULT_ABLATION, DEFAULT_TASK = HEAD, HEAD[0], TASK[0]
#: Pairings a resample effect is averaged over (fewer when there are fewer other sequences).
RESAMPLE_PAIRINGS = 4
#: A row stands when the other non-zero counterfactual keeps at least this share of its effect.
KEEP_FRACTION = 0.5


def check_kind(kind, task: bool = False) -> str:
    """``kind`` if the head search (``task``: the task search) has it, else one line."""
    from ...errors import InputError

    kinds = TASK if task else HEAD
    if kind not in kinds:
        why = " (corrupted needs a task's paired prompts: --task)" if kind == "corrupted" else ""
        raise InputError(f"the counterfactual is one of {', '.join(kinds)}, got {kind!r}{why}")
    return kind


def other(ablation: str) -> str:
    """The other non-zero counterfactual of ``ablation`` (``zero``'s is the default)."""
    return {"mean": "resample", "resample": "mean"}.get(ablation, DEFAULT_ABLATION)


#: The task search's check of each counterfactual (:mod:`..task.confirm`): the head search's
#: :func:`other`, and ``mean`` for the corrupted twin.
TASK_OTHER = {"corrupted": "mean", **{k: other(k) for k in HEAD}}


@dataclass(frozen=True)
class Counterfactual:
    """One counterfactual (``kind`` in :data:`ABLATIONS`) over ``n`` sequences."""

    kind: str
    n: int

    def __post_init__(self):
        check_kind(self.kind)

    @property
    def pairings(self) -> int:
        """Patches an effect is averaged over: ``P`` for resample, else 1."""
        if self.kind != "resample":
            return 1
        return max(1, min(RESAMPLE_PAIRINGS, int(self.n) - 1))

    def delta(self, u, pairing: int | None = 0):
        """``Δ = u − u_cf`` for ``u`` ``(N, T, …)`` (module docstring); ``pairing`` ``0 … P−1``
        picks a resample pairing, ``None`` their mean (for first-order estimates)."""
        import torch

        n = u.shape[0]
        if self.kind == "zero":
            return u
        if n < 2:
            return torch.zeros_like(u)
        if self.kind == "mean":  # = u − leave_one_out(Σu, u, n), exactly 0 for a constant u
            return (u - u.mean(0, keepdim=True)) * (n / (n - 1))
        rows = np.arange(n)
        if pairing is None:
            cf = sum(u[partners(rows, n, p)] for p in range(self.pairings))
            return u - cf / self.pairings
        return u - u[partners(rows, n, int(pairing))]


def partners(rows, n: int, pairing: int = 0) -> np.ndarray:
    """Resample's pairing ``p`` (from 0): row ``i`` of ``n`` reads sequence ``(i + p + 1) mod
    n`` (module docstring: the head search averages ``P`` pairings, the task search takes 0)."""
    return (np.asarray(rows) + int(pairing) + 1) % int(n)


def leave_one_out(total, own, n: int):
    """Mean ablation's value ``(Σ − own) / (n − 1)``, for prompts in batches (``delta`` takes
    its change as ``n/(n − 1) · (u − ū)``, exactly 0 for a constant ``u``)."""
    return (total - own) / (n - 1)



__all__ = ["ABLATIONS", "DEFAULT_ABLATION", "DEFAULT_TASK", "HEAD", "KEEP_FRACTION",
           "RESAMPLE_PAIRINGS", "TASK", "TASK_OTHER", "Counterfactual", "check_kind",
           "leave_one_out", "other", "partners"]
