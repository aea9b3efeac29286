"""QK-norm architectures: what the raw and the folded W_QK mean (tiny random models).

The raw factors are checked end to end in ``test_models_adapters`` (the model's own norm
modules applied to projections rebuilt from them). Here, ``fold_qk_norm=True``: the folded
projection divided by the per-token factor ρ of the documented formula (computed from the
*raw* projection: √(mean((P y)²) + ε) over each head's d_h, or over all heads for OLMo-2/3)
must equal the model's own normalised q and k, computed by its norm modules from its own
projection modules. That is exactly "the folded W_QK is the logit's bilinear form up to the
per-token 1/ρ factors".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_models_zoo import all_specs
from test_models_zoo import saved as zoo_saved

from rmtbase.errors import ModelError
from rmtbase.models import load_heads, model_info

SPECS = all_specs()
LABELS = {"olmo2": "rms_all_heads", "olmo3": "rms_all_heads", "qwen3": "rms_head",
          "qwen3_moe": "rms_head", "gemma3_text": "rms_head", "gemma3": "rms_head",
          "cohere": "layer_head", "stablelm": "layer_head", "phi": "layer_head"}
FOLDABLE = [n for n in LABELS if n != "phi"]


def _eps(model, layer, spec):
    attn = spec.attn(model, layer)
    norm = getattr(attn, "q_norm", None) or attn.q_layernorm
    norm = norm.norms[0] if hasattr(norm, "norms") else norm
    for key in ("eps", "variance_epsilon"):
        if getattr(norm, key, None) is not None:
            return float(getattr(norm, key))
    raise AssertionError("norm without eps")


def _rho(y, label, eps):
    """Per-token factor of the documented norm, y (heads, T, d_h) raw projection + bias."""
    if label == "layer_head":
        y = y - y.mean(axis=-1, keepdims=True)
    if label == "rms_all_heads":
        return np.sqrt((y ** 2).mean(axis=(0, 2), keepdims=True) + eps)
    return np.sqrt((y ** 2).mean(axis=-1, keepdims=True) + eps)


def _proj(w, b, x):
    y = np.einsum("hrd,td->htr", w.astype(np.float64), x)
    return y if b is None else y + b[:, None, :].astype(np.float64)


@pytest.mark.parametrize("name", list(SPECS))
def test_qk_norm_is_reported(tmp_path_factory, name):
    _, folder = zoo_saved(name, tmp_path_factory)
    assert model_info(folder).qk_norm == LABELS.get(name, "none")


@pytest.mark.parametrize("name", FOLDABLE)
def test_folded_factors_over_rho_are_the_models_normalised_q_and_k(tmp_path_factory, name):
    model, folder = zoo_saved(name, tmp_path_factory)
    spec = SPECS[name]
    info = model_info(folder)
    g = info.group_size
    x = np.random.default_rng(11).standard_normal((6, info.d))
    for raw, folded in zip(load_heads(folder), load_heads(folder, fold_qk_norm=True),
                           strict=True):
        i = raw.layer
        assert not np.allclose(folded.wq, raw.wq)  # the gains are not 1: the fold does work
        with torch.no_grad():
            q_mod, k_mod = spec.proj(model, i, torch.from_numpy(x).float())  # (T, heads, d_h)
            bq = 0 if raw.bq is None else torch.from_numpy(raw.bq)
            bk = 0 if raw.bk is None else torch.from_numpy(raw.bk[::g])
            q_ref, k_ref = spec.norm(model, i, q_mod + bq, k_mod + bk)
        q_ref = q_ref.double().numpy().transpose(1, 0, 2)  # (heads, T, d_h)
        k_ref = k_ref.double().numpy().transpose(1, 0, 2)
        eps = _eps(model, i, spec)
        for w_r, b_r, w_f, b_f, ref in ((raw.wq, raw.bq, folded.wq, folded.bq, q_ref),
                                        (raw.wk[::g], None if raw.bk is None else raw.bk[::g],
                                         folded.wk[::g],
                                         None if folded.bk is None else folded.bk[::g], k_ref)):
            rho = _rho(_proj(w_r, b_r, x), info.qk_norm, eps)
            ours = _proj(w_f, b_f, x) / rho
            np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-5 * np.abs(ref).max())


def test_fold_refused_for_a_norm_with_bias(tmp_path_factory):
    _, folder = zoo_saved("phi", tmp_path_factory)
    with pytest.raises(ModelError, match=r"fold_qk_norm: .*phi.* has a bias"):
        load_heads(folder, fold_qk_norm=True)


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2"])
def test_fold_is_a_no_op_without_qk_norm(tmp_path_factory, name):
    _, folder = zoo_saved(name, tmp_path_factory)
    for a, b in zip(load_heads(folder), load_heads(folder, fold_qk_norm=True), strict=True):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (no norm to
        #  fold: nothing is multiplied)
        np.testing.assert_array_equal(a.wq, b.wq)
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (no norm to
        #  fold: nothing is multiplied)
        np.testing.assert_array_equal(a.wk, b.wk)
