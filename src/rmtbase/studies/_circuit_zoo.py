"""Small GPT-2s trained with recipes the circuit search was not developed on, checked by
``tests/test_circuits_zoo.py`` against its own causal truth. d 64, 4 heads, MLPs 4 d. Recipes
(:data:`RECIPES`): ``short3``, ``mlp2``, ``mlp2s`` (layer 0's attention output × 0.1),
``deep4``, ``markov3`` (no repeats), ``const2`` (``mlp2`` with a frozen layer-0 head writing one
vector of norm 1 at every position, :func:`plant_constant`), ``mlp3s`` (the task benchmark's). :func:`trained_folder` caches
``save_pretrained`` folders under ``<cache>/circuit_zoo/``, written atomically."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from ._induction_train import Recipe, _losses, batch
from ._mlp_induction import build_model, cached_training
from ._mlp_induction import cache_root as shared_cache_root


@dataclasses.dataclass(frozen=True)
class ZooRecipe:
    """A :class:`Recipe` plus ``data`` (``"repeats"`` or ``"markov"``) and ``attn0_scale`` (a fixed
    factor on layer 0's attention output)."""

    base: Recipe
    data: str = "repeats"
    attn0_scale: float = 1.0
    markov_alpha: float = 0.2
    #: Norm of the output a frozen layer-0 head writes at every position (0: none;
    #: :func:`plant_constant`).
    const_head: float = 0.0


RECIPES = {
    "short3": ZooRecipe(Recipe(vocab=40, l_min=2, l_max=10, gap_max=3, n_positions=128,
                               n_layer=3, steps=3000, n_checkpoints=2)),
    "mlp2": ZooRecipe(Recipe(n_layer=2, steps=2000, n_checkpoints=2)),
    "mlp2s": ZooRecipe(Recipe(n_layer=2, steps=2000, n_checkpoints=2), attn0_scale=0.1),
    "deep4": ZooRecipe(Recipe(vocab=40, l_min=2, l_max=10, gap_max=3, n_positions=128,
                              n_layer=4, steps=3000, n_checkpoints=2)),
    "markov3": ZooRecipe(Recipe(vocab=40, n_positions=128, n_layer=3, steps=800,
                                n_checkpoints=2, skip_p=0.0), data="markov"),
    "const2": ZooRecipe(Recipe(n_layer=2, steps=2000, n_checkpoints=2), const_head=1.0),
    # the task benchmark's own (benchmarks/task_zoo.py --suite): layer 0's attention output
    #  × 0.1 in a 3-layer model, the key path through MLP0
    "mlp3s": ZooRecipe(Recipe(vocab=40, l_min=2, l_max=10, gap_max=3, n_positions=128,
                              n_layer=3, steps=3000, n_checkpoints=2), attn0_scale=0.1),
}


def markov_matrix(z: ZooRecipe) -> np.ndarray:
    """(V + 1, V + 1) transition matrix of the chain (row 0, BOS, uniform over 1 … V; column
    0 never reached), the same for every seed (a property of the 'language')."""
    v = z.base.vocab
    rng = np.random.default_rng(4242)
    p = np.zeros((v + 1, v + 1))
    p[0, 1:] = 1.0 / v
    p[1:, 1:] = rng.dirichlet(np.full(v, z.markov_alpha), size=v)
    return p


def markov_batch(rng: np.random.Generator, n: int, z: ZooRecipe):
    """(ids, position ids, repeat mask all False) of ``n`` chains of ``T`` tokens after BOS,
    positions at a random offset as in :func:`._induction_train.batch`."""
    r = z.base
    cum = markov_matrix(z).cumsum(1)
    ids = np.zeros((n, r.seq_len), np.int64)
    for t in range(1, r.seq_len):
        u = rng.random((n, 1))
        ids[:, t] = np.minimum((u > cum[ids[:, t - 1]]).sum(1), r.vocab)
    off = rng.integers(0, r.n_positions - r.seq_len + 1, size=(n, 1))
    return ids, (off + np.arange(r.seq_len)[None, :]).astype(np.int64), \
        np.zeros(ids.shape, bool)


def _data(z: ZooRecipe):
    return (lambda rng, n: markov_batch(rng, n, z)) if z.data == "markov" else \
        (lambda rng, n: batch(rng, n, z.base))


def _scaled(net, scale: float):
    """Layer 0's attention output multiplied by ``scale`` through a forward hook (the weights
    are trained as they are; :func:`fold_scale` writes the factor into them)."""
    if scale == 1.0:
        return None
    return net.transformer.h[0].attn.register_forward_hook(
        lambda mod, args, out: (out[0] * scale,) + tuple(out[1:]))


def plant_constant(net, norm: float, seed: int) -> list:
    """Layer 0's last head made to write one vector of norm ``norm`` (a seeded random
    direction) at every position of every sequence, and frozen: its query, key and value
    weights and biases are zero but for a value bias of 1 on its first dimension (so every
    value, and the output whatever the pattern, is that one vector), one row of its ``W_O``
    holds the vector, and the gradients of those entries are masked to zero (AdamW without
    weight decay then leaves them as they are). Returns the gradient hooks' handles."""
    import torch

    attn = net.transformer.h[0].attn
    d, n_head = net.config.n_embd, net.config.n_head
    dh, h = d // n_head, n_head - 1
    cols = [j * d + h * dh + i for j in range(3) for i in range(dh)]
    rows = slice(h * dh, (h + 1) * dh)
    gen = torch.Generator().manual_seed(int(seed))
    vec = torch.randn(d, generator=gen)
    with torch.no_grad():
        attn.c_attn.weight[:, cols] = 0.0
        attn.c_attn.bias[cols] = 0.0
        attn.c_attn.bias[2 * d + h * dh] = 1.0
        attn.c_proj.weight[rows] = 0.0
        attn.c_proj.weight[h * dh] = vec * (norm / vec.norm())
    masks = []
    for p, idx in ((attn.c_attn.weight, (slice(None), cols)), (attn.c_attn.bias, cols),
                   (attn.c_proj.weight, rows)):
        m = torch.ones_like(p)
        m[idx] = 0.0
        masks.append(p.register_hook(lambda g, m=m: g * m))
    return masks


def fold_scale(net, scale: float) -> None:
    """Write ``scale`` into layer 0's ``c_proj`` so the saved model computes what the hooked did."""
    import torch

    with torch.no_grad():
        net.transformer.h[0].attn.c_proj.weight.mul_(scale)
        net.transformer.h[0].attn.c_proj.bias.mul_(scale)


def _eval_losses(net, ev, repeats: bool) -> dict:
    import torch

    net.eval()
    with torch.no_grad():
        lo, lr_, lo_ = _losses(net, *ev)
    net.train()
    out = {"loss": float(lo), "other_loss": float(lo_)}
    if repeats:
        out["repeat_loss"] = float(lr_)
    return out


def train(name: str, seed: int) -> dict:
    """Train ``RECIPES[name]`` from ``seed``; returns ``model`` (the weights with any
    ``attn0_scale`` folded in), ``cpu_s`` and the evaluation losses at the start and end."""
    import torch

    z = RECIPES[name]
    r = z.base
    torch.set_num_threads(1)
    t0 = time.process_time()
    net = build_model(r, seed)
    hook = _scaled(net, z.attn0_scale)
    frozen = plant_constant(net, z.const_head, seed) if z.const_head else []
    draw = _data(z)
    rng = np.random.default_rng([seed, 1])
    ev = tuple(torch.from_numpy(a) for a in draw(np.random.default_rng([seed, 2]),
                                                 r.eval_batch))
    repeats = z.data != "markov"
    opt = torch.optim.AdamW(net.parameters(), lr=r.lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / r.warmup))
    start = _eval_losses(net, ev, repeats)
    net.train()
    for _ in range(r.steps):
        ids, pos, rep = (torch.from_numpy(a) for a in draw(rng, r.batch))
        loss, rloss, _ = _losses(net, ids, pos, rep)
        opt.zero_grad(set_to_none=True)
        (loss + rloss if repeats else loss).backward()
        opt.step()
        sched.step()
    end = _eval_losses(net, ev, repeats)
    for h in frozen:
        h.remove()
    if hook is not None:
        hook.remove()
        fold_scale(net, z.attn0_scale)
    net.eval()
    return {"model": net, "cpu_s": time.process_time() - t0, "start": start, "end": end}


def cache_root() -> Path:
    """``circuit_zoo`` in the user cache."""
    return shared_cache_root("circuit_zoo")


def trained_folder(name: str, seed: int, root: Path | None = None) -> Path:
    """``RECIPES[name]`` trained from ``seed``: its cached folder, else trained and written."""
    def build():
        z = RECIPES[name]
        res = train(name, int(seed))
        return res["model"], {
            "recipe_name": name, "seed": int(seed), "recipe": dataclasses.asdict(z.base),
            "data": z.data, "attn0_scale": z.attn0_scale, "const_head": z.const_head,
            "cpu_s": res["cpu_s"],
            "start": res["start"], "end": res["end"], "ln_vocab": float(np.log(z.base.vocab))}

    return cached_training(cache_root() if root is None else root, name, seed, RECIPES,
                           "recipe", build)


__all__ = ["RECIPES", "ZooRecipe", "cache_root", "markov_batch", "markov_matrix",
           "plant_constant", "train", "trained_folder"]
