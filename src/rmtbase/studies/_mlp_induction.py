"""Small GPT-2s with MLPs and ≥ 3 layers trained to contain an induction circuit: the models
``tests/test_circuits_trained.py`` checks the circuit tools on. Data and training as
:mod:`rmtbase.studies._induction_train`, with trained MLPs (4 d); :func:`trained_folder` caches
``save_pretrained`` folders ``<cache>/mlp_induction/<config>_seed<k>`` with ``train_info.json``."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import numpy as np

from ..files.strict_json import dumps
from ._induction_train import Recipe, _losses, batch

#: The configurations (each trained on ≥ 3 seeds). The data recipe is
#: ``study circuits``' default; depth, width of the head count, MLPs and steps change. Seeds
#: 0-2 of each form a previous-token -> induction circuit (153-214 CPU-s each): docs/circuits.md's
#: table.
CONFIGS = {
    "3x4d64": Recipe(n_layer=3, n_head=4, n_embd=64, steps=2000, n_checkpoints=2),
    "4x4d64": Recipe(n_layer=4, n_head=4, n_embd=64, steps=2000, n_checkpoints=2),
    "3x8d64": Recipe(n_layer=3, n_head=8, n_embd=64, steps=2000, n_checkpoints=2),
}


def build_model(r: Recipe, seed: int):
    """A ``GPT2LMHeadModel`` of ``r``'s shape with trained MLPs (hidden 4 d), seeded."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=r.vocab + 1, n_positions=r.n_positions, n_embd=r.n_embd,
                     n_layer=r.n_layer, n_head=r.n_head, n_inner=4 * r.n_embd,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     initializer_range=r.init_std, bos_token_id=0, eos_token_id=0,
                     tie_word_embeddings=r.tie, attn_implementation="eager")
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg)


def _repeat_loss(net, ev) -> float:
    import torch

    net.eval()
    with torch.no_grad():
        out = float(_losses(net, *ev)[1])
    net.train()
    return out


def train(r: Recipe, seed: int) -> dict:
    """Train one model; returns ``model``, ``cpu_s``, ``repeat_loss_start`` and
    ``repeat_loss_end`` (chance ln V)."""
    import torch

    torch.set_num_threads(1)
    t0 = time.process_time()
    net = build_model(r, seed)
    rng = np.random.default_rng([seed, 1])
    ev = tuple(torch.from_numpy(a) for a in batch(np.random.default_rng([seed, 2]),
                                                  r.eval_batch, r))
    opt = torch.optim.AdamW(net.parameters(), lr=r.lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / r.warmup))
    start = _repeat_loss(net, ev)
    net.train()
    for _ in range(r.steps):
        ids, pos, rep = (torch.from_numpy(a) for a in batch(rng, r.batch, r))
        loss, rloss, _ = _losses(net, ids, pos, rep)
        opt.zero_grad(set_to_none=True)
        (loss + rloss).backward()
        opt.step()
        sched.step()
    end = _repeat_loss(net, ev)
    net.eval()
    return {"model": net, "cpu_s": time.process_time() - t0, "repeat_loss_start": start,
            "repeat_loss_end": end}


def cache_root(name: str = "mlp_induction") -> Path:
    """``<name>`` in the user cache (:func:`..files.user_cache.cache_dir`): trained models."""
    from ..files.user_cache import cache_dir

    return cache_dir() / name


def cached_training(root: Path, name: str, seed: int, known, what: str, build) -> Path:
    """``root/<name>_seed<seed>`` if it holds ``train_info.json``, else ``build()``'s ``(model,
    info)`` written whole; a ``name`` not in ``known`` refused in one line."""
    if name not in known:
        from ..errors import InputError

        raise InputError(f"unknown {what} {name!r}; known: {', '.join(known)}")
    folder = Path(root) / f"{name}_seed{int(seed)}"
    if (folder / "train_info.json").is_file():
        return folder
    return write_whole(folder, *build())


def trained_folder(config: str, seed: int, root: Path | None = None) -> Path:
    """``CONFIGS[config]`` trained from ``seed``: its cached folder, else trained and written."""
    def build():
        r = CONFIGS[config]
        res = train(r, int(seed))
        return res["model"], {
            "config": config, "seed": int(seed), "recipe": dataclasses.asdict(r),
            "cpu_s": res["cpu_s"], "repeat_loss_start": res["repeat_loss_start"],
            "repeat_loss_end": res["repeat_loss_end"], "ln_vocab": float(np.log(r.vocab))}

    return cached_training(cache_root() if root is None else root, config, seed, CONFIGS,
                           "configuration", build)


def write_whole(folder: Path, model, info: dict) -> Path:
    """``model.save_pretrained`` and ``train_info.json`` (``info``) into ``folder``, written to
    a temporary sibling and renamed, so the folder is complete or absent."""
    tmp = folder.parent / f".{folder.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from .._library_bars import no_library_bars

    with no_library_bars():
        model.save_pretrained(tmp)
    (tmp / "train_info.json").write_text(dumps(info, indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


__all__ = ["CONFIGS", "build_model", "cache_root", "cached_training", "train", "trained_folder",
           "write_whole"]
