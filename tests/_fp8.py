"""Write a model as an official block-FP8 checkpoint (DeepSeek-V3 / Qwen3-FP8 layout).

Every 2-D projection weight of the decoder layers (``*_proj.weight``) is stored as
``F8_E4M3`` with a float32 ``weight_scale_inv`` of shape (⌈out/128⌉, ⌈in/128⌉), each tile
quantised with s = max|tile|/448 (:func:`rmtbase.models._fp8.quantize`); everything else keeps
its dtype; ``config.json`` gets ``quantization_config`` {"quant_method": "fp8",
"activation_scheme": "dynamic", "weight_block_size": [128, 128]}. The file is written by
``safetensors.torch`` from torch ``float8_e4m3fn`` tensors.
"""

from __future__ import annotations

import json

import numpy as np


def write_fp8(model, folder) -> dict[str, np.ndarray]:
    """Save ``model`` (a transformers model) to ``folder`` as block FP8; returns the
    dequantised float32 value of each FP8 tensor (what a reader must give back)."""
    import torch
    from safetensors.torch import save_file

    from rmtbase.models._fp8 import quantize

    model.save_pretrained(folder)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    out, want = {}, {}
    for name, t in state.items():
        if name.endswith("_proj.weight") and t.ndim == 2 and ".layers." in name:
            q, s = quantize(t.float().numpy())
            out[name] = torch.from_numpy(q.view(np.uint8).copy()).view(torch.float8_e4m3fn)
            out[name + "_scale_inv"] = torch.from_numpy(s)
            want[name] = out[name].float().numpy() * np.repeat(
                np.repeat(s, 128, 0), 128, 1)[: t.shape[0], : t.shape[1]]
        else:
            out[name] = t
    if "lm_head.weight" in out and "model.embed_tokens.weight" in out \
            and out["lm_head.weight"].data_ptr() == out["model.embed_tokens.weight"].data_ptr():
        out["lm_head.weight"] = out["lm_head.weight"].clone()
    save_file(out, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                  "fmt": "e4m3", "weight_block_size": [128, 128]}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return want
