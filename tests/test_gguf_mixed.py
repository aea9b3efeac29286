"""Checkpoints whose layers are stored at different precisions: each layer against its own null.

A GGUF file may give each tensor its own type (llama.cpp's Q4_K_M/Q3_K_M mixes, ``llama-quantize
--tensor-type``); a dequantised folder may hold layers from different block formats. The files
here are a small random LLaMA layout (d = 256, 4 query heads of d_h = 64 on 2 key heads, 3
layers, entries N(0, 0.02²) from a fixed numpy seed) written with the ``gguf`` package
(``tests/_gguf.py``; K-quant blocks from rmtbase's round trip, as in ``test_gguf_null.py``).

What is checked, exactly (no statistical tolerance: the same numbers are compared):

- provenance: the per-layer storages in ``quantisation``/``null_storage``/``null`` and the
  ``layer_null_storage``/``layer_quantisation`` variables, netCDF-serialisable;
- per-layer nulls are used: a layer's values and per-statistic p-values (and its calibrated
  head p and spike count) equal those of the same layer in a file where every layer has that
  layer's type — same bytes, scored against one null;
- a uniform file is scored as before: its result is :func:`score_values` against the one null
  table, with the single-storage attrs;
- W_Q and W_K of one layer in different block types: that layer is scored against the float null
  with histogram statistics left out (under "auto" as under "none"), and the provenance says so.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gguf")

import _gguf  # noqa: E402

D, HEADS, KV, LAYERS = 256, 4, 2, 3
#: Per-statistic checks are exact, so few draws suffice; no K-quant null takes the sequential
#: extension (it is kept for float storages), so the p-values cannot depend on other layers.
KW = dict(stats="spectral", draws=100, max_draws=100, progress=False, spectrum_draws=0)
ELEMENT_KW = dict(stats=["k.excess_kurtosis", "qk.excess_kurtosis"], draws=40, max_draws=40,
                  progress=False, spectrum_draws=0)


def _layers():
    rng = np.random.default_rng(2024)
    return [{"q": 0.02 * rng.standard_normal((D, D)), "k": 0.02 * rng.standard_normal((D // 2, D))}
            for _ in range(LAYERS)]


def _encode(w, n_head, kind):
    """GGUF bytes and type name of ``w`` (HF row order) stored as ``kind``."""
    import gguf

    w = _gguf.permute(np.asarray(w, np.float32), n_head)
    if kind.endswith("_k"):
        return _gguf.encode_k(w, kind)
    t = gguf.GGMLQuantizationType[kind.upper()]
    return gguf.quants.quantize(w, t), kind.upper()


def _write(path, types, k_types=None):
    """A GGUF file of :func:`_layers` with W_Q of layer i stored as ``types[i]`` and W_K as
    ``k_types[i]`` (default the same)."""
    layers, enc = _layers(), {}
    for i, layer in enumerate(layers):
        enc[(i, "q")] = _encode(layer["q"], HEADS, types[i])
        enc[(i, "k")] = _encode(layer["k"], KV, (k_types or types)[i])
    return _gguf.write_llama(path, layers, d=D, n_heads=HEADS, n_kv_heads=KV, encoded=enc)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gguf-mixed")
    return {"mixed": _write(tmp / "mixed.gguf", ["q4_k", "q6_k", "q4_k"]),
            "q4_k": _write(tmp / "q4k.gguf", ["q4_k"] * LAYERS),
            "q6_k": _write(tmp / "q6k.gguf", ["q6_k"] * LAYERS)}


@pytest.fixture(scope="module")
def spectral(files, module_cache):
    from rmtbase.scoring import score_model

    return {name: score_model(str(path), **KW) for name, path in files.items()}


def test_loader_reports_each_layers_type(files):
    from rmtbase.models import load_heads

    assert [lh.quantisation for lh in load_heads(files["mixed"])] == ["q4_k", "q6_k", "q4_k"]


@pytest.mark.slow  # the mixed file's per-layer nulls: 149 s of set-up on 2 quiet cores
def test_provenance_names_each_layers_null(spectral, tmp_path):
    import xarray as xr

    from rmtbase.report.tables import summary_text

    ds = spectral["mixed"]
    want = "q4_k (layers 0, 2), q6_k (layer 1)"
    assert ds.attrs["null_storage"] == ds.attrs["quantisation"] == want
    assert list(ds["layer_null_storage"].values) == ["q4_k", "q6_k", "q4_k"]
    assert list(ds["layer_quantisation"].values) == ["q4_k", "q6_k", "q4_k"]
    assert ("passed through the q4_k block quantiser (layers 0, 2); passed through the q6_k "
            "block quantiser (layer 1)") in ds.attrs["null"]
    assert ds.attrs["baseline_storage_dtype"] == "q4_k (layers 0, 2); q6_k (layer 1)"
    text = summary_text(ds)
    # the header line names each storage and its layer count; the null's text its layers
    assert "null Q4_K (2 layers), Q6_K (1 layer)" in text, text
    assert "q6_k block quantiser (layer 1)" in text, text
    ds.to_netcdf(tmp_path / "scores.nc")  # attrs and variables serialise
    back = xr.load_dataset(tmp_path / "scores.nc")
    assert back.attrs["null_storage"] == want
    assert list(back["layer_null_storage"].values) == ["q4_k", "q6_k", "q4_k"]


@pytest.mark.slow  # the mixed file's per-layer nulls: 149 s of set-up on 2 quiet cores
def test_profile_bands_follow_each_layers_storage(spectral, monkeypatch):
    """Layer profiles take each layer's band from its own storage (null_band stubbed: the
    storage it was asked for is what it returns)."""
    from rmtbase.report import profiles

    monkeypatch.setattr(profiles, "null_band", lambda d, d_h, storage: {
        s: (storage, storage, storage) for s in profiles.PROFILE_STATS})
    table = profiles.profile_table([("mixed", spectral["mixed"])], "npr")
    assert list(table["null_lo"]) == ["q4_k", "q6_k", "q4_k"]
    assert profiles.band_of(spectral["mixed"], "npr")[0] == "q4_k"  # most layers'
    assert profiles.band_of(spectral["q6_k"], "npr")[0] == "q6_k"


def _same_layer(mixed, uniform, layer):
    """Layer ``layer`` of two scores: equal values, per-statistic tests and head p."""
    a, b = mixed.sel(layer=layer), uniform.sel(layer=layer)
    # exact: the same call twice in one process: same compiled programs, same inputs (equal weights,
    #  the same per-layer programs and null table)
    np.testing.assert_array_equal(a["value"].values, b["value"].values)
    # head_p_statistics (p_S), not head_p_value: the latter combines p_S with p_A, read from the
    #  profile null at the size its stopping rule chose over the file's own heads
    #  (rmtbase.scoring.profile.stopping): another file's heads may stop it elsewhere
    for v in ("p_value", "null_mean", "null_std", "distance", "percentile", "head_p_statistics"):
        # exact: the same call twice in one process: same compiled programs, same inputs (equal
        #  weights, the same per-layer programs and null table)
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=f"{v}, layer {layer}")
    assert np.isfinite(a["p_value"].values).all()


@pytest.mark.slow  # the mixed file's per-layer nulls: 149 s of set-up on 2 quiet cores
def test_each_layer_is_tested_against_its_own_null(spectral):
    """Layers 0 and 2 (Q4_K) score as in the all-Q4_K file, layer 1 (Q6_K) as in the all-Q6_K
    file: the same bytes against the same null, whatever the other layers are."""
    mixed = spectral["mixed"]
    for layer, kind in enumerate(["q4_k", "q6_k", "q4_k"]):
        _same_layer(mixed, spectral[kind], layer)
        # exact: integers / booleans
        np.testing.assert_array_equal(mixed["n_spikes"].sel(layer=layer).values,
                                      spectral[kind]["n_spikes"].sel(layer=layer).values)
    # and the nulls do differ: layer 1 against the Q4_K null gives other p-values
    assert not np.array_equal(mixed["p_value"].sel(layer=1).values,
                              spectral["q4_k"]["p_value"].sel(layer=1).values)
    assert not np.array_equal(mixed["null_mean"].sel(layer=1).values,
                              spectral["q4_k"]["null_mean"].sel(layer=1).values)
    # BH runs over all heads of the model, not per group
    from rmtbase.decision.significance import benjamini_hochberg

    _, q = benjamini_hochberg(mixed["head_p_value"].values, mixed.attrs["alpha"])
    # exact: the same numpy function on the same p-values
    np.testing.assert_array_equal(mixed["head_q_value"].values, q)


@pytest.mark.slow
def test_element_statistics_use_each_layers_null(files, module_cache):
    """The same with element statistics of W_K and W_QK (each storage's joint table of 40
    draws)."""
    from rmtbase.scoring import score_model

    mixed = score_model(str(files["mixed"]), **ELEMENT_KW)
    q4k = score_model(str(files["q4_k"]), **ELEMENT_KW)
    q6k = score_model(str(files["q6_k"]), **ELEMENT_KW)
    for layer, ref in enumerate([q4k, q6k, q4k]):
        _same_layer(mixed, ref, layer)


@pytest.mark.slow  # the mixed file's per-layer nulls: 149 s of set-up on 2 quiet cores
def test_uniform_file_is_one_null_as_before(spectral):
    """A file with one type everywhere: one table, :func:`score_values` against it, and the
    single-storage attrs (no per-layer variables)."""
    from rmtbase.baseline.cache import null_table
    from rmtbase.decision.verdict import score_values
    from rmtbase.scoring.nulls.layer_null import null_arrays as _null_arrays

    ds = spectral["q6_k"]
    assert ds.attrs["null_storage"] == ds.attrs["quantisation"] == "q6_k"
    assert "layer_null_storage" not in ds and "layer_quantisation" not in ds
    assert ds.attrs["null"].endswith("passed through the q6_k block quantiser like the checkpoint")
    stats = [str(s) for s in ds["stat"].values]
    null = _null_arrays(null_table(D, D // HEADS, stats="spectral", min_draws=KW["draws"],
                                   storage="q6_k"), stats, D, D // HEADS)
    values = {s: ds["value"].sel(stat=s).values for s in stats}
    ref = score_values(values, ds["sigma_q"].values, ds["sigma_k"].values, null,
                       group_size=HEADS // KV)
    for v, w in (("p_value",) * 2, ("q_value",) * 2, ("head_p_statistics", "head_p_value"),
                 ("distance",) * 2):  # the statistics' omnibus (score_model then adds the axes)
        # exact: the same numpy scoring on the same values and the same cached null table
        np.testing.assert_array_equal(ds[v].values, ref[w].values, err_msg=v)


@pytest.mark.slow  # the mixed file's per-layer nulls: 149 s of set-up on 2 quiet cores
def test_w_q_and_w_k_in_different_types_get_the_float_null(tmp_path, module_cache):
    """A layer whose W_Q and W_K are in different block types cannot be matched by one round
    trip: under "auto", as under "none", it is scored against the float null with histogram
    statistics left out, and the provenance names the layer and both types."""
    from rmtbase.scoring import score_model

    path = _write(tmp_path / "qk.gguf", ["q4_k", "q4_k", "q4_k"], ["q4_k", "q6_k", "q4_k"])
    kw = dict(KW, stats=["k.entropy", "k.excess_kurtosis"], draws=40, max_draws=40)
    # under auto, layers 0 and 2 keep their matched Q4_K null; under none every layer is float
    for quantized_null, storage in (("auto", "q4_k (layers 0, 2), float32 (layer 1)"),
                                    ("none", "float32")):
        ds = score_model(str(path), quantized_null=quantized_null, **kw)
        assert "k.entropy" in ds.attrs["unreliable"], quantized_null
        assert "k.excess_kurtosis" not in ds.attrs["unreliable"], quantized_null
        assert ds.attrs["quantisation"] == "q4_k (layers 0, 2), q4_k+q6_k (layer 1)"
        assert "layer 1 looks dequantised from q4_k+q6_k" in ds.attrs["null"]
        assert ds.attrs["null_storage"] == storage, quantized_null


def test_dequantised_folder_detected_layer_by_layer(tmp_path, module_cache):
    """A Hugging Face folder whose layers went through different block round trips (Q4_0,
    Q8_0): each layer's lattice is detected and scored against its own null."""
    import jax.numpy as jnp
    import torch
    import transformers as tf

    from rmtbase.scoring import score_model
    from rmtbase.stats.precision import round_trip

    cfg = tf.LlamaConfig(hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=KV,
                         num_hidden_layers=2, intermediate_size=64, vocab_size=50,
                         max_position_embeddings=16)
    torch.manual_seed(5)
    model = tf.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for name, prm in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                fmt = "q4_0" if ".layers.0." in name else "q8_0"
                w = np.asarray(round_trip(jnp.asarray(prm.numpy()), fmt))
                prm.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
    model.save_pretrained(tmp_path / "folder")
    ds = score_model(str(tmp_path / "folder"), **KW)
    assert ds.attrs["quantisation"] == ds.attrs["null_storage"] == "q4_0 (layer 0), q8_0 (layer 1)"
    assert list(ds["layer_null_storage"].values) == ["q4_0", "q8_0"]
