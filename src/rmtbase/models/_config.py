"""Reading attention sizes from a Hugging Face ``config.json`` (a plain dict), strictly.

A value of the wrong type is a one-line :class:`~rmtbase.errors.ModelError` naming key and
value, never coerced. Defaults for absent keys are those of the ``transformers`` config class."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ModelError


@dataclass(frozen=True)
class Dims:
    """Attention sizes read from a config (``n_kv_heads < n_heads`` under GQA/MQA)."""

    d: int
    d_h: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    rotary_fraction: float = 0.0


def _label(cfg: dict) -> str:
    return str(cfg.get("model_type") or "model")


def cfg_get(cfg: dict, *names: str, default=None, required: bool = True):
    """The first of ``names`` present (and not None) in ``cfg``; ModelError if none is."""
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    if required and default is None:
        raise ModelError(f"config of a {_label(cfg)} model lacks {' / '.join(names)}")
    return default


def cfg_int(cfg: dict, *names: str, default: int | None = None) -> int:
    """Like :func:`cfg_get`, as a positive int (a bool or a fractional number is refused)."""
    value = cfg_get(cfg, *names, default=default)
    key = next((n for n in names if cfg.get(n) is not None), names[0])
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelError(f"config value {key}={value!r} is not an integer")
    if not math.isfinite(value) or value != int(value) or int(value) < 1:  # NaN, Infinity
        raise ModelError(f"config value {key}={value!r} is not a positive integer")
    return int(value)


def cfg_bool(cfg: dict, name: str, default: bool) -> bool:
    """Boolean flag ``name`` (absent or null: ``default``); anything but a JSON bool is refused."""
    value = cfg.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelError(f"config value {name}={value!r} of a {_label(cfg)} model is not "
                         "true/false")
    return value


def cfg_fraction(value, name: str) -> float:
    """A number in [0, 1] (rotary fractions); bools and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ModelError(f"config value {name}={value!r} is not a number in [0, 1]")
    return float(value)


def rotary_fraction(cfg: dict, default: float) -> float:
    """Fraction of head dimensions under RoPE, from old (``rotary_pct``,
    ``partial_rotary_factor``) or transformers ≥ 5 (``rope_parameters``) config keys."""
    for key in ("rotary_pct", "partial_rotary_factor"):
        if cfg.get(key) is not None:
            return cfg_fraction(cfg[key], key)
    for key in ("rope_parameters", "rope_scaling"):
        rope = cfg.get(key)
        if isinstance(rope, dict) and rope.get("partial_rotary_factor") is not None:
            return cfg_fraction(rope["partial_rotary_factor"], "partial_rotary_factor")
    return float(default)


def mha_dims(cfg: dict, label: str, *, width=("hidden_size",), heads=("num_attention_heads",),
             layers=("num_hidden_layers",), rotary_fraction: float = 0.0) -> Dims:
    """Dims of a plain multi-head config (d_h = d / n_heads, no GQA); ``width``, ``heads``,
    ``layers``: config keys tried in order. ModelError if n_heads does not divide d."""
    d = cfg_int(cfg, *width)
    n_heads = cfg_int(cfg, *heads)
    if d % n_heads:
        raise ModelError(f"{label} config: {width[0]}={d} is not divisible by "
                         f"{heads[0]}={n_heads}")
    return Dims(d=d, d_h=d // n_heads, n_layers=cfg_int(cfg, *layers), n_heads=n_heads,
                n_kv_heads=n_heads, rotary_fraction=rotary_fraction)


def gqa_dims(cfg: dict, *, rotary_default: float = 1.0, kv_key: str = "num_key_value_heads",
             head_dim: bool = True) -> Dims:
    """Dims of a LLaMA-style config (``num_key_value_heads`` default: no GQA; ``head_dim`` default
    d / n_heads). ``head_dim=False`` where the attention ignores a ``head_dim`` key."""
    label = _label(cfg)
    d = cfg_int(cfg, "hidden_size")
    n_heads = cfg_int(cfg, "num_attention_heads")
    n_kv = cfg_int(cfg, kv_key, default=n_heads)
    if n_heads % n_kv:
        raise ModelError(f"{label} config: num_attention_heads={n_heads} is not a multiple of "
                         f"{kv_key}={n_kv}")
    if head_dim and cfg.get("head_dim") is not None:
        d_h = cfg_int(cfg, "head_dim")
    elif d % n_heads:
        raise ModelError(f"{label} config: hidden_size={d} is not divisible by "
                         f"num_attention_heads={n_heads}" + (" and head_dim is not given"
                                                             if head_dim else ""))
    else:
        d_h = d // n_heads
    return Dims(d=d, d_h=d_h, n_layers=cfg_int(cfg, "num_hidden_layers"), n_heads=n_heads,
                n_kv_heads=n_kv, rotary_fraction=rotary_fraction(cfg, rotary_default))
