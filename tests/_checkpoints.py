"""Small local checkpoints for the trajectory, compare and HTML tests (no network).

:func:`trajectory` saves a random-init GPT-2 (d = 64, 4 heads, 2 layers, d_h = 16) as
``step0`` and copies with a planted query-key alignment of growing strength as ``step1``,
``step2``, …: every head's W_Q and W_K get the same rank-1 term a·e₀uᵀ (u a unit input
direction, one per head), so W_QK = W_Qᵀ W_K gains a² u uᵀ plus cross terms. a is a multiple of
the BBP-scale σ√d: the largest normalised eigenvalue grows with a, NPR and spectral entropy fall.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

D, H, L = 64, 4, 2
DH = D // H


def copy_folder(src, dst, skip=()):
    """Copy the files of checkpoint folder ``src`` into a new folder ``dst`` (except ``skip``)."""
    Path(dst).mkdir(parents=True)
    for p in Path(src).iterdir():
        if p.name not in skip:
            shutil.copy(p, Path(dst) / p.name)
    return Path(dst)


def edit_config(folder, **changes):
    """Set keys of ``folder/config.json`` (a value None removes the key)."""
    path = Path(folder) / "config.json"
    cfg = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path.write_text(json.dumps(cfg))


def gpt2(folder, *, seed=0, n_layer=L, n_embd=D, n_head=H, vocab_size=50):
    """Save a random-init GPT-2 into ``folder``; returns the folder."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.GPT2Config(n_embd=n_embd, n_head=n_head, n_layer=n_layer, vocab_size=vocab_size,
                        n_positions=32, bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    model.save_pretrained(folder)
    return Path(folder)


def trajectory(root, strengths=(0.0, 1.5, 3.0, 6.0), *, seed=0) -> list[Path]:
    """Folders ``root/step<i>``: the same random-init GPT-2 with the planted alignment at
    ``strengths`` (units of σ√d, σ the init std 0.02). Returns them in step order."""
    import torch
    import transformers as tf

    root = Path(root)
    base = gpt2(root / "_init", seed=seed)
    rng = np.random.default_rng(seed)
    dirs = {}
    for layer in range(L):
        for h in range(H):
            u = rng.standard_normal(D)
            dirs[layer, h] = torch.tensor(u / np.linalg.norm(u), dtype=torch.float32)
    out = []
    for i, a in enumerate(strengths):
        model = tf.GPT2LMHeadModel.from_pretrained(base)
        amp = float(a) * 0.02 * np.sqrt(D)
        with torch.no_grad():
            for layer in range(L):
                w = model.transformer.h[layer].attn.c_attn.weight  # Conv1D (d, 3d), input-major
                for h in range(H):
                    u = dirs[layer, h]
                    w[:, h * DH] += amp * u          # W_Q row 0 of head h
                    w[:, D + h * DH] += amp * u      # W_K row 0 of head h
        folder = root / f"step{i}"
        model.save_pretrained(folder)
        out.append(folder)
    return out


def random_checkpoint(folder, kind, dtype, seed):
    """A 12-layer, 12-head model at d = 384, d_h = 32 (shipped tables) with transformers' own
    N(0, 0.02²) initialisation, saved with save_pretrained: BERT, or LLaMA with 4 key heads."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    if kind == "bert":
        cfg = tf.BertConfig(hidden_size=384, num_attention_heads=12, num_hidden_layers=12,
                            intermediate_size=64, vocab_size=64, max_position_embeddings=32)
        model = tf.BertModel(cfg)
    else:
        cfg = tf.LlamaConfig(hidden_size=384, num_attention_heads=12, num_key_value_heads=4,
                             num_hidden_layers=12, intermediate_size=64, vocab_size=64)
        model = tf.LlamaForCausalLM(cfg)
    model.to(dtype).save_pretrained(folder)
    return folder
