"""A storage of a new family, defined in this test file alone (the extension proof, storage half):
int8 with one scale per row (``w ≈ q·s_r``, q ∈ {−127..127}, s_r = max|row r|/127, the
layout of per-channel int8 checkpoints such as bitsandbytes' LLM.int8 weights), a family
``"row"`` the library does not ship, detected by a function of its record (no 32-entry block
layout), runs through ``score``, a two-model collection and composition; nothing in ``src/``
is told about it.

Cost: two random LLaMAs of 2 layers x 4 heads of 32 (d = 128), 200 null draws drawn once
through the quantiser (the table is shared by both entries), composition with 50 draws.
"""

from __future__ import annotations

import numpy as np
import pytest

NAME = "int8_row"
CALLS: list[tuple] = []


def _int8_rows(x, record):
    """The quantiser: a scale per row (last axis), levels −127..127, read back as x's dtype."""
    import jax.numpy as jnp

    CALLS.append(tuple(x.shape))
    s = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127.0
    q = jnp.clip(jnp.round(x / jnp.where(s > 0, s, 1.0)), -127, 127)
    return (q * s).astype(x.dtype)


def _is_int8_rows(w, record, rel) -> bool:
    """Detection: at least 90 % of the non-zero rows have every entry within 10⁻³ (plus the
    float storage's rounding, ``rel`` of 127) of a multiple of the row's max|x|/127. Gaussian
    float rows of d ≥ 64 entries pass with probability below (2·10⁻³)^64."""
    rows = np.asarray(w, dtype=np.float64).reshape(-1, np.shape(w)[-1])
    amax = np.abs(rows).max(axis=1)
    live = amax > 0
    if not live.any():
        return False
    q = 127.0 * rows[live] / amax[live, None]
    ok = np.all(np.abs(q - np.round(q)) <= 1e-3 + 2 * 127 * rel, axis=1)
    return bool(ok.mean() >= 0.9)


@pytest.fixture(scope="module")
def int8_row():
    from rmtbase.stats.storage import Storage, register, unregister

    record = register(Storage(NAME, "row", _int8_rows, detector=_is_int8_rows))
    try:
        yield record
    finally:
        unregister(NAME)


def _llama(path, seed: int, quantise: bool = True) -> str:
    import jax.numpy as jnp
    import torch
    import transformers as tf

    from rmtbase.stats.precision import round_trip

    torch.manual_seed(seed)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=128, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2,
        intermediate_size=64, vocab_size=50, max_position_embeddings=16, initializer_range=0.02))
    with torch.no_grad():
        for name, prm in model.named_parameters():
            if quantise and name.endswith(("q_proj.weight", "k_proj.weight")):  # (out, in) rows
                w = np.asarray(round_trip(jnp.asarray(prm.detach().numpy()), NAME))
                prm.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def models(int8_row, tmp_path_factory):
    root = tmp_path_factory.mktemp("int8row")
    return [_llama(root / "a", 0), _llama(root / "b", 1)]


@pytest.mark.filterwarnings("ignore:rmtbase. storage plugin 'int8_row'")
def test_the_record_is_a_storage_everywhere(int8_row):
    import jax.numpy as jnp

    from rmtbase.stats.names import QUANT_FORMATS, STORAGES
    from rmtbase.stats.null_kind import GaussianNull
    from rmtbase.stats.precision import detect_quantisation, round_trip

    assert NAME in STORAGES and NAME in QUANT_FORMATS
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.02, (16, 96)).astype(np.float32)  # 96: no 32-block layout needed
    r = np.asarray(round_trip(jnp.asarray(w), NAME))
    s = np.abs(w).max(axis=1, keepdims=True) / np.float32(127)
    np.testing.assert_allclose(r, np.clip(np.round(w / s), -127, 127) * s, rtol=0,
                               atol=1e-7)  # one level is ≥ 4e-4 here: a wrong q shows
    from rmtbase.registry import PluginWarning

    # a format not shipped: its detection is announced in one line naming it (module docstring
    # of rmtbase.stats.detection), once per process and place
    with pytest.warns(PluginWarning, match=r"^rmtbase: storage plugin 'int8_row' "
                      r"\(test_storage_row\) detected its format on dequantised weights"):
        assert detect_quantisation(r) == NAME
    assert detect_quantisation(w) is None
    assert detect_quantisation(r.astype(np.float16).astype(np.float32), storage="float16") \
        == NAME
    assert "int8_row block quantiser" in GaussianNull(NAME).description()
    # a layer of a width no 32-entry block divides (72) is detected too: scoring asks the
    # record's detector at any width
    from rmtbase.models.types import LayerHeads
    from rmtbase.scoring.nulls.layer_null import layer_quantisation

    w72 = np.asarray(round_trip(jnp.asarray(rng.normal(0, 0.02, (2, 8, 72)).astype(np.float32)),
                                NAME))
    assert layer_quantisation(LayerHeads(0, w72, w72), w72, w72, "float32", 1) is int8_row
    assert layer_quantisation(LayerHeads(0, w72, w72), w72 + 1e-3 * rng.normal(size=w72.shape),
                              w72, "float32", 1) is None  # W_Q off the lattice: not detected
    from rmtbase.scoring.matrices.cells import _detect  # --components' per-matrix detection

    assert _detect(w72.reshape(-1, 72), "float32") is int8_row


@pytest.mark.filterwarnings("ignore:rmtbase. storage plugin 'int8_row'")
def test_score_collection_and_composition(int8_row, models, module_cache):
    import rmtbase
    from rmtbase.scoring.collection.trajectory import score_collection
    from rmtbase.scoring.score import score_model

    CALLS.clear()
    ds = score_model(models[0], progress=False, spectrum_draws=0, draws=200)
    assert ds.attrs["quantisation"] == NAME and ds.attrs["null_storage"] == NAME
    assert f"{NAME} block quantiser" in ds.attrs["null"]
    assert CALLS, "the null was not drawn through the int8-per-row quantiser"
    assert "qk.entropy" in set(ds["stat"].values)  # histogram statistics kept: matched null
    assert list(module_cache.glob(f"*-{NAME}-*.nc")), "no null table at the new storage"
    both = score_collection(models, progress=False, spectrum_draws=0, draws=200)
    assert both.sizes["checkpoint"] == 2
    assert list(both["null_storage"].values) == [NAME, NAME]
    comp = rmtbase.composition(models[0], draws=50, seed=0)
    # composition's null is drawn at the checkpoint's float storage (a quantised layer's is not
    # matched, docs/composition.md), and composition names only a file's own block types (it
    # does not detect a dequantised folder's lattice): the file says float32 and no type
    assert comp.attrs["null_storage"] == "float32" and comp.attrs["quantisation"] == ""
    assert np.isfinite(comp["composition_p"].values).any()
