"""Every adapter against the model's own computation (tiny random models, no network).

Two independent checks per architecture (and per layout variant: Falcon's three fused orders,
GPT-BigCode with and without multi-query):

1. Projections: the per-head logits x_iᵀ W_Qᵀ W_K x_j rebuilt from the extracted factors equal
   q_i · k_j from the model's own projection modules (biases subtracted, no norm, no RoPE),
   for a random input; both the saved-folder path and the loaded-object path (which for ViT and
   the MoE models uses transformers 5's in-memory names and stacked experts).
2. End to end: the model's own attention probabilities (eager attention, float64, all
   positions at 0 so RoPE is the identity) satisfy log p_ij − log p_i0 = s_ij − s_i0 with
   s_ij rebuilt from the extracted factors and biases, where x is the attention module's actual
   input. s_ij = scale · N_q(W_Q x_i + b_q) · N_k(W_K x_j + b_k) (+ position bias), with the
   model's *own* q/k norm modules N (QK-norm architectures; identity elsewhere), its own logit
   scale and soft-cap, and the position bias (MPNet relative buckets, ALiBi) the attention
   module receives. This check needs no knowledge of how the fused tensors are laid out (NeoX
   interleaving, GPT-2 Conv1D, GQA grouping, Falcon's groups).

Tolerances: extracted weights are exact float32 copies and the projection check runs in
float64, so differences are rounding only (≤ 1e-10 of the logits' scale). Several eager
attention implementations and the QK-norm modules compute in float32 even for a float64
model, so the end-to-end check allows 1e-5 of the logits' scale (float32 rounding of p is
~1e-7 relative); the logits themselves are O(1), so a layout error would show up at order 1.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from test_models_zoo import all_specs, forward_kwargs, rope_identity
from test_models_zoo import saved as zoo_saved

from rmtbase.models import SUPPORTED, load_heads, model_info

SPECS = all_specs()
NAMES = list(SPECS)
T_TOKENS = 7


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """name -> (float32 model, folder with its safetensors checkpoint), built once."""
    return {name: zoo_saved(name, tmp_path_factory) for name in NAMES}


def test_every_supported_architecture_is_covered():
    assert sorted(SUPPORTED) == sorted({spec.arch for spec in SPECS.values()})


def _logits_from_factors(layer, x):
    """Per-head q_i = W_Q x_i and k_j = W_K x_j, (n_heads, T, d_h) each, from the extracted
    factors in float64; the logits are q_i · k_j = x_iᵀ W_Qᵀ W_K x_j."""
    wq = layer.wq.astype(np.float64)
    wk = layer.wk.astype(np.float64)
    q = np.einsum("hrd,td->htr", wq, x)
    k = np.einsum("hrd,td->htr", wk, x)
    return q, k


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("path", ["folder", "object"])
def test_logits_match_projection_modules(saved, name, path):
    model32, folder = saved[name]
    spec = SPECS[name]
    ref = copy.deepcopy(model32).double()
    layers = list(load_heads(folder if path == "folder" else model32))
    info = model_info(folder if path == "folder" else model32)
    assert len(layers) == info.n_layers == 2
    assert (info.n_heads, info.n_kv_heads, info.d_h) == (4, spec.n_kv, spec.d_h)
    assert info.architecture == spec.arch
    rng = np.random.default_rng(7)
    x = rng.standard_normal((T_TOKENS, info.d))
    group = info.n_heads // info.n_kv_heads
    for lh in layers:
        assert lh.wq.dtype == np.float32 and lh.wk.dtype == np.float32
        assert lh.wq.shape == lh.wk.shape == (info.n_heads, info.d_h, info.d)
        with torch.no_grad():
            q_ref, k_ref = spec.proj(ref, lh.layer, torch.from_numpy(x))
        q_ref, k_ref = q_ref.numpy(), k_ref.numpy()  # (T, n, d_h), (T, n_kv, d_h)
        q, k = _logits_from_factors(lh, x)
        for h in range(info.n_heads):
            ours = q[h] @ k[h].T  # (T, T)
            theirs = q_ref[:, h] @ k_ref[:, h // group].T
            scale = np.abs(theirs).max()
            assert scale > 0
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10 * scale)


def model_logits(spec, model, lh, x, *, group):
    """s (n_heads, T, T) rebuilt from the extracted raw factors of ``lh`` and the model's own
    norm modules and logit scale, for attention inputs x (T, d)."""
    q, k = _logits_from_factors(lh, x)  # (n_heads, T, d_h) each, keys GQA-expanded
    if lh.bq is not None:
        q = q + lh.bq[:, None, :]
    if lh.bk is not None:
        k = k + lh.bk[:, None, :]
    d_h = q.shape[-1]
    if spec.norm is not None:  # the model's own q/k norm, on (T, heads, d_h); keys un-expanded
        with torch.no_grad():
            qt, kt = spec.norm(model, lh.layer, torch.from_numpy(q.transpose(1, 0, 2)),
                               torch.from_numpy(k[::group].transpose(1, 0, 2)))
        q = qt.double().numpy().transpose(1, 0, 2)
        k = np.repeat(kt.double().numpy().transpose(1, 0, 2), group, axis=0)
    s = torch.from_numpy(np.einsum("hir,hjr->hij", q, k))
    s = spec.logits(model, s) if spec.logits is not None else s / np.sqrt(d_h)
    return s.numpy()


@pytest.mark.parametrize("name", NAMES)
def test_attention_probabilities_match_rebuilt_logits(saved, name):
    model32, folder = saved[name]
    spec = SPECS[name]
    ref = copy.deepcopy(model32).double().eval()
    info = model_info(folder)
    layers = list(load_heads(folder))
    captured = {}

    def hook(i):
        def fn(module, args, kwargs):
            hs = args[0] if args else kwargs["hidden_states"]
            extra = None if spec.bias is None else spec.bias(args, kwargs, info.d_h)
            captured[i] = (hs.detach()[0].numpy().copy(),
                           None if extra is None else extra.detach().numpy().copy())
        return fn

    handles = [spec.attn(ref, i).register_forward_pre_hook(hook(i), with_kwargs=True)
               for i in range(info.n_layers)]
    if spec.rope_hook:
        handles += [m.register_forward_hook(rope_identity) for m in ref.modules()
                    if type(m).__name__.endswith("RotaryEmbedding")]
    with torch.no_grad():
        out = ref(**forward_kwargs(spec, ref), output_attentions=True)
    for h_ in handles:
        h_.remove()
    for lh in layers:
        x, extra = captured[lh.layer]
        n_tok = x.shape[0]
        assert x.shape == (n_tok, info.d) and n_tok >= 5
        probs = out.attentions[lh.layer][0].numpy()  # (n_heads, T, T)
        s = model_logits(spec, ref, lh, x, group=info.group_size)
        if extra is not None:
            s = s + extra
        for i in range(1, n_tok):
            cols = np.arange(i + 1) if spec.causal else np.arange(n_tok)
            got = np.log(probs[:, i, cols]) - np.log(probs[:, i, :1])
            want = s[:, i, cols] - s[:, i, :1]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(s).max()))
        # the check has teeth: logits vary across keys by far more than the tolerance
        assert np.ptp(s[:, -1, :], axis=-1).min() > 0.1


def test_gqa_expansion_is_repeat_interleave(saved):
    model32, folder = saved["llama"]
    lh = next(load_heads(folder))
    wk_raw = model32.model.layers[0].self_attn.k_proj.weight.detach().numpy()  # (2*24, 64)
    heads = wk_raw.reshape(2, 24, 64)
    # query heads 0,1 -> key head 0; 2,3 -> key head 1
    for i, j in enumerate([0, 0, 1, 1]):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lh.wk[i], heads[j])
    assert lh.bq is None and lh.bk is None


def test_neox_rows_are_interleaved_per_head(saved):
    """A chunk(3) split of the fused rows would give a different W_Q: guard against it."""
    model32, folder = saved["gpt_neox"]
    lh = next(load_heads(folder))
    fused = model32.gpt_neox.layers[0].attention.query_key_value.weight.detach().numpy()
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wq[1], fused[48:64])  # head 1 rows: (1, q) -> 3*16 .. +16
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wk[1], fused[64:80])
    naive_q = fused[:64].reshape(4, 16, 64)
    assert not np.array_equal(lh.wq[1], naive_q[1])


def test_gpt2_conv1d_is_transposed(saved):
    model32, folder = saved["gpt2"]
    lh = next(load_heads(folder))
    w = model32.transformer.h[0].attn.c_attn.weight.detach().numpy()  # (d, 3d) input-major
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wq[2], w[:, 32:48].T)
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wk[2], w[:, 64 + 32:64 + 48].T)


def test_model_info_fields(saved):
    neox = model_info(saved["gpt_neox"][1])
    assert neox.architecture == "gpt_neox" and neox.model_class == "GPTNeoXForCausalLM"
    assert neox.rotary_fraction == pytest.approx(0.25) and neox.source == "folder"
    llama = model_info(saved["llama"][1])
    assert (llama.d, llama.d_h, llama.n_heads, llama.n_kv_heads) == (64, 24, 4, 2)
    assert llama.group_size == 2 and llama.rotary_fraction == 1.0
    gptj = model_info(saved["gptj"][1])
    assert gptj.rotary_fraction == pytest.approx(8 / 16)
    assert model_info(saved["bert"][1]).rotary_fraction == 0.0
    opt = model_info(saved["opt"][0])  # loaded object; d is hidden_size, not word_embed_proj_dim
    assert opt.d == 64 and opt.source == "object" and opt.model_class == "OPTForCausalLM"
