"""A storage format is one record (rmtbase.stats.storage).

A toy block format — four uneven levels, 32 entries a block, value q·d with
q ∈ {−1, −0.3, 0.3, 1} and d = fp16(max|x|) per block, detected by a function of its own — is added by one :class:`~rmtbase.stats.storage.Storage` record
(its quantiser a plain function of this test) and a model whose attention weights went
through it is scored end to end: the format is detected, the null is drawn through the toy
quantiser, and the scores say so. Nothing else in the library is told about the format.
"""

from __future__ import annotations

import numpy as np
import pytest

TOY = "toy_t3"
CALLS: list[tuple] = []


#: The toy's levels: not evenly spaced, so no shipped block layout (Q4_1, Q4_0, Q5_0, Q8_0:
#: integer multiples of one step) holds them and the shipped detectors, asked first, say no.
LEVELS = (-1.0, -0.3, 0.3, 1.0)


def _ternary(blocks, storage):
    """The toy quantiser: d = fp16(max|x|) per block, q the level of :data:`LEVELS` nearest
    x/d, value q·d."""
    import jax.numpy as jnp

    CALLS.append(tuple(blocks.shape))
    d = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True).astype(jnp.float16).astype(blocks.dtype)
    safe = jnp.where(d > 0, d, 1.0)
    levels = jnp.asarray(LEVELS, blocks.dtype)
    q = levels[jnp.argmin(jnp.abs(blocks[..., None] / safe[..., None] - levels), axis=-1)]
    return q * d


def _is_toy(w, record, rel) -> bool:
    """Detection: ≥ 90 % of the live 32-blocks have every x/max|x| within 10⁻³ (plus the float
    storage's rounding) of a level of :data:`LEVELS`."""
    n = np.shape(w)[-1]
    if n % 32:
        return False
    b = np.asarray(w, dtype=np.float64).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    live = amax > 0
    if not live.any():
        return False
    x = b[live] / amax[live, None]
    gap = np.abs(x[..., None] - np.asarray(LEVELS)).min(axis=-1)
    return bool((gap <= 1e-3 + 4 * rel).all(axis=1).mean() >= 0.9)


@pytest.fixture
def toy():
    from rmtbase.stats.storage import Storage, register, unregister

    # detection by its own function, asked after the shipped formats' layouts
    record = register(Storage(TOY, "block", _ternary, block=32, detector=_is_toy))
    CALLS.clear()
    try:
        yield record
    finally:
        unregister(TOY)


@pytest.mark.filterwarnings("ignore:rmtbase. storage plugin 'toy_t3'")
def test_one_record_is_a_storage_everywhere(toy):
    import jax.numpy as jnp

    from rmtbase.errors import InputError
    from rmtbase.stats.names import QUANT_FORMATS, STORAGES
    from rmtbase.stats.null_kind import GaussianNull
    from rmtbase.stats.precision import (
        block_size,
        check_storage,
        detect_quantisation,
        is_lattice,
        null_rows,
        round_trip,
    )
    from rmtbase.stats.storage import Storage, register

    assert TOY in STORAGES and TOY in QUANT_FORMATS and check_storage(TOY.upper()) == TOY
    assert block_size(TOY) == 32 and null_rows(TOY, 16) == 16 and not is_lattice(TOY)
    w = np.random.default_rng(0).normal(0, 0.02, (8, 64)).astype(np.float32)
    r = np.asarray(round_trip(jnp.asarray(w), TOY))
    d = np.abs(w.reshape(8, 2, 32)).max(-1, keepdims=True).astype(np.float16).astype(np.float32)
    lv = np.asarray(LEVELS, np.float32)
    q = lv[np.abs(w.reshape(8, 2, 32)[..., None] / d[..., None] - lv).argmin(-1)]
    # exact: r = q·d, one float32 product of the same q and d in both (q differs only where
    # w/d falls within an ulp of a midpoint between levels)
    assert np.array_equal(r, (q * d).reshape(8, 64))
    from rmtbase.registry import PluginWarning

    with pytest.warns(PluginWarning, match=r"^rmtbase: storage plugin 'toy_t3' "
                      r"\(test_storage_record\) detected its format on dequantised weights"):
        assert detect_quantisation(r) == TOY
    assert detect_quantisation(w) is None
    assert "toy_t3 block quantiser" in GaussianNull(TOY).description()
    with pytest.raises(InputError, match="multiple of 32"):
        round_trip(jnp.ones((2, 48)), TOY)
    with pytest.raises(InputError, match="already registered"):
        register(Storage(TOY, "float", "precision:cast"))


def test_toy_record_gone_when_unregistered():
    from rmtbase.errors import InputError
    from rmtbase.stats.names import STORAGES
    from rmtbase.stats.precision import check_storage

    assert TOY not in STORAGES
    with pytest.raises(InputError, match="storage must be one of"):
        check_storage(TOY)


@pytest.mark.filterwarnings("ignore:rmtbase. storage plugin 'toy_t3'")
def test_model_in_a_toy_format_is_scored_end_to_end(toy, tmp_path, module_cache):
    """A random LLaMA (d = 128, 4 heads of 32, 1 layer) whose W_Q and W_K went through the toy
    round trip, saved as float32: scoring detects the format, draws its null through the toy
    quantiser (a null table ``...-toy_t3-...`` in the cache) and names it."""
    import jax.numpy as jnp
    import torch
    import transformers as tf

    from rmtbase.scoring.score import score_model
    from rmtbase.stats.precision import round_trip

    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=128, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=1,
        intermediate_size=64, vocab_size=50, max_position_embeddings=16, initializer_range=0.02))
    with torch.no_grad():
        for name, prm in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                w = np.asarray(round_trip(jnp.asarray(prm.detach().numpy()), TOY))
                prm.copy_(torch.from_numpy(np.array(w, dtype=np.float32)))
    model.save_pretrained(tmp_path / "toy")
    CALLS.clear()
    ds = score_model(str(tmp_path / "toy"), progress=False, spectrum_draws=0, draws=200)
    assert ds.attrs["quantisation"] == TOY and ds.attrs["null_storage"] == TOY
    assert f"{TOY} block quantiser" in ds.attrs["null"]
    assert CALLS, "the null was not drawn through the toy quantiser"
    assert list(module_cache.glob(f"*-{TOY}-*.nc")), "no null table at the toy storage"
    p = ds["p_value"].values
    assert p.shape[-1] == ds.sizes["stat"] and np.isfinite(p).any()
    assert "qk.entropy" in set(ds["stat"].values)  # histogram statistics kept: matched null


def test_a_mixed_layer_is_a_record():
    """A layer whose W_Q and W_K are stored in different formats is a MixedStorage of their
    records: the files' "+"-joined name read once, the same name written back; its
    null under "auto" is the float one, histogram statistics left out (one round trip cannot
    match two formats), as under "none"; a forced --quantized-null is drawn as asked. The
expected values were computed without the record (format names as strings)."""
    import jax.numpy as jnp

    from rmtbase.errors import InputError
    from rmtbase.models.types import LayerHeads
    from rmtbase.scoring.nulls.layer_null import layer_null, layer_quantisation
    from rmtbase.stats.precision import round_trip
    from rmtbase.stats.storage import MixedStorage, quantisation_record, storage_record

    q4k, q6k = storage_record("q4_k"), storage_record("q6_k")
    mixed = quantisation_record("q6_k+q4_k")
    assert mixed == MixedStorage((q4k, q6k)) and mixed.parts == (q4k, q6k)
    assert mixed.name == "q4_k+q6_k" and mixed.is_mixed and not q4k.is_mixed
    assert quantisation_record(mixed.name) == mixed and quantisation_record("q4_k") is q4k
    assert quantisation_record(None) is None and quantisation_record("none") is None
    with pytest.raises(InputError, match="storage must be one of"):
        quantisation_record("q4_k+iq2_xs")
    with pytest.raises(InputError, match="two or more"):
        MixedStorage((q4k, q4k))
    # a GGUF layer's name, looked up once; a dequantised folder's lattices, detected
    rng = np.random.default_rng(3)
    wq, wk = (rng.normal(0, 0.02, (2, 16, 64)).astype(np.float32) for _ in range(2))
    said = LayerHeads(0, wq, wk, quantisation="q4_k+q6_k")
    assert layer_quantisation(said, wq, wk, "float32", 1) == mixed
    wq = np.asarray(round_trip(jnp.asarray(wq), "q8_0"))
    wk = np.asarray(round_trip(jnp.asarray(wk), "q4_0"))
    plain = LayerHeads(0, wq, wk)
    got = layer_quantisation(plain, wq, wk, "float32", 1)
    assert isinstance(got, MixedStorage) and got.name == "q4_0+q8_0"
    assert layer_quantisation(plain, wq, wq, "float32", 1) is storage_record("q8_0")
    # (measured at, null drawn at, histogram statistics unmatched)
    f32, q8 = storage_record("float32"), storage_record("q8_0")  # records in, records out
    assert layer_null(f32, mixed, "auto") == (f32, f32, True)
    assert layer_null(f32, mixed, "none") == (f32, f32, True)
    # forced: the null drawn as asked, the heads measured as read (no one format to round to)
    assert layer_null(f32, mixed, q8) == (f32, q8, False)
    assert layer_null(f32, q4k, "auto") == (q4k, q4k, False)
