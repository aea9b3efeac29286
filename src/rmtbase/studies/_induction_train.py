"""Training a small GPT-2 to contain an induction circuit (study ``circuits``).

**Data** (:func:`batch`): ``[BOS, x_1 … x_{T-1}]`` of random tokens ``1 … V`` with segments of
random length ``L ∈ [l_min, l_max]`` repeated after a random gap, position ids at a random
offset: only induction predicts a second copy's tokens 2 … L (Olsson et al. 2022); ``skip_p``:
``x_{t+1} = π(x_{t−1})`` with that probability, so previous-token heads form early. **Model**:
2 layers, attention only. **Training**: AdamW, seeded, one torch thread; the **repeat loss** is
on a fixed batch's second-copy tokens 2 … L (chance ln V)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every setting of one training run; the defaults form the circuit on seeds 0–4."""

    vocab: int = 32             # content tokens 1..V; id 0 is BOS
    seq_len: int = 48           # T, BOS included
    l_min: int = 2
    l_max: int = 5
    gap_max: int = 3
    n_positions: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 100
    steps: int = 1500
    n_checkpoints: int = 10
    eval_batch: int = 256
    loss_on: str = "both"       # "all" positions, only the "repeat" tokens, or "both" summed
    init_std: float = 0.02      # GPT-2's initializer_range
    tie: bool = False           # GPT-2 ties input / output embeddings; here untied
    layout: str = "chunks"      # "chunks" (many short repeats) or "single" (one repeat)
    skip_p: float = 0.5         # P(x_{t+1} = π(x_{t-1})) in the random tokens (docstring)


def skip_map(r: Recipe) -> np.ndarray:
    """The fixed permutation π of ``1 … V`` of the skip-bigram statistics (index 0 unused),
    the same for every seed (a property of the 'language', not of the run)."""
    perm = np.zeros(r.vocab + 1, dtype=np.int64)
    perm[1:] = np.random.default_rng(12345).permutation(r.vocab) + 1
    return perm


def batch(rng: np.random.Generator, n: int, r: Recipe):
    """(ids (n, T) int64, position ids (n, T), repeat mask (n, T) bool: True where the token
    is one of the second copy's tokens 2 … L, i.e. predictable by induction)."""
    T = r.seq_len
    ids = rng.integers(1, r.vocab + 1, size=(n, T))
    ids[:, 0] = 0
    if r.skip_p > 0:
        perm = skip_map(r)
        hit = rng.random((n, T)) < r.skip_p
        for t in range(3, T):
            ids[:, t] = np.where(hit[:, t], perm[ids[:, t - 2]], ids[:, t])
    rep = np.zeros((n, T), dtype=bool)
    if r.layout == "chunks":
        for b in range(n):
            s = 1
            while s < T:
                L = int(rng.integers(r.l_min, r.l_max + 1))
                t = s + L + int(rng.integers(0, r.gap_max + 1))
                m = min(L, T - t)
                if m > 0:
                    ids[b, t:t + m] = ids[b, s:s + m]
                    rep[b, t + 1:t + m] = True
                s = t + L
        off = rng.integers(0, r.n_positions - T + 1, size=(n, 1))
        return ids.astype(np.int64), (off + np.arange(T)[None, :]).astype(np.int64), rep
    for b in range(n):
        L = int(rng.integers(r.l_min, r.l_max + 1))
        g = int(rng.integers(0, min(r.gap_max, T - 1 - 2 * L) + 1))
        s = int(rng.integers(1, T - 2 * L - g + 1))
        t = s + L + g
        ids[b, t:t + L] = ids[b, s:s + L]
        rep[b, t + 1:t + L] = True
    off = rng.integers(0, r.n_positions - T + 1, size=(n, 1))
    pos = off + np.arange(T)[None, :]
    return ids.astype(np.int64), pos.astype(np.int64), rep


def build_model(r: Recipe, seed: int):
    """An attention-only GPT2LMHeadModel (module docstring), initialised from ``seed``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=r.vocab + 1, n_positions=r.n_positions, n_embd=r.n_embd,
                     n_layer=r.n_layer, n_head=r.n_head, n_inner=1, resid_pdrop=0.0,
                     initializer_range=r.init_std,
                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                     tie_word_embeddings=r.tie)
    torch.manual_seed(seed)
    net = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for block in net.transformer.h:
            block.mlp.c_proj.weight.zero_()
            block.mlp.c_proj.bias.zero_()
            for p in block.mlp.parameters():
                p.requires_grad_(False)
    return net


def _losses(net, ids, pos, rep):
    """(mean loss over all predicted tokens, repeat loss, other loss) of one batch."""
    import torch.nn.functional as F

    logits = net(input_ids=ids, position_ids=pos).logits[:, :-1]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                         reduction="none").reshape(ids.shape[0], -1)
    m = rep[:, 1:]
    return ce.mean(), ce[m].mean(), ce[~m].mean()


def checkpoint_steps(r: Recipe) -> list[int]:
    """The steps at which checkpoints are kept: step 0 and ``n_checkpoints`` − 1 more,
    evenly spaced to ``steps``."""
    return sorted({int(round(x)) for x in np.linspace(0, r.steps, r.n_checkpoints)})


def train(r: Recipe, seed: int, *, on_checkpoint=None, eval_every: int = 50):
    """Train one model; returns the loss curve (``step``, ``loss``, ``repeat_loss``,
    ``other_loss`` every ``eval_every`` steps), checkpoint steps, the model and ``cpu_s``;
    ``on_checkpoint(step, net)`` is called at each :func:`checkpoint_steps` step."""
    import torch

    torch.set_num_threads(1)
    t0 = time.process_time()
    net = build_model(r, seed)
    rng = np.random.default_rng([seed, 1])
    e_ids, e_pos, e_rep = (torch.from_numpy(a) for a in batch(np.random.default_rng([seed, 2]),
                                                              r.eval_batch, r))
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=r.lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / r.warmup))
    keep = set(checkpoint_steps(r))
    curve: dict[str, list] = {"step": [], "loss": [], "repeat_loss": [], "other_loss": []}

    def evaluate(step):
        net.eval()
        with torch.no_grad():
            lo, lr_, lo_ = _losses(net, e_ids, e_pos, e_rep)
        net.train()
        for k, v in zip(("step", "loss", "repeat_loss", "other_loss"),
                        (step, float(lo), float(lr_), float(lo_)), strict=True):
            curve[k].append(v)

    net.train()
    for step in range(r.steps + 1):
        if step % eval_every == 0 or step in keep:
            evaluate(step)
        if step in keep and on_checkpoint is not None:
            net.eval()
            on_checkpoint(step, net)
            net.train()
        if step == r.steps:
            break
        ids, pos, rep = (torch.from_numpy(a) for a in batch(rng, r.batch, r))
        loss, rloss, _ = _losses(net, ids, pos, rep)
        if r.loss_on == "repeat":
            loss = rloss
        elif r.loss_on == "both":
            loss = loss + rloss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    net.eval()
    return {"curve": {k: np.asarray(v) for k, v in curve.items()},
            "checkpoints": sorted(keep), "model": net, "cpu_s": time.process_time() - t0}


__all__ = ["Recipe", "batch", "build_model", "checkpoint_steps", "train"]
