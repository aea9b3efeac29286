"""What a removed source's output is replaced by: the counterfactual of path patching.

A source head S writes ``o_S = u_S W_O[S]`` into the residual, ``u_S = z_S r`` ``(N, T, d_h)``
its attention output times the clean post-norm scale (``r = 1`` for pre-norm blocks), over the
``N`` sequences of one run (all of one length ``T``). Removing S replaces ``o_S`` by a value the
model sees on inputs of the same distribution, ``o_cf = u_cf W_O[S]``; since ``o`` is linear in
``u``, the residual changes by exactly ``−Δ W_O[S]`` with ``Δ = u − u_cf``
(:meth:`Counterfactual.delta`):

- ``mean``: ``u_cf[n, t] = (1/N) Σ_n' u[n', t]``, the mean over the sequences **at each
  position** (token-wise mean ablation: Wang et al. 2022, arXiv:2211.00593; auto-circuit).
  Per position, not over positions too, because a head's output depends on the position in
  ways no content removes: the first token, and the first against the repeated half of the
  probe's sequences, where an induction or previous-token head writes something else.
- ``resample``: the output on another sequence at the same position: pairing ``p = 1 … P``
  uses sequence ``(n + p) mod N`` (``P = min(RESAMPLE_PAIRINGS, N − 1)``, each a derangement);
  an effect is the mean over the ``P`` pairings of its per-sequence values (causal scrubbing's
  resampling: Chan et al. 2022; Zhang & Nanda 2024, arXiv:2309.16042). For a first-order
  estimate the pairings' mean ``Δ`` is used (the estimate is linear in ``Δ``).
- ``zero``: ``u_cf = 0`` — a value the model never sees. A head with a large constant output
  then moves the receiver off its input distribution and looks causal when it carries nothing
  (Heimersheim & Nanda 2024, arXiv:2404.15255); kept to show such artefacts, never the default.

The default is ``mean``: it costs one patch per source (resample costs ``P``) and, on the zoo
and SmolLM2, agrees with resample on every edge it confirms (docs/path-patching.md)."""

from __future__ import annotations

from dataclasses import dataclass

#: The counterfactuals, the default first.
ABLATIONS = ("mean", "resample", "zero")
DEFAULT_ABLATION = "mean"
#: Pairings a resample effect is averaged over (fewer when there are fewer other sequences).
RESAMPLE_PAIRINGS = 4
#: A row stands when the other non-zero counterfactual keeps at least this share of its effect.
KEEP_FRACTION = 0.5


def other(ablation: str) -> str:
    """The other non-zero counterfactual of ``ablation`` (``zero``'s is the default)."""
    return {"mean": "resample", "resample": "mean"}.get(ablation, DEFAULT_ABLATION)


@dataclass(frozen=True)
class Counterfactual:
    """One counterfactual (``kind`` in :data:`ABLATIONS`) over ``n`` sequences."""

    kind: str
    n: int

    def __post_init__(self):
        from ..errors import InputError

        if self.kind not in ABLATIONS:
            raise InputError(f"ablation must be one of {', '.join(ABLATIONS)}, got {self.kind!r}")

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

        if self.kind == "zero":
            return u
        if self.kind == "mean":
            return u - u.mean(0, keepdim=True)
        if u.shape[0] < 2:
            return torch.zeros_like(u)
        if pairing is None:
            cf = sum(torch.roll(u, shifts=-(p + 1), dims=0) for p in range(self.pairings))
            return u - cf / self.pairings
        return u - torch.roll(u, shifts=-(int(pairing) + 1), dims=0)


def resolve(cf, n: int) -> Counterfactual:
    """``cf`` as a :class:`Counterfactual` over ``n`` sequences (None or a name accepted)."""
    if isinstance(cf, Counterfactual):
        return cf
    return Counterfactual("zero" if cf is None else str(cf), int(n))


__all__ = ["ABLATIONS", "DEFAULT_ABLATION", "KEEP_FRACTION", "RESAMPLE_PAIRINGS",
           "Counterfactual", "other", "resolve"]
