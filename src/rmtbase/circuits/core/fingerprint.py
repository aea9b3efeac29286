"""Is a composition this model's? A fingerprint of the weights, without hashing files.

The composition Dataset stores each head's ‖W_QK‖_F and ‖W_OV‖_F (``qk_norm``, ``ov_norm``)
as :func:`rmtbase.composition` read them; :func:`check_composition` recomputes both from the
circuit search's own reading of the model (:class:`.heads.HeadModel`) and refuses, naming the
head, where they differ by more than :data:`NORM_TOLERANCE`. Two readers of one file differ in
their bytes (dtype, layout) but not in these norms beyond float rounding."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...errors import InputError
from .graph import head_name
from .heads import HeadModel

__all__ = ["NORM_TOLERANCE", "check_composition", "head_norms"]


#: Largest |ln ratio| of a head's ‖W_QK‖_F or ‖W_OV‖_F (raw projections: no norm gain, bias or
#: multiplier) between the composition and the model at which both are taken for one model's
#: weights. Two readers of one checkpoint agree to 6e-7 (28 families in float32, SmolLM2's GGUF
#: Q4_1); another model of the same shape differs by percents.
NORM_TOLERANCE = 1e-4


def head_norms(hm: HeadModel) -> tuple[np.ndarray, np.ndarray]:
    """(‖W_QK‖_F, ‖W_OV‖_F) of every head ``(layer, head)`` from the model's raw projections,
    as :func:`rmtbase.composition` reads them: ‖AᵀB‖_F² = Σ (AᵀA)∘(BᵀB), in float64."""
    import torch

    qk = np.zeros((hm.n_layers, hm.n_heads))
    ov = np.zeros_like(qk)

    def norm(a, b) -> float:
        a, b = a.double(), b.double()
        return float(torch.sqrt(((a.T @ a) * (b.T @ b)).sum().clamp_min(0)))

    dh = hm.head_dim
    with torch.no_grad():
        for li in range(hm.n_layers):
            proj = hm.output_projection(li)
            for hi in range(hm.n_heads):
                wq = hm.head_weight(li, 0, hm.index(0, hi))[0]          # (d, d_h)
                wk = hm.head_weight(li, 1, hm.index(1, hi))[0]
                wv = hm.head_weight(li, 2, hm.index(2, hi))[0]
                lo = hi * dh
                wo = (proj.weight[:, lo:lo + dh] if isinstance(proj, torch.nn.Linear)
                      else proj.weight[lo:lo + dh].T)                   # (d, d_h)
                qk[li, hi], ov[li, hi] = norm(wq, wk), norm(wv, wo)
    return qk, ov


def check_composition(hm: HeadModel, composition: xr.Dataset) -> None:
    """The composition is this model's: same layer and head counts, and (without folded norm
    gains) every head's ‖W_QK‖_F and ‖W_OV‖_F within :data:`NORM_TOLERANCE` (ln ratio) of the
    model's: a fingerprint of its weights."""
    n_l, n_h = composition.sizes["layer_from"], composition.sizes["head_from"]
    if (n_l, n_h) != (hm.n_layers, hm.n_heads):
        raise InputError(f"the composition has {n_l} layers x {n_h} heads, the model "
                         f"{hm.n_layers} x {hm.n_heads}: not the same model")
    if int(composition.attrs.get("fold_ln", 0)) or not {"qk_norm", "ov_norm"} <= set(composition):
        return
    for name, got in zip(("qk_norm", "ov_norm"), head_norms(hm), strict=True):
        want = np.asarray(composition[name].transpose("layer", "head_to").values, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            off = np.abs(np.log(want / got))
        same = ((want == 0) & (got == 0)) | (~np.isfinite(want) & ~np.isfinite(got))
        off = np.where(same, 0.0, off)  # a zero (or non-finite) head in both
        worst = np.unravel_index(np.argmax(np.where(np.isnan(off), np.inf, off)), off.shape)
        if not off[worst] <= NORM_TOLERANCE:
            what = "W_QK" if name == "qk_norm" else "W_OV"
            raise InputError(
                f"the composition is not this model's: |{what}| of head "
                f"{head_name(*map(int, worst))} is {want[worst]:.6g} there and {got[worst]:.6g} "
                "in the model (compute the composition of this model)")
