"""The output metrics of a task, per prompt, from the logits at the last position (or the
mean over the positions a model reads, :func:`metric`).

- ``logit_diff`` (default): ``ℓ[answer] − ℓ[wrong]`` (Wang et al. 2022, arXiv:2211.00593);
- ``logprob``: ``log softmax(ℓ)[answer]``;
- ``kl``: ``KL(p_clean ‖ p) = Σ_v p_clean,v (log p_clean,v − log p_v)``, ``p_clean`` the full
  model's distribution on the clean prompt (Conmy et al. 2023, arXiv:2304.14997). It is 0 for
  the full model and grows as the circuit loses the model's output: lower is better.

A circuit's score compares the metric with the full model's ``m(M)`` and with the empty
graph's ``m(∅)`` (every edge counterfactual): the normalised faithfulness ``(m(C) − m(∅)) /
(m(M) − m(∅))`` (1 for the full graph, 0 for the empty one; MIB's CMD, Mueller et al. 2025,
arXiv:2504.13151) serves every metric; the ratio ``m(C) / m(M)`` is also given for
``logit_diff``."""

from __future__ import annotations

from ...errors import InputError

METRICS = ("logit_diff", "logprob", "kl")


def check_metric(name: str) -> str:
    if name not in METRICS:
        raise InputError(f"--metric must be one of {', '.join(METRICS)}, got {name!r}")
    return name


def metric(name: str, logits, answer, wrong, ref_logprobs=None):
    """``(n,)`` metric ``name`` of ``logits`` ``(n, V)``; ``answer``, ``wrong`` ``(n,)`` long
    tensors; ``ref_logprobs`` ``(n, V)`` the full model's clean log-probabilities (``kl``).
    A model that reads ``P`` positions gives ``logits`` ``(n, P, V)`` with ``answer``,
    ``wrong`` ``(n, P)`` (and ``ref_logprobs`` ``(n, P, V)``): the metric is the mean over
    the positions of each position's."""
    import torch

    check_metric(name)
    if logits.ndim == 3:
        n, p = logits.shape[:2]
        ref = None if ref_logprobs is None else ref_logprobs.reshape(n * p, -1)
        flat = metric(name, logits.reshape(n * p, -1), answer.reshape(n * p),
                      wrong.reshape(n * p), ref)
        return flat.reshape(n, p).mean(1)
    rows = torch.arange(logits.shape[0], device=logits.device)
    if name == "logit_diff":
        return logits[rows, answer] - logits[rows, wrong]
    lp = torch.log_softmax(logits.double(), dim=-1)
    if name == "logprob":
        return lp[rows, answer]
    if ref_logprobs is None:
        raise InputError("the kl metric needs the full model's clean log-probabilities")
    ref = ref_logprobs.double()
    return (ref.exp() * (ref - lp)).sum(-1)


__all__ = ["METRICS", "check_metric", "metric"]
