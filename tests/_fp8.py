"""Write a model as an FP8 checkpoint: block FP8 (DeepSeek-V3 / Qwen3-FP8 layout, E4M3 or
E5M2) or per-channel E4M3 (compressed-tensors ``float-quantized``).

Every 2-D projection weight of the decoder layers (``*_proj.weight``) is stored as an 8-bit
float written by ``safetensors.torch`` from torch ``float8_e4m3fn`` / ``float8_e5m2`` tensors;
everything else keeps its dtype.

- ``fmt="e4m3"`` / ``"e5m2"``: beside it a float32 ``weight_scale_inv`` of shape
  (⌈out/128⌉, ⌈in/128⌉), each tile quantised with s = max|tile|/FP8_MAX
  (:func:`rmtbase.models._fp8.quantize`); ``config.json`` gets ``quantization_config``
  {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": fmt,
  "weight_block_size": [128, 128]}.
- ``fmt="channel"``: beside it ``weight_scale`` (out, 1) in ``scale_dtype``, s_r =
  max|row|/448 (:func:`rmtbase.models._fp8.quantize_rows`); ``quantization_config`` is
  compressed-tensors' (llm-compressor's ``FP8`` scheme: channel-wise symmetric float weights).
"""

from __future__ import annotations

import json

import numpy as np

_CT = {"quant_method": "compressed-tensors", "format": "float-quantized",
       "quantization_status": "compressed", "ignore": ["lm_head"],
       "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
           "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
           "dynamic": False, "observer": "minmax"}}}}


def write_fp8(model, folder, fmt: str = "e4m3") -> dict[str, np.ndarray]:
    """Save ``model`` (a transformers model) to ``folder`` as FP8 (module docstring); returns
    the dequantised float32 value of each FP8 tensor (what a reader must give back), computed
    here with torch's own float8 → float32 conversion."""
    import torch
    from safetensors.torch import save_file

    from rmtbase.models._fp8 import quantize, quantize_rows

    dtype = torch.float8_e5m2 if fmt == "e5m2" else torch.float8_e4m3fn
    model.save_pretrained(folder)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    out, want = {}, {}
    for name, t in state.items():
        if name.endswith("_proj.weight") and t.ndim == 2 and ".layers." in name:
            if fmt == "channel":
                q, s = quantize_rows(t.float().numpy())
                full = s
                out[name + "_scale"] = torch.from_numpy(s)
            else:
                q, s = quantize(t.float().numpy(), fmt)
                full = np.repeat(np.repeat(s, 128, 0), 128, 1)[: t.shape[0], : t.shape[1]]
                out[name + "_scale_inv"] = torch.from_numpy(s)
            out[name] = torch.from_numpy(q.view(np.uint8).copy()).view(dtype)
            want[name] = out[name].float().numpy() * full
        else:
            out[name] = t
    if "lm_head.weight" in out and "model.embed_tokens.weight" in out \
            and out["lm_head.weight"].data_ptr() == out["model.embed_tokens.weight"].data_ptr():
        out["lm_head.weight"] = out["lm_head.weight"].clone()
    save_file(out, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((folder / "config.json").read_text())
    cfg["quantization_config"] = _CT if fmt == "channel" else {
        "quant_method": "fp8", "activation_scheme": "dynamic", "fmt": fmt,
        "weight_block_size": [128, 128]}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    return want
