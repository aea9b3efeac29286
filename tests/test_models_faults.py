"""Model-loading faults: each is a one-line ModelError/InputError, never a traceback.

- a shard index naming a file outside the model folder (``../other/…``, ``/etc/passwd``) is
  refused before anything is opened; a folder of symlinks (the Hugging Face cache layout) is not;
- a deeply nested config.json or shard index (json's RecursionError);
- a path the OS cannot look up (``~nouser/x``, a name too long);
- a pickle holding objects besides tensors (torch's six-line message that suggests
  ``weights_only=False`` becomes one line that does not);
- config values of the wrong type (``"n_head": true`` is not one head).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from _checkpoints import copy_folder, edit_config
from safetensors.torch import load_file
from test_models_zoo import saved as zoo_saved

from rmtbase.cli import main
from rmtbase.errors import InputError, ModelError, RmtbaseError
from rmtbase.models import load_components, load_heads, model_info


class NotATensor:  # pickled by reference: weights_only=True refuses it
    pass




@pytest.fixture()
def gpt2_dir(tmp_path_factory):
    return zoo_saved("gpt2", tmp_path_factory)[1]


def _index_to(folder, shard_name):
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(state, shard_name)}))


@pytest.mark.parametrize("shard", ["../other/model.safetensors", "/etc/passwd",
                                   "sub/../../other/model.safetensors", "C:\\model.safetensors",
                                   "..\\other\\model.safetensors"])
def test_shard_index_cannot_leave_the_folder(tmp_path, gpt2_dir, shard):
    copy_folder(gpt2_dir, tmp_path / "other")  # a complete model next door that must not be read
    folder = copy_folder(gpt2_dir, tmp_path / "model")
    _index_to(folder, shard)
    for call in (load_heads, model_info, load_components):
        if call is model_info:
            assert model_info(folder).n_layers == 2  # the config alone is fine
            continue
        with pytest.raises(ModelError, match="outside the model folder") as err:
            call(folder)
        assert shard in str(err.value) or repr(shard) in str(err.value)


def test_symlinked_shards_inside_the_folder_are_read(tmp_path, gpt2_dir):
    """The Hugging Face cache layout: snapshot files are symlinks into ../../blobs."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    snapshot = tmp_path / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    for p in gpt2_dir.iterdir():
        shutil.copy(p, blobs / p.name)
        (snapshot / p.name).symlink_to(f"../../blobs/{p.name}")
    ref = [lh.wq for lh in load_heads(gpt2_dir)]
    for got, want in zip([lh.wq for lh in load_heads(snapshot)], ref, strict=True):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the same
        #  file through a symlink)
        np.testing.assert_array_equal(got, want)


def test_hub_shard_names_are_checked_too(monkeypatch, tmp_path, gpt2_dir):
    from rmtbase.models import hub as hub_mod

    folder = copy_folder(gpt2_dir, tmp_path / "repo")
    _index_to(folder, "../../secrets/model.safetensors")
    monkeypatch.setattr(hub_mod, "_download", lambda repo, f, rev: folder / f)
    monkeypatch.setattr(hub_mod, "_list_files", lambda repo, rev: [p.name for p in
                                                                   folder.iterdir()])
    with pytest.raises(ModelError, match="outside the model folder"):
        load_heads("org/evil")


def _nested(depth):
    return "[" * depth + "]" * depth


@pytest.mark.bad_json_input
def test_deeply_nested_config_and_index(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "deep")
    (folder / "config.json").write_text('{"model_type": "gpt2", "x": ' + _nested(100_000) + "}")
    with pytest.raises(ModelError, match=r"config\.json is nested too deeply") as err:
        model_info(folder)
    assert "\n" not in str(err.value)
    folder = copy_folder(gpt2_dir, tmp_path / "deep_index")
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(
        '{"weight_map": {}, "x": ' + _nested(100_000) + "}")
    with pytest.raises(ModelError, match="shard index .* nested too deeply"):
        load_heads(folder)


@pytest.mark.parametrize("path", ["~rmtbase_no_such_user_q7/model", "./" + "x" * 5000])
def test_unlookupable_paths(path):
    with pytest.raises(ModelError, match="no such model folder") as err:
        model_info(path)
    assert "\n" not in str(err.value)


def test_cli_prints_one_line_for_unknown_home(tmp_path, capsys):
    rc = main(["score", "~rmtbase_no_such_user_q7/x", "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("rmtbase: error: no such model folder") and err.count("\n") == 1
    assert "Traceback" not in err


def test_pickle_with_objects_is_one_line_without_unsafe_advice(tmp_path, gpt2_dir):
    folder = copy_folder(gpt2_dir, tmp_path / "bin", skip=("model.safetensors",))
    state = dict(load_file(gpt2_dir / "model.safetensors"))
    state["extra"] = NotATensor()
    torch.save(state, folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match=r"pytorch_model\.bin: it holds Python objects") as err:
        load_heads(folder, allow_pickle=True)
    msg = str(err.value)
    assert "\n" not in msg and "weights_only" not in msg and "safetensors" in msg


@pytest.mark.parametrize(("changes", "match"), [
    ({"n_head": True}, r"n_head=True is not an integer"),
    ({"n_embd": 64.5}, r"n_embd=64\.5 is not a positive integer"),
    ({"n_layer": "2"}, r"n_layer='2' is not an integer"),
    ({"n_head": 0}, r"n_head=0 is not a positive integer"),
])
def test_config_values_of_the_wrong_type(tmp_path, gpt2_dir, changes, match):
    folder = copy_folder(gpt2_dir, tmp_path / "cfg")
    edit_config(folder, **changes)
    with pytest.raises(ModelError, match=match):
        model_info(folder)


@pytest.mark.parametrize(("name", "changes", "match"), [
    ("falcon_mq", {"multi_query": "yes"}, r"multi_query='yes' .* is not true/false"),
    ("gpt_neox", {"rotary_pct": True}, r"rotary_pct=True is not a number in \[0, 1\]"),
    ("phi", {"qk_layernorm": 1}, r"qk_layernorm=1 .* is not true/false"),
    ("gemma3", {"text_config": "big"}, r"text_config='big'"),
])
def test_flags_of_the_wrong_type(tmp_path, tmp_path_factory, name, changes, match):
    folder = copy_folder(zoo_saved(name, tmp_path_factory)[1], tmp_path / name)
    edit_config(folder, **changes)
    with pytest.raises(ModelError, match=match):
        model_info(folder)


@pytest.mark.parametrize("make", [
    pytest.param(lambda d: (d / "config.json").write_text("{oops"),
                 marks=pytest.mark.bad_json_input),
    lambda d: (d / "config.json").write_text("[1, 2]"),
    lambda d: (d / "model.safetensors").write_bytes(b"\x00garbage" * 10),
    lambda d: (d / "config.json").write_text(json.dumps({"model_type": ["gpt2"]})),
    lambda d: (d / "config.json").write_text(json.dumps({"architectures": [7]})),
])
def test_every_fault_is_one_line(tmp_path, gpt2_dir, make):
    folder = copy_folder(gpt2_dir, tmp_path / "bad")
    make(folder)
    with pytest.raises(RmtbaseError) as err:
        list(load_heads(folder))
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ModelError | InputError)
