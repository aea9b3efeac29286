"""load_components: whole per-layer matrices against the models' own computation (no network).

For every architecture of the zoo, on the saved folder and the loaded object:

- names and shapes (nn.Linear (out, in) layout; GQA k/v at n_kv_heads·d_h rows; MoE experts);
- q and k rows are the per-head factors of load_heads, reshaped;
- v and o, with every linear bias of the model set to 0: the attention module's own output is
  o · concat_h(P_h · V_{h//g}) with V = x vᵀ and P the model's attention probabilities (BERT
  and RoBERTa's self-attention module stops before o: its output is the context itself);
- gated FFNs: the model's MLP module gives down · (act(gate x) ⊙ up x) — this fixes which half
  of a fused gate/up projection (Phi-3, ModernBERT) is the activated one; MoE experts: the
  model's experts module routing every token to expert j gives the same with expert j's
  matrices (stacked in the loaded object, per-expert tensors in the folder).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from test_models_zoo import all_specs, build, forward_kwargs, rope_identity
from test_models_zoo import saved as zoo_saved

from rmtbase.errors import InputError, ModelError
from rmtbase.models import LayerComponents, load_components, load_heads, model_info

SPECS = all_specs()
NAMES = list(SPECS)
GATED = {"ffn_gate", "ffn_up", "ffn_down"}
PLAIN = {"ffn_in", "ffn_out"}
CONTEXT_ONLY = {"bert", "roberta"}  # BertSelfAttention returns the context, before o
#: attention modules that add their residual input (positional argument 1) to the output
WITH_RESIDUAL = {"bloom"}  # BloomAttention.forward: dropout_add(dense(ctx), residual)


def _ffn_names(arch):
    return PLAIN if arch in {"gpt2", "gpt_neox", "bert", "roberta", "opt", "gptj", "phi",
                             "falcon", "gpt_bigcode", "starcoder2", "mpnet", "distilbert",
                             "vit", "bloom"} else GATED


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("path", ["folder", "object"])
def test_names_shapes_and_qk_rows(tmp_path_factory, name, path):
    model, folder = zoo_saved(name, tmp_path_factory)
    src = folder if path == "folder" else model
    info = model_info(src)
    n, kv, d_h, d = info.n_heads, info.n_kv_heads, info.d_h, info.d
    heads = list(load_heads(src))
    layers = list(load_components(src))
    assert [lc.layer for lc in layers] == list(range(info.n_layers))
    for lc, lh in zip(layers, heads, strict=True):
        assert isinstance(lc, LayerComponents) and set(lc.storage) == set(lc.matrices)
        assert set(lc.storage.values()) == {"float32"}
        m = lc.matrices
        assert all(w.dtype == np.float32 and w.flags.c_contiguous for w in m.values())
        assert m["q"].shape == (n * d_h, d) and m["o"].shape == (d, n * d_h)
        assert m["k"].shape == m["v"].shape == (kv * d_h, d)
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(m["q"].reshape(n, d_h, d), lh.wq)
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(m["k"].reshape(kv, d_h, d), lh.wk[::info.group_size])
        ffn = {k.split(".")[0] for k in m if k.startswith("ffn")}
        assert ffn == _ffn_names(info.architecture), name
        for key, w in m.items():
            if key.startswith(("ffn_gate", "ffn_up", "ffn_in")):
                assert w.shape[1] == d and w.shape[0] not in (0, d), key
            elif key.startswith(("ffn_down", "ffn_out")):
                assert w.shape[0] == d and w.shape[1] not in (0, d), key


def _zero_linear_biases(model):
    with torch.no_grad():
        for mod in model.modules():
            kind = type(mod).__name__
            if "Norm" in kind:
                continue
            b = mod._parameters.get("bias")
            if b is not None:
                b.zero_()
    return model


@pytest.mark.parametrize("name", NAMES)
def test_v_and_o_reproduce_the_attention_output(tmp_path, name):
    spec = SPECS[name]
    model = _zero_linear_biases(build(name)).double().eval()
    info = model_info(model)
    layers = list(load_components(model, components=("v", "o")))
    captured = {}

    def hooks(i):
        def pre(module, args, kwargs):
            captured[i] = [(args[0] if args else kwargs["hidden_states"])[0].numpy().copy()]
            if name in WITH_RESIDUAL:
                captured[i].append(args[1][0].numpy().copy())

        def post(module, args, out):
            captured[i].append((out[0] if isinstance(out, tuple) else out)[0].numpy().copy())
        return pre, post

    handles = []
    for i in range(info.n_layers):
        pre, post = hooks(i)
        handles.append(spec.attn(model, i).register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(spec.attn(model, i).register_forward_hook(post))
    if spec.rope_hook:
        handles += [m.register_forward_hook(rope_identity) for m in model.modules()
                    if type(m).__name__.endswith("RotaryEmbedding")]
    with torch.no_grad():
        out = model(**forward_kwargs(spec, model), output_attentions=True)
    for h in handles:
        h.remove()
    g = info.group_size
    for lc in layers:
        x, *residual, got = captured[lc.layer]
        if residual:
            got = got - residual[0]
        probs = out.attentions[lc.layer][0].numpy()  # (n_heads, T, T)
        v = (x @ lc.matrices["v"].astype(np.float64).T).reshape(len(x), -1, info.d_h)
        ctx = np.concatenate([probs[h] @ v[:, h // g] for h in range(info.n_heads)], axis=1)
        want = ctx if name in CONTEXT_ONLY else ctx @ lc.matrices["o"].astype(np.float64).T
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
        assert np.abs(want).max() > 0.1


def _act(mlp):
    for key in ("act_fn", "act", "activation_fn", "activation"):
        if hasattr(mlp, key):
            return getattr(mlp, key)
    raise AssertionError(f"no activation on {type(mlp).__name__}")


_GATED_MLP = {
    "llama": "model.layers", "mistral": "model.layers", "qwen2": "model.layers",
    "olmo": "model.layers", "olmo2": "model.layers", "olmo3": "model.layers",
    "qwen3": "model.layers", "gemma": "model.layers", "gemma2": "model.layers",
    "gemma3_text": "model.layers", "gemma3": "model.language_model.layers",
    "phi3": "model.layers", "stablelm": "model.layers", "cohere": "model.layers",
    "granite": "model.layers", "smollm3": "model.layers", "modernbert": "layers",
}


@pytest.mark.parametrize("name", sorted(_GATED_MLP))
def test_gated_ffn_reproduces_the_mlp(name):
    model = build(name).double().eval()
    x = torch.from_numpy(np.random.default_rng(2).standard_normal((5, model_info(model).d)))
    for lc in load_components(model, components="ffn"):
        mlp = model.get_submodule(f"{_GATED_MLP[name]}.{lc.layer}.mlp")
        m = {k: torch.from_numpy(w.astype(np.float64)) for k, w in lc.matrices.items()}
        with torch.no_grad():
            want = mlp(x[None])[0]
            ours = (_act(mlp)(x @ m["ffn_gate"].T) * (x @ m["ffn_up"].T)) @ m["ffn_down"].T
            swapped = (_act(mlp)(x @ m["ffn_up"].T) * (x @ m["ffn_gate"].T)) @ m["ffn_down"].T
        np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=0, atol=1e-10)
        assert np.abs(swapped.numpy() - want.numpy()).max() > 1e-3  # the order matters


@pytest.mark.parametrize("name", ["mixtral", "qwen3_moe"])
def test_moe_experts(tmp_path_factory, name):
    model32, folder = zoo_saved(name, tmp_path_factory)
    model = copy.deepcopy(model32).double().eval()
    x = torch.from_numpy(np.random.default_rng(4).standard_normal((5, 64)))
    from_folder = list(load_components(folder, components="all"))
    from_object = list(load_components(model32, components="all"))
    for lf, lo in zip(from_folder, from_object, strict=True):
        assert list(lf.matrices) == list(lo.matrices)  # same names, same order
        for key in lf.matrices:
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (folder
            #  and in-memory model hold the same float32 tensors)
            np.testing.assert_array_equal(lf.matrices[key], lo.matrices[key])
    layer0 = from_folder[0].matrices
    assert [k for k in layer0 if k.startswith("ffn_up")] == [f"ffn_up.e{j}" for j in range(4)]
    assert layer0["router"].shape == (4, 64)
    if name == "qwen3_moe":  # mlp_only_layers=[1]: a dense gated MLP, no router
        assert {k for k in from_folder[1].matrices if k.startswith("ffn")} == GATED
        assert "router" not in from_folder[1].matrices
    experts = model.get_submodule("model.layers.0.mlp.experts")
    act = experts.act_fn
    for j in range(4):
        m = {k: torch.from_numpy(layer0[f"{k}.e{j}"].astype(np.float64))
             for k in ("ffn_gate", "ffn_up", "ffn_down")}
        with torch.no_grad():
            want = experts(x, torch.full((5, 1), j), torch.ones((5, 1), dtype=x.dtype))
            ours = (act(x @ m["ffn_gate"].T) * (x @ m["ffn_up"].T)) @ m["ffn_down"].T
        np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=0, atol=1e-10)
    assert list(load_components(folder, components="router"))[0].matrices.keys() == {"router"}


def test_selection(tmp_path_factory):
    _, gpt2 = zoo_saved("gpt2", tmp_path_factory)
    first = next(load_components(gpt2, components="ffn"))
    assert list(first.matrices) == ["ffn_in", "ffn_out"]
    assert list(next(load_components(gpt2, components=["o", "q"])).matrices) == ["q", "o"]
    assert list(next(load_components(gpt2, components="all")).matrices) == \
        ["q", "k", "v", "o", "ffn_in", "ffn_out"]
    with pytest.raises(ModelError, match=r"gpt2 model has no 'ffn_gate' matrix; its .*ffn_in"):
        load_components(gpt2, components=("ffn_gate",))
    with pytest.raises(ModelError, match="has no 'router'"):
        load_components(gpt2, components="router")
    with pytest.raises(InputError, match=r"unknown component 'mlp'"):
        load_components(gpt2, components=("q", "mlp"))
    with pytest.raises(InputError, match="components is empty"):
        load_components(gpt2, components=())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ["phi3", "olmo2"])
def test_16_bit_checkpoints(tmp_path, name, dtype):
    """Saved in bf16/fp16: heads and components hold the stored values, storage says so."""
    model = build(name).to(getattr(torch, dtype))
    model.save_pretrained(tmp_path)
    state = {k: v.float().numpy() for k, v in model.state_dict().items()}
    for lh in load_heads(tmp_path):
        assert lh.storage == dtype
    lc = next(load_components(tmp_path, components="all"))
    assert set(lc.storage.values()) == {dtype}
    if name == "phi3":
        qkv = state["model.layers.0.self_attn.qkv_proj.weight"]
        gate_up = state["model.layers.0.mlp.gate_up_proj.weight"]
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lc.matrices["q"], qkv[:64])
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lc.matrices["v"], qkv[96:])
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lc.matrices["ffn_up"], gate_up[96:])
    else:
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lc.matrices["k"],
                                      state["model.layers.0.self_attn.k_proj.weight"])
        folded = next(load_heads(tmp_path, fold_qk_norm=True))
        assert folded.storage == dtype  # W's storage, though folded rows are W times a gain


def test_one_layer_at_a_time(tmp_path, tmp_path_factory):
    """A bad tensor in layer 1 is met only when layer 1 is reached."""
    _, folder = zoo_saved("mixtral", tmp_path_factory)
    state = load_file(folder / "model.safetensors")
    name = "model.layers.1.block_sparse_moe.experts.2.w3.weight"
    state[name][0, 0] = float("nan")
    for f in folder.iterdir():
        if f.name != "model.safetensors":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    save_file(state, tmp_path / "model.safetensors")
    it = load_components(tmp_path)
    assert next(it).layer == 0
    with pytest.raises(ModelError, match=rf"{name}.*non-finite"):
        next(it)
    del state[name]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ModelError, match=r"expert tensor .*experts\.2\.w3\.weight' is missing"):
        list(load_components(tmp_path, components="ffn_up"))
