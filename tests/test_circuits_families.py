"""Path patching on every family it supports (rmtbase.circuits.core.heads, families, fold): for a
tiny random-weight model of each, built from its transformers config (fp32, eager attention),
(a) the recomputed pattern of every head equals transformers' ``output_attentions`` and its
output the captured ``z``; (b) the heads' shares of the contribution module's output plus its
bias equal that output, and that output (times the factor) plus the MLP's is what the block adds
to the residual; (c) the folded patched input equals the norm re-applied to the patched
residual; (d) unsupported families are refused in one line from the config alone. The
references are transformers' own forward and modules, read by hooks here (not rmtbase's
capture)."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from rmtbase.circuits.core.families import (  # noqa: E402
    SPECS,
    SUPPORTED,
    check_family,
)
from rmtbase.circuits.core.fold import Fold  # noqa: E402
from rmtbase.circuits.core.heads import HeadModel  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

T = transformers
BASE = dict(num_hidden_layers=3, num_attention_heads=4, hidden_size=32, intermediate_size=48,
            vocab_size=40, max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
            pad_token_id=0)
PARTIAL = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}


def _config(kind: str):
    """(model class, config) of one family variant; GQA where the family has it, a sliding
    window shorter than the sequences where it has one, its options switched on, a head_dim
    other than d / H where the family allows one."""
    if kind == "gpt2":
        return T.GPT2LMHeadModel, T.GPT2Config(n_layer=3, n_head=4, n_embd=32, vocab_size=40,
                                               n_positions=64, bos_token_id=0, eos_token_id=0,
                                               scale_attn_by_inverse_layer_idx=True)
    if kind == "gptj":
        return T.GPTJForCausalLM, T.GPTJConfig(n_layer=3, n_head=4, n_embd=32, vocab_size=40,
                                               n_positions=64, rotary_dim=4, bos_token_id=0,
                                               eos_token_id=0)
    if kind == "gpt_bigcode":
        return T.GPTBigCodeForCausalLM, T.GPTBigCodeConfig(
            n_layer=3, n_head=4, n_embd=32, vocab_size=40, n_positions=64, multi_query=True)
    if kind == "bloom":
        return T.BloomForCausalLM, T.BloomConfig(n_layer=3, n_head=4, hidden_size=32,
                                                 vocab_size=40)
    if kind == "opt":
        return T.OPTForCausalLM, T.OPTConfig(num_hidden_layers=3, num_attention_heads=4,
                                             hidden_size=32, ffn_dim=48, vocab_size=40,
                                             max_position_embeddings=64,
                                             word_embed_proj_dim=32, pad_token_id=1)
    b = dict(BASE)
    if kind.startswith("falcon"):
        extra = {"falcon_gqa": dict(new_decoder_architecture=True, num_kv_heads=2),
                 "falcon_mqa": dict(multi_query=True, parallel_attn=False),
                 "falcon_mha": dict(multi_query=False, parallel_attn=True)}[kind]
        b.pop("intermediate_size")
        return T.FalconForCausalLM, T.FalconConfig(**b, **extra)
    table = {
        "llama": (T.LlamaForCausalLM, T.LlamaConfig, dict(num_key_value_heads=2)),
        "mistral": (T.MistralForCausalLM, T.MistralConfig,
                    dict(num_key_value_heads=1, sliding_window=5)),
        "qwen2": (T.Qwen2ForCausalLM, T.Qwen2Config, dict(num_key_value_heads=2)),
        "mixtral": (T.MixtralForCausalLM, T.MixtralConfig,
                    dict(num_key_value_heads=2, sliding_window=5, num_local_experts=2,
                         num_experts_per_tok=1)),
        "granite": (T.GraniteForCausalLM, T.GraniteConfig,
                    dict(num_key_value_heads=2, attention_multiplier=0.3,
                         residual_multiplier=0.5, embedding_multiplier=2.0,
                         logits_scaling=4.0, attention_bias=True)),
        "smollm3": (T.SmolLM3ForCausalLM, T.SmolLM3Config,
                    dict(num_key_value_heads=2, no_rope_layers=[1, 0, 1])),
        "starcoder2": (T.Starcoder2ForCausalLM, T.Starcoder2Config,
                       dict(num_key_value_heads=2, sliding_window=5, use_bias=True)),
        "gemma": (T.GemmaForCausalLM, T.GemmaConfig, dict(num_key_value_heads=1, head_dim=16)),
        "olmo": (T.OlmoForCausalLM, T.OlmoConfig, dict(num_key_value_heads=2, clip_qkv=0.3)),
        "qwen3": (T.Qwen3ForCausalLM, T.Qwen3Config, dict(num_key_value_heads=2, head_dim=16)),
        "qwen3_moe": (T.Qwen3MoeForCausalLM, T.Qwen3MoeConfig,
                      dict(num_key_value_heads=2, head_dim=8, num_experts=2,
                           num_experts_per_tok=1, moe_intermediate_size=16)),
        "phi3": (T.Phi3ForCausalLM, T.Phi3Config, dict(num_key_value_heads=2, sliding_window=5,
                                                        rope_parameters=dict(PARTIAL))),
        "gemma2": (T.Gemma2ForCausalLM, T.Gemma2Config,
                   dict(num_key_value_heads=2, head_dim=16, sliding_window=5,
                        query_pre_attn_scalar=10, attn_logit_softcapping=3.0)),
        "gemma3_text": (T.Gemma3ForCausalLM, T.Gemma3TextConfig,
                        dict(num_key_value_heads=2, head_dim=8, sliding_window=5,
                             query_pre_attn_scalar=10, attn_logit_softcapping=3.0,  # unused
                             layer_types=["sliding_attention", "full_attention",
                                          "sliding_attention"])),
        "olmo2": (T.Olmo2ForCausalLM, T.Olmo2Config, dict(num_key_value_heads=2)),
        "olmo3": (T.Olmo3ForCausalLM, T.Olmo3Config,
                  dict(num_key_value_heads=2, sliding_window=5,
                       layer_types=["sliding_attention", "full_attention",
                                    "sliding_attention"])),
        "phi": (T.PhiForCausalLM, T.PhiConfig, dict(num_key_value_heads=2, qk_layernorm=True,
                                                    rope_parameters=dict(PARTIAL))),
        "stablelm": (T.StableLmForCausalLM, T.StableLmConfig,
                     dict(num_key_value_heads=2, qk_layernorm=True, use_qkv_bias=True,
                          use_parallel_residual=True,
                          rope_parameters={**PARTIAL, "partial_rotary_factor": 0.25})),
        "cohere": (T.CohereForCausalLM, T.CohereConfig,
                   dict(num_key_value_heads=2, use_qk_norm=True)),
        "gpt_neox": (T.GPTNeoXForCausalLM, T.GPTNeoXConfig,
                     dict(use_parallel_residual=True, rope_parameters=dict(PARTIAL))),
    }
    cls, cfg_cls, extra = table[kind]
    return cls, cfg_cls(**b, **extra)


KINDS = ["gpt2", "llama", "mistral", "qwen2", "mixtral", "granite", "smollm3", "starcoder2",
         "gemma", "olmo", "qwen3", "qwen3_moe", "phi3", "gemma2", "gemma3_text", "olmo2",
         "olmo3", "phi", "stablelm", "cohere", "gpt_neox", "gptj", "opt", "gpt_bigcode",
         "falcon_gqa", "falcon_mqa", "falcon_mha", "bloom"]


def _net(kind: str):
    """The family's tiny model with its weight matrices scaled up (×4) so that attention is
    peaked and a wrong mask, scale, rotation or norm shows; norm gains drawn away from 1."""
    cls, cfg = _config(kind)
    cfg._attn_implementation = "eager"
    torch.manual_seed(5)
    net = cls(cfg)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 1 or "norm" in name:  # gains (per head too) and biases: random
                p.add_(0.3 * torch.randn_like(p))
            elif p.ndim == 2 and "emb" not in name and "wte" not in name and "wpe" not in name:
                p.mul_(4.0)
    return net.eval()


def _ids(net, n=3, t=12):
    g = torch.Generator().manual_seed(7)
    return torch.randint(3, 40, (n, t), generator=g)


def _run(hm: HeadModel, ids):
    """One forward with hooks: residual entering each block, per-head z (input of the output
    projection), the clean attention output a post-norm reads, the contribution module's
    output, the MLP's output, and transformers' attention weights."""
    got = {k: {} for k in ("x", "z", "clean", "contrib", "mlp")}
    hooks = []

    def pre(store, li):
        def f(_m, args, kwargs=None):
            a = args[0] if args else kwargs["hidden_states"]
            got[store][li] = a.detach().clone()
        return f

    def post(store, li):
        def f(_m, _a, out):
            o = out[0] if isinstance(out, tuple) else out
            got[store][li] = o.detach().clone()
        return f

    for li, blk in enumerate(hm.layers):
        hooks.append(blk.register_forward_pre_hook(pre("x", li), with_kwargs=True))
        hooks.append(hm.output_projection(li).register_forward_pre_hook(pre("z", li)))
        if hm.post_norm(li) is not None:
            hooks.append(hm.post_norm(li).register_forward_pre_hook(pre("clean", li)))
        hooks.append(hm.contribution_module(li).register_forward_hook(post("contrib", li)))
        mlp = _mlp(blk)
        if mlp is not None:
            hooks.append(mlp.register_forward_hook(post("mlp", li)))
    try:
        with torch.no_grad():
            out = hm.net(input_ids=ids, attention_mask=torch.ones_like(ids),
                         output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    n, t = ids.shape
    got["z"] = {li: z.reshape(n, t, hm.n_heads, hm.head_dim) for li, z in got["z"].items()}
    got["att"] = out.attentions
    return got


def _mlp(blk):
    """The module whose output is what the block's MLP adds to the residual (Bloom's MLP
    returns the residual added: its last projection)."""
    if type(blk).__name__ == "BloomBlock":
        return blk.mlp.dense_4h_to_h
    for name in ("post_feedforward_layernorm", "fc2", "mlp", "block_sparse_moe"):
        mod = getattr(blk, name, None)
        if mod is not None:
            return mod
    return None


@pytest.fixture(scope="module", params=KINDS)
def family(request):
    net = _net(request.param)
    hm = HeadModel(net)
    ids = _ids(net)
    return request.param, hm, ids, _run(hm, ids)


def test_the_blocks_mlp_is_found_in_every_family(family):
    """The via-MLP screen runs where a block has an MLP (OPT keeps fc1 and fc2 on the
    block), and not where the MLP's weights are all zero (an attention-only model)."""
    import torch

    from rmtbase.circuits.core.paths import has_mlps

    kind, hm, _, _ = family
    assert has_mlps(hm), kind
    mlps = [getattr(b, n) for b in hm.layers for n in ("mlp", "fc1", "fc2", "block_sparse_moe")
            if getattr(b, n, None) is not None]
    saved = [p.detach().clone() for m in mlps for p in m.parameters()]
    with torch.no_grad():
        for p in (p for m in mlps for p in m.parameters()):
            p.zero_()
    try:
        assert not has_mlps(hm), kind
    finally:
        with torch.no_grad():
            for p, v in zip((p for m in mlps for p in m.parameters()), saved, strict=True):
                p.copy_(v)


def test_every_family_of_the_registry_is_covered():
    covered = {_config(k)[1].model_type for k in KINDS}
    assert covered == set(SUPPORTED) - {"gemma3"}  # gemma3: the multimodal wrapper, below


def test_recomputed_pattern_equals_output_attentions(family):
    kind, hm, ids, got = family
    worst, peak = 0.0, 0.0
    with torch.no_grad():
        for li in range(hm.n_layers):
            xn = hm.norm(li)(got["x"][li])
            ref = got["att"][li]
            for h in range(hm.n_heads):
                a = hm.pattern(li, hm.query(li, h, xn), hm.key(li, h, xn), head=h)
                worst = max(worst, float((a - ref[:, h]).abs().max()))
                peak = max(peak, float(ref[:, h].max()))
                z = a @ hm.value(li, h, xn)
                zr = got["z"][li][:, :, h]
                assert float((z - zr).abs().max()) <= 1e-5 * (1 + float(zr.abs().max())), kind
    assert worst < 1e-5, (kind, worst)
    assert peak > 0.8, (kind, peak)  # peaked somewhere: the comparison has teeth


def test_head_shares_add_up_to_what_attention_adds(family):
    kind, hm, ids, got = family
    with torch.no_grad():
        for li in range(hm.n_layers):
            clean = got["clean"].get(li)
            total = sum(hm.source_contribution(li, h, got["z"][li][:, :, h], clean)
                        for h in range(hm.n_heads))
            b = hm.contribution_bias(li, clean)
            total = total if b is None else total + b
            ref = got["contrib"][li]
            scale = 1 + float(ref.abs().max())
            assert float((total - ref).abs().max()) <= 1e-5 * scale, (kind, li)
            # source_output is the share times the factor (what the residual receives)
            s = hm.source_scale(li, clean)
            zh = got["z"][li][:, :, 1]
            assert torch.allclose(hm.source_output(li, 1, zh, s),
                                  hm.contribution_factor(li)
                                  * hm.source_contribution(li, 1, zh, scale=s), atol=1e-6)
            if s is not None:  # post-norm: the clean scale is required, not guessed
                with pytest.raises(InputError, match="clean"):
                    hm.source_output(li, 1, zh)
            # the contribution (times the factor) and the MLP's output are the block's update
            if li + 1 < hm.n_layers and li in got["mlp"]:
                step = got["x"][li + 1] - got["x"][li]
                mlp = got["mlp"][li].reshape(step.shape)  # OPT's fc2 runs on (N T, d)
                if kind == "granite":  # the multiplier scales both updates
                    mlp = hm.contribution_factor(li) * mlp
                want = hm.contribution_factor(li) * ref + mlp
                assert float((step - want).abs().max()) <= 1e-5 * (1 + float(
                    step.abs().max())), (kind, li)


def _replace(value):
    def f(_m, _a, out):
        return (value, *out[1:]) if isinstance(out, tuple) else value
    return f


def test_a_share_removed_at_the_contribution_module_is_the_source_output(family):
    """What a via-MLP patch does, with every MLP and every other attention held at its clean
    output: the residual of every later layer moves by exactly −source_output."""
    kind, hm, ids, got = family
    m, s = 0, 2
    z = got["z"][m][:, :, s]
    clean = got["clean"].get(m)
    hooks, seen = [], {}
    for li, blk in enumerate(hm.layers):
        out = got["contrib"][li]
        if li == m:
            with torch.no_grad():
                out = out - hm.source_contribution(m, s, z, clean)
        hooks.append(hm.contribution_module(li).register_forward_hook(_replace(out)))
        hooks.append(_mlp(blk).register_forward_hook(_replace(got["mlp"][li])))
        hooks.append(blk.register_forward_pre_hook(
            lambda _m, a, kw, li=li: seen.__setitem__(li, (a[0] if a else
                                                             kw["hidden_states"]).clone()),
            with_kwargs=True))
    try:
        with torch.no_grad():
            hm.net(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        want = -hm.source_output(m, s, z, hm.source_scale(m, clean))
    assert float(want.abs().max()) > 1e-3
    for li in range(m + 1, hm.n_layers):
        step = seen[li] - got["x"][li]
        assert float((step - want).abs().max()) <= 1e-5 * (1 + float(
            got["x"][li].abs().max())), (kind, li)


def test_fold_equals_the_norm_reapplied_to_the_patched_residual(family):
    kind, hm, ids, got = family
    layer = hm.n_layers - 1
    zs = [got["z"][m] for m in range(hm.n_layers)]
    scales = [hm.source_scale(m, got["clean"].get(m)) for m in range(hm.n_layers)]
    fold = Fold(hm, layer, got["x"][layer], zs, scales)
    assert not fold.exact  # the fold proper, not its fallback
    assert (fold._whole is not None) == (kind in ("olmo2", "olmo3"))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for trial in range(3):
            k = 1 + trial
            pick = torch.randperm(layer * hm.n_heads, generator=g)[:k].tolist()
            sources = [(p // hm.n_heads, p % hm.n_heads) for p in pick]
            x = got["x"][layer].clone()
            for m, s in sources:
                x -= hm.source_output(m, s, zs[m][:, :, s], scales[m])
            xn = hm.norm(layer)(x)
            for which, fn in enumerate((hm.query, hm.key, hm.value)):
                head = (trial + which) % hm.n_heads
                want = fn(layer, head, xn)
                have = fold.patched(head, sources, which)
                tol = 1e-5 * (1 + float(want.abs().max()))
                assert float((have - want).abs().max()) <= tol, (kind, which, sources)
            # no source: the clean input
            clean = fold.patched(0, [], 1)
            ref = hm.key(layer, 0, hm.norm(layer)(got["x"][layer]))
            assert float((clean - ref).abs().max()) <= 1e-5 * (1 + float(ref.abs().max()))


@pytest.mark.parametrize("kind", ["gpt2", "opt", "bloom", "falcon_gqa", "gpt_neox", "olmo2"])
def test_base_models_as_the_loader_reads_them(kind):
    """rmtbase's loader reads AutoModel (no LM head): OPT's layers sit under ``decoder``,
    GPT-2's / Bloom's / Falcon's under ``h``."""
    cfg = _config(kind)[1]
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    net = T.AutoModel.from_config(cfg).eval()
    hm = HeadModel(net)
    got = _run(hm, _ids(net))
    with torch.no_grad():
        xn = hm.norm(1)(got["x"][1])
        for h in range(hm.n_heads):
            a = hm.pattern(1, hm.query(1, h, xn), hm.key(1, h, xn), head=h)
            assert float((a - got["att"][1][:, h]).abs().max()) < 1e-5


def test_multimodal_gemma3_runs_its_language_model():
    text = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                hidden_size=32, intermediate_size=48, vocab_size=300, head_dim=8,
                query_pre_attn_scalar=10, sliding_window=5,
                layer_types=["sliding_attention", "full_attention"])
    vision = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                  num_attention_heads=2, image_size=16, patch_size=8)
    cfg = T.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                         image_token_index=299, boi_token_index=297, eoi_token_index=298)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    for cls in (T.Gemma3ForConditionalGeneration, T.Gemma3Model):  # the loader's: AutoModel
        torch.manual_seed(0)
        net = cls(cfg).eval()
        hm = HeadModel(net)
        assert (hm.n_layers, hm.n_heads, hm.n_kv, hm.head_dim, hm.d) == (2, 4, 2, 8, 32)
        got = _run(hm, _ids(net, t=10))
        with torch.no_grad():
            for li in range(2):
                xn = hm.norm(li)(got["x"][li])
                for h in range(4):
                    a = hm.pattern(li, hm.query(li, h, xn), hm.key(li, h, xn), head=h)
                    assert float((a - got["att"][li][:, h]).abs().max()) < 1e-5


@pytest.mark.parametrize("config, words", [
    ({"model_type": "bert"}, "not the encoder 'bert'"),
    ({"model_type": "vit"}, "not the encoder 'vit'"),
    ({"model_type": "modernbert"}, "not the encoder"),
    ({"model_type": "distilbert"}, "not the encoder"),
    ({"model_type": "mpnet"}, "not the encoder"),
    ({"model_type": "t5"}, "not 't5'"),
    ({"model_type": "mamba"}, "not 'mamba'"),
    ({}, "not None"),
    ({"model_type": "opt", "do_layer_norm_before": False}, "do_layer_norm_before"),
    ({"model_type": "bloom", "apply_residual_connection_post_layernorm": True},
     "apply_residual_connection_post_layernorm"),
    ({"model_type": "bloom", "pretraining_tp": 2, "slow_but_exact": True}, "slow_but_exact"),
    ({"model_type": "falcon", "alibi": True}, "adds the bias twice"),
    ({"model_type": "gemma3", "text_config": {"use_bidirectional_attention": True}},
     "bidirectional"),
])
def test_unsupported_families_are_refused_in_one_line(config, words):
    with pytest.raises(InputError) as e:
        check_family(config)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert "gpt2" in str(e.value) or config.get("model_type") in SUPPORTED


def test_supported_configs_pass_the_check():
    for mt in SUPPORTED:
        check_family({"model_type": mt})
    check_family(T.LlamaConfig())  # a transformers config is read as well as a dict


def test_one_gate_for_both_searches():
    """Every family the head search runs, the task graph runs (its logits against
    transformers': tests/test_circuits_task.py), a residual multiplier included; the variants
    the head search refuses are refused from the config alone."""
    for mt in SPECS:
        check_family({"model_type": mt, "residual_multiplier": 0.22})
    with pytest.raises(InputError, match="adds the bias twice"):
        check_family({"model_type": "falcon", "alibi": True})
