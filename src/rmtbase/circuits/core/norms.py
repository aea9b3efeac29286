"""A transformers norm module read as numbers: its kind, gain, bias and epsilon, for the
recomputed heads (:mod:`.heads`) and the folded weights (:mod:`.fold`)."""

from __future__ import annotations


def norm_spec(mod):
    """``(kind, gain, bias, eps)`` of a norm module, kind ``"ln"``, ``"rms"`` or ``"none"``; gain,
    bias None for 1, 0 (Gemma's gain is ``1 + weight``); None for an unknown module."""
    import torch

    name = type(mod).__name__
    if isinstance(mod, torch.nn.Identity):
        return ("none", None, None, 0.0)
    if isinstance(mod, torch.nn.LayerNorm):
        return ("ln", mod.weight, mod.bias, float(mod.eps))
    if name == "OlmoLayerNorm":
        return ("ln", None, None, 1e-5)
    if name.startswith("Gemma") and name.endswith("RMSNorm"):
        return ("rms", 1.0 + mod.weight.float(), None, float(mod.eps))
    if hasattr(mod, "variance_epsilon") and getattr(mod, "weight", None) is not None:
        if mod.weight.ndim != 1:
            return None
        kind = "ln" if "LayerNorm" in name else "rms"
        return (kind, mod.weight, None, float(mod.variance_epsilon))
    return None


__all__ = ["norm_spec"]
