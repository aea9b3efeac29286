"""GGUF files of every architecture rmtbase reads from GGUF, checked against
the Hugging Face folder of the same random model and against ``transformers``' own GGUF loader.

Each tiny random model (d = 64, 2 layers, 4 query heads; GQA/MQA, head_dim ≠ d / n_heads,
biases and QK-norms where the architecture has them; every parameter drawn at random, norm
gains included) is saved with ``save_pretrained`` and written to GGUF by ``tests/_gguf.write_hf``
as llama.cpp's ``convert_hf_to_gguf.py`` would (names from gguf's tensor-name map, q/k rows
permuted for the llama family only, Gemma norms + 1, GPT-2 transposed, Falcon's q/k/v
regrouped, GPT-NeoX's and BLOOM's per-head q/k/v rows reordered to [q | k | v] (weights and
biases), StableLM's per-head norms stacked). Then:

- F32: rmtbase's per-head W_Q, W_K (and biases, model info) from the GGUF equal those from
  the folder bit for bit; QK-norm gains folded agree (Gemma's to float32 rounding of w + 1);
- ``transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint`` (an independent reader,
  where it knows the architecture) returns the model's own q/k/v tensors from the file;
- Q8_0: rmtbase's heads from the GGUF equal those of the folder that transformers' loader
  makes of the same file, and every head's storage is ``q8_0``.
"""

import zlib

import numpy as np
import pytest

from rmtbase.errors import ModelError
from rmtbase.models import load_heads, model_info

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import _gguf  # noqa: E402

_BASE = dict(vocab_size=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=64, pad_token_id=0)


def _configs():
    t = transformers
    return {
        "llama": t.LlamaConfig(**_BASE, num_key_value_heads=2),
        "qwen2": t.Qwen2Config(**_BASE, num_key_value_heads=2),
        "qwen3": t.Qwen3Config(**_BASE, num_key_value_heads=2, head_dim=32),
        "gemma": t.GemmaConfig(**_BASE, num_key_value_heads=1, head_dim=32),
        "gemma2": t.Gemma2Config(**_BASE, num_key_value_heads=2, head_dim=32),
        "gemma3": t.Gemma3TextConfig(**_BASE, num_key_value_heads=1, head_dim=32),
        "phi3": t.Phi3Config(**_BASE, num_key_value_heads=2),
        "starcoder2": t.Starcoder2Config(**_BASE, num_key_value_heads=2, use_bias=True),
        "stablelm": t.StableLmConfig(**_BASE, num_key_value_heads=2, qk_layernorm=True,
                                     use_qkv_bias=True),
        "falcon": t.FalconConfig(vocab_size=64, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_kv_heads=2,
                                 new_decoder_architecture=True, bias=False),
        "falcon-mq": t.FalconConfig(vocab_size=64, hidden_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, multi_query=True,
                                    new_decoder_architecture=False),
        "phi2": t.PhiConfig(**_BASE),
        "olmo": t.OlmoConfig(**_BASE, num_key_value_heads=2),
        "olmo2": t.Olmo2Config(**_BASE, num_key_value_heads=2),
        "command-r": t.CohereConfig(**_BASE, num_key_value_heads=2, use_qk_norm=True),
        "gptneox": t.GPTNeoXConfig(**_BASE, use_parallel_residual=True),
        "gpt2": t.GPT2Config(vocab_size=64, n_embd=64, n_layer=2, n_head=4, n_positions=64),
        "bloom": t.BloomConfig(vocab_size=64, hidden_size=64, n_layer=2, n_head=4),
        "starcoder": t.GPTBigCodeConfig(vocab_size=64, n_embd=64, n_layer=2, n_head=4,
                                        n_positions=64, multi_query=True),
    }


#: GGUF architectures whose files transformers' GGUF loader reads with llama.cpp's layout
#: (gemma-1 and gptneox are not in its GGUF_CONFIG_MAPPING; Falcon's grouped q/k/v is not
#: undone there).
TRANSFORMERS_READS = {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "starcoder2",
                      "stablelm", "falcon-mq", "gpt2", "bloom"}
ARCHS = list(_configs())


def _model(name):
    torch.manual_seed(zlib.crc32(name.encode()))
    cfg = _configs()[name]
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            base = 1.0 if ("norm" in pname and "gemma" not in name) else 0.0
            scale = 0.1 if "norm" in pname else 0.05
            p.copy_(base + scale * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``{name: (model, folder, f32 gguf, q8_0 gguf)}``, built once."""
    out = {}
    for name in ARCHS:
        arch = {"falcon-mq": "falcon"}.get(name, name)
        model = _model(name)
        root = tmp_path_factory.mktemp(name)
        model.save_pretrained(root / "hf")
        f32 = _gguf.write_hf(model, root / "f32.gguf", arch)
        q8 = _gguf.write_hf(model, root / "q8.gguf", arch, qtype="Q8_0")
        out[name] = (model, root / "hf", f32, q8)
    return out


def _assert_heads_equal(a_path, b_path, *, rtol=0.0, **kw):
    a, b = list(load_heads(a_path, **kw)), list(load_heads(b_path, **kw))
    assert len(a) == len(b) == 2
    for x, y in zip(a, b, strict=True):
        for f in ("wq", "wk", "bq", "bk"):
            u, v = getattr(x, f, None), getattr(y, f, None)
            assert (u is None) == (v is None), f
            if u is not None:
                if rtol:
                    np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-7)
                else:
                    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
                    #  (the same stored values through two layouts)
                    np.testing.assert_array_equal(u, v, err_msg=f)
    return a


@pytest.mark.parametrize("name", ARCHS)
def test_f32_heads_equal_the_folder_bit_for_bit(built, name):
    model, folder, f32, _ = built[name]
    a, b = model_info(f32), model_info(folder)
    assert a.source == "gguf"
    for f in ("architecture", "d", "d_h", "n_layers", "n_heads", "n_kv_heads", "qk_norm",
              "rotary_fraction"):
        assert getattr(a, f) == getattr(b, f), (f, getattr(a, f), getattr(b, f))
    heads = _assert_heads_equal(f32, folder)
    assert heads[0].storage == "float32"


def test_sizes_the_issue_names(built):
    """key_length ≠ d / n_heads (Gemma-3-270M: 4 heads of 256 at d = 640, here 32 at 64),
    MQA, GQA and Falcon's one k/v head."""
    got = {n: model_info(built[n][2]) for n in ("gemma3", "gemma", "qwen3", "falcon-mq",
                                                 "falcon", "gpt2")}
    assert (got["gemma3"].d, got["gemma3"].n_heads, got["gemma3"].d_h) == (64, 4, 32)
    assert got["gemma"].n_kv_heads == 1 and got["qwen3"].d_h == 32
    assert got["falcon-mq"].n_kv_heads == 1 and got["falcon"].n_kv_heads == 2
    assert got["gpt2"].n_kv_heads == 4
    assert model_info(built["starcoder"][2]).n_kv_heads == 1


@pytest.mark.parametrize("name", ["qwen3", "gemma3", "stablelm", "olmo2", "command-r"])
def test_folded_qk_norm_gains_agree(built, name):
    """QK-norm weights are read as the Hugging Face path reads them: Qwen3's and StableLM's
    exactly; Gemma-3's through llama.cpp's + 1 (the gain 1 + (g − 1) is the stored g, which
    is 1 + w rounded to float32)."""
    _, folder, f32, _ = built[name]
    _assert_heads_equal(f32, folder, rtol=0.0 if name != "gemma3" else 1e-6,
                        fold_qk_norm=True)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS_READS))
def test_transformers_gguf_loader_reads_the_models_own_tensors(built, name):
    """The writer is llama.cpp's: transformers' GGUF loader undoes it back to the model."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    model, _, f32, _ = built[name]
    sd = model.state_dict()
    got = load_gguf_checkpoint(str(f32), return_tensors=True, model_to_load=model)["tensors"]
    attn = [k for k in sd if any(s in k for s in ("q_proj.weight", "k_proj.weight",
                                                    "qkv_proj.weight", "c_attn.weight",
                                                    "query_key_value.weight"))]
    assert len(attn) >= 2
    for k in attn:
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(got[k].numpy(), sd[k].numpy(), err_msg=k)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS_READS))
def test_q8_0_heads_equal_transformers_conversion(built, name, tmp_path):
    """Q8_0 GGUF: rmtbase's heads equal those of the folder transformers makes of the file."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    model, _, _, q8 = built[name]
    ref = _model(name)
    tensors = load_gguf_checkpoint(str(q8), return_tensors=True, model_to_load=ref)["tensors"]
    missing = ref.load_state_dict(tensors, strict=False)
    # transformers' loader does not unstack StableLM's per-head norms (raw heads only here)
    assert not [k for k in missing.missing_keys if ("proj" in k or "attn" in k
                or "attention" in k) and "layernorm.norms" not in k]
    ref.save_pretrained(tmp_path / "hf")
    heads = _assert_heads_equal(q8, tmp_path / "hf")
    assert all(h.quantisation == "q8_0" for h in heads)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma3", "falcon-mq"])
def test_q8_0_scores_equal_transformers_conversion(built, name, tmp_path, module_cache):
    """score_model on the Q8_0 file and on the folder transformers makes of it: per-head
    values agree to 1e-5 relative, both against the Q8_0 null (the file names its type; the
    folder's lattice is detected)."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from rmtbase.scoring import score_model

    _, _, _, q8 = built[name]
    ref = _model(name)
    ref.load_state_dict(load_gguf_checkpoint(str(q8), return_tensors=True,
                                             model_to_load=ref)["tensors"], strict=False)
    ref.save_pretrained(tmp_path / "hf")
    stats = ["qk.npr", "qk.lambda_max", "q.excess_kurtosis", "qk.excess_kurtosis"]
    kw = dict(stats=stats, draws=40, progress=False, spectrum_draws=0, max_draws=200)
    a, b = score_model(q8, **kw), score_model(tmp_path / "hf", **kw)
    for ds in (a, b):
        assert ds.attrs["null_storage"] == "q8_0"
    va, vb = a["value"].values, b["value"].values
    assert va.shape == (2, 4, len(stats)) and np.isfinite(va).all()
    assert (np.abs(va - vb) <= 1e-5 * np.abs(vb)).all()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_k_quant_heads_equal_transformers_conversion(arch, tmp_path):
    """Q4_K (d = 256: K-quant super-blocks of 256), with and without llama's permutation: the
    bytes are packed from rmtbase's K-quant codes, dequantised by gguf in both readers."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    cls = {"llama": transformers.LlamaConfig, "qwen3": transformers.Qwen3Config}[arch]
    kw = {**_BASE, "hidden_size": 256, "intermediate_size": 256, "num_key_value_heads": 2}
    if arch == "qwen3":
        kw["head_dim"] = 128
    torch.manual_seed(3)
    model = transformers.AutoModelForCausalLM.from_config(cls(**kw))
    path = _gguf.write_hf(model, tmp_path / "k.gguf", arch, qtype="Q4_K")
    ref = transformers.AutoModelForCausalLM.from_config(cls(**kw))
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=ref)["tensors"]
    ref.load_state_dict(tensors, strict=False)
    ref.save_pretrained(tmp_path / "hf")
    heads = _assert_heads_equal(path, tmp_path / "hf")
    assert all(h.quantisation == "q4_k" for h in heads)


def _wide(name):
    """The architecture's tiny model at d = 256 (one K-quant super-block a row)."""
    cfg = _configs()[name]
    cfg.hidden_size = 256
    for attr in ("intermediate_size", "ffn_hidden_size"):
        if getattr(cfg, attr, None):
            setattr(cfg, attr, 256)
    torch.manual_seed(zlib.crc32(name.encode()) + 1)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.slow
@pytest.mark.parametrize("name", ARCHS)
def test_q4_k_heads_of_every_architecture(name, tmp_path):
    """Every architecture at a K-quant (F32, Q8_0 and a K-quant each). Where
    transformers' GGUF loader reads the architecture, rmtbase's heads of the Q4_K file equal
    those of the folder transformers makes of it; elsewhere (grouped Falcon, Gemma-1, ...)
    they equal the folder's heads put through rmtbase's Q4_K round trip, bit-exact with the
    ggml reference (tests/test_kquants.py): K-quant super-blocks run along the input axis,
    which no conversion reorders."""
    import jax.numpy as jnp

    from rmtbase.stats.precision import round_trip

    arch = {"falcon-mq": "falcon"}.get(name, name)
    model = _wide(name)
    model.save_pretrained(tmp_path / "hf")
    path = _gguf.write_hf(model, tmp_path / "k.gguf", arch, qtype="Q4_K")
    if name in TRANSFORMERS_READS:
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        ref = transformers.AutoModelForCausalLM.from_config(model.config)
        tensors = load_gguf_checkpoint(str(path), return_tensors=True,
                                       model_to_load=ref)["tensors"]
        ref.load_state_dict(tensors, strict=False)
        ref.save_pretrained(tmp_path / "conv")
        heads = _assert_heads_equal(path, tmp_path / "conv")
    else:
        heads = list(load_heads(path))
        for a, b in zip(heads, load_heads(tmp_path / "hf"), strict=True):
            for f in ("wq", "wk"):
                want = np.asarray(round_trip(jnp.asarray(getattr(b, f)), "q4_k"))
                # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed
                #  order, FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality
                #  with the scalar ggml/torch reference is its contract
                np.testing.assert_array_equal(getattr(a, f), want, err_msg=f)
    assert all(h.quantisation == "q4_k" for h in heads)


@pytest.mark.parametrize("name", ["falcon", "gemma", "gpt2", "gptneox", "starcoder", "olmo",
                                  "olmo2", "command-r", "phi2"])
def test_q8_0_heads_are_the_folders_heads_through_the_q8_0_round_trip(built, name):
    """Where transformers' loader cannot serve as the reference (grouped Falcon, Gemma-1):
    blocks run along the input axis, which no conversion reorders, so the Q8_0 file's heads
    are the folder's heads put through rmtbase's Q8_0 round trip (bit-exact with gguf.quants)."""
    import jax.numpy as jnp

    from rmtbase.stats.precision import round_trip

    _, folder, _, q8 = built[name]
    for a, b in zip(load_heads(q8), load_heads(folder), strict=True):
        assert a.quantisation == "q8_0"
        for f in ("wq", "wk"):
            want = np.asarray(round_trip(jnp.asarray(getattr(b, f)), "q8_0"))
            # exact: by construction, the quantiser is correctly rounded float32 ops in a fixed
            #  order, FMA and reciprocal rewrites guarded (rmtbase.stats._exact); bit-equality with
            #  the scalar ggml/torch reference is its contract
            np.testing.assert_array_equal(getattr(a, f), want, err_msg=f)


def test_unsupported_architecture_refused_from_metadata(tmp_path, monkeypatch):
    """One line, before any tensor is read (GGUFReader is never built)."""
    import gguf

    path = _gguf.write_llama(tmp_path / "b.gguf", [{"q": np.ones((64, 64)),
                                                    "k": np.ones((64, 64))}],
                             d=64, n_heads=4, n_kv_heads=4, arch="mpt")

    def boom(*a, **k):
        raise AssertionError("tensors read")

    monkeypatch.setattr(gguf, "GGUFReader", boom)
    for call in (model_info, lambda p: list(load_heads(p))):
        with pytest.raises(ModelError, match="unsupported GGUF architecture 'mpt'") as e:
            call(path)
        assert "\n" not in str(e.value) and "llama" in str(e.value)


def test_fifo_named_gguf_is_refused_without_blocking(tmp_path):
    import os

    from rmtbase.models.gguf_header import is_gguf, read_header

    fifo = tmp_path / "x.gguf"
    os.mkfifo(fifo)
    assert is_gguf(fifo) is False
    with pytest.raises(ModelError, match="not a regular file"):
        read_header(fifo)
    with pytest.raises(ModelError, match="not a GGUF file") as e:
        model_info(fifo)
    assert "\n" not in str(e.value)


def test_truncated_header_is_one_line(tmp_path, built):
    data = built["llama"][2].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:200])
    with pytest.raises(ModelError, match="truncated or corrupt") as e:
        model_info(cut)
    assert "\n" not in str(e.value)


def test_table_is_gguf_and_transformers_vocabulary():
    """Every GGUF architecture read is one gguf-py knows, maps to an rmtbase adapter, and —
    but for gemma-1 — one transformers' GGUF loader reads too (GGUF_CONFIG_MAPPING)."""
    import gguf
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    from rmtbase.models.gguf_arch import SPECS
    from rmtbase.models.registry import ADAPTERS

    assert set(SPECS) <= set(gguf.MODEL_ARCH_NAMES.values())
    assert all(spec.model_type in ADAPTERS for spec in SPECS.values())
    assert set(SPECS) - set(GGUF_CONFIG_MAPPING) == {"gemma", "gptneox", "starcoder", "olmo",
                                                     "olmo2", "command-r", "phi2"}
