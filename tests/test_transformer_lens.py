"""TransformerLens models as model inputs (:mod:`rmtbase.models.transformer_lens`).

Checked against independent computations:

- a 4.x ``TransformerBridge`` booted from a folder (random GPT-2 and grouped-query LLaMA, no
  network) reads the folder's weights bit for bit, so ``score_model`` and ``composition`` give
  the folder's results exactly (tolerance 0: the same float32 factors go through the same code);
- ``composition`` of a bridge, unprocessed and after ``enable_compatibility_mode()`` (fold_ln,
  centring: the processed weights are read), equals TransformerLens' own
  ``all_composition_scores`` to 1e-5 relative (float32 GEMMs in different orders);
- a 3.x ``HookedTransformer`` (MHA and grouped-query) the same, where TransformerLens 3.x is
  installed (4.x removed it);
- everywhere, without TransformerLens: a stand-in of its per-head conventions (``blocks[l].attn.
  W_Q`` …, a class of a ``transformer_lens`` module) against TransformerLens' composition formula
  written out in numpy.

The TransformerLens tests need ``transformer-lens`` beside rmtbase, which the shared .venv
does not carry (it brings datasets, pyarrow, wandb): ``./scripts/test_tl.sh`` runs them in a
venv of their own (``RMTBASE_TL3=1``: with TransformerLens 3.9.0 too; docs/adapters.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase import composition, score_model
from rmtbase.errors import InputError, ModelError
from rmtbase.models import load_heads, model_info
from rmtbase.models.ov import load_ov_heads

HOW = ("transformer-lens is not installed here (kept out of .venv: it brings pyarrow); run "
       "./scripts/test_tl.sh, which installs rmtbase[test,tl] into .venv-tl and runs this file "
       "(docs/adapters.md)")
REL = 1e-5  # composition against TransformerLens: float32 products in other orders
KINDS = ("q", "k", "v")


def _bridge_class():
    pytest.importorskip("transformer_lens", reason=HOW)
    try:
        from transformer_lens.model_bridge import TransformerBridge
    except ImportError:
        pytest.skip("this transformer_lens has no TransformerBridge (3.0 added it)")
    return TransformerBridge


def _tokenizer(vocab: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="t1", eos_token="t2",
                                   unk_token="t0")


def _folder(path, kind: str, seed: int = 0):
    """A random-init model (norm gains and biases randomised too, so that folding shows) saved
    with a word-level tokenizer: the bridge boots from the folder alone."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    if kind == "gpt2":
        net = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=3, n_head=4, n_embd=64, vocab_size=64,
                                               n_positions=32))
    else:  # grouped-query LLaMA: 4 query heads on 2 key/value heads
        net = tf.LlamaForCausalLM(tf.LlamaConfig(
            num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, hidden_size=64,
            intermediate_size=128, vocab_size=64, max_position_embeddings=32))
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 1:  # norm gains 1 ± 0.3, biases N(0, 0.1²)
                p.copy_((1 if "norm" in name or "ln" in name else 0) + 0.3 * torch.randn_like(p))
    net.save_pretrained(path)
    _tokenizer(64).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def offline():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")  # no test reaches the network
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def booted(request, tmp_path_factory, offline):
    bridge = _bridge_class()
    folder = _folder(tmp_path_factory.mktemp(request.param), request.param)
    return folder, bridge.boot_transformers(str(folder))


def _tl_scores(model, kind: str) -> np.ndarray:
    """TransformerLens' all_composition_scores as (layer_from, head_from, layer_to, head_to)."""
    s = model.all_composition_scores(kind.upper())
    return np.asarray(getattr(s, "scores", s).detach().cpu().double().numpy())


def _against_tl(ds, model) -> float:
    worst = 0.0
    L, H = ds.sizes["layer_from"], ds.sizes["head_from"]
    upper = np.arange(L)[:, None, None, None] < np.arange(L)[None, None, :, None]
    upper = np.broadcast_to(upper, (L, H, L, H))
    for kind in KINDS:
        ours = ds["composition"].sel(kind=kind).values
        theirs = _tl_scores(model, kind)
        assert np.isnan(ours[~upper]).all()
        rel = np.abs(ours[upper] - theirs[upper]) / theirs[upper]
        worst = max(worst, float(rel.max()))
    return worst


def test_a_bridge_reads_the_folders_weights_bit_for_bit(booted):
    folder, b = booted
    info, own = model_info(b), model_info(folder)
    assert (info.source, info.architecture) == ("transformer_lens", "transformer_lens")
    for k in ("d", "d_h", "n_layers", "n_heads", "n_kv_heads", "rotary_fraction"):
        assert getattr(info, k) == getattr(own, k), k
    assert info.model_class.endswith(", unprocessed") and "ForCausalLM" in info.model_class \
        or "GPT2LMHeadModel" in info.model_class
    for read in (load_heads, load_ov_heads):
        for a, f in zip(read(b), read(folder), strict=True):
            for x, y in ((a.wq, f.wq), (a.wk, f.wk), (a.bq, f.bq), (a.bk, f.bk)):
                assert (x is None) == (y is None)
                if x is not None:
                    # exact: copies of stored values (the same checkpoint's tensors through two adapters)
                    np.testing.assert_array_equal(x, y)


def test_scores_equal_the_folders(booted, score_cache):
    folder, b = booted
    kw = dict(stats="spectral", draws=200, spectrum_draws=0, progress=False)
    ours, own = score_model(b, **kw), score_model(str(folder), **kw)
    # exact: the same float32 factors through the same compiled programs and null
    np.testing.assert_array_equal(ours["value"].values, own["value"].values)
    # exact: as above
    np.testing.assert_array_equal(ours["head_p_value"].values, own["head_p_value"].values)
    assert np.isfinite(ours["value"].values).all()
    assert ours.attrs["transformer_lens"] == model_info(b).model_class
    assert "transformer_lens" not in own.attrs


def test_composition_equals_transformer_lens_unprocessed_and_processed(booted):
    folder, _ = booted
    b = _bridge_class().boot_transformers(str(folder))  # its own: processed in place below
    raw = composition(b, draws=200)
    # exact: the same float32 factors (checked bit for bit) through the same compiled program
    np.testing.assert_array_equal(raw["composition"].values,
                                  composition(str(folder), draws=200)["composition"].values)
    assert _against_tl(raw, b) <= REL
    assert raw.attrs["transformer_lens"].endswith(", unprocessed")
    b.enable_compatibility_mode(disable_warnings=True)  # fold_ln, centring (in place)
    assert model_info(b).model_class.endswith(", processed")
    for a in load_heads(b):  # the processed weights are read, not the folder's
        want = b.blocks[a.layer].attn.W_Q.detach().double().numpy().transpose(0, 2, 1)
        # exact: copies of stored values (the bridge's own tensors, transposed)
        np.testing.assert_allclose(a.wq, want, rtol=0, atol=0)
    processed = composition(b, draws=200)
    assert _against_tl(processed, b) <= REL
    assert processed.attrs["transformer_lens"].endswith(", processed")
    moved = np.nanmax(np.abs(processed["composition"].values - raw["composition"].values))
    assert moved > 1e-3  # folding the random gains changed the scores


@pytest.mark.parametrize("arch", ["qwen3", "olmo2", "gpt_neox"])
def test_a_bridge_says_what_its_folder_says(arch, tmp_path, offline):
    """W_Q, W_K before a QK-norm (the folder's raw ones); the norm (Qwen3: per head, OLMo 2:
    over all heads) and partial RoPE (GPT-NeoX rotary_pct 0.25) named as for the folder,
    though the bridge's own cfg says neither; fold_qk_norm refused in one line."""
    import transformers as tf

    bridge = _bridge_class()
    kw = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=64,
              intermediate_size=128, vocab_size=64, max_position_embeddings=32)
    net = {"qwen3": lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(
               num_key_value_heads=2, head_dim=16, **kw)),
           "olmo2": lambda: tf.Olmo2ForCausalLM(tf.Olmo2Config(num_key_value_heads=2, **kw)),
           "gpt_neox": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(rotary_pct=0.25, **kw)),
           }[arch]()
    net.save_pretrained(tmp_path)
    _tokenizer(64).save_pretrained(tmp_path)
    b = bridge.boot_transformers(str(tmp_path))
    ours, own = model_info(b), model_info(str(tmp_path))
    for k in ("qk_norm", "rotary_fraction", "n_kv_heads", "d_h"):
        assert getattr(ours, k) == getattr(own, k), k
    for a, f in zip(load_heads(b), load_heads(str(tmp_path)), strict=True):
        # exact: copies of stored values (the same checkpoint's tensors through two adapters)
        np.testing.assert_array_equal(a.wq, f.wq)
        # exact: as above
        np.testing.assert_array_equal(a.wk, f.wk)
    if own.qk_norm != "none":
        with pytest.raises(ModelError, match="q/k norm gains of a TransformerLens model"):
            load_heads(b, fold_qk_norm=True)
    else:
        assert own.rotary_fraction == 0.25


def test_circuits_take_a_bridge_as_the_model_it_wraps(booted):
    """find_circuits(bridge, composition(bridge)) equals find_circuits on the Hugging Face model
    loaded from the folder with the folder's composition, array for array (the bridge runs as
    the transformers model it wraps, rebuilt: circuits.model.bridge_net); a processed bridge is
    refused in one line (its wrapped modules compute other logits)."""
    import transformers as tf

    from rmtbase.circuits import find_circuits, repeated_sequences

    folder, b = booted
    net = tf.AutoModelForCausalLM.from_pretrained(str(folder))
    seqs = repeated_sequences(net.config, n=8, batch=4)
    kw = dict(sequences=seqs, progress=False, receivers_of_interest=[(2, 0), (1, 3)])
    ours = find_circuits(b, composition(b, draws=200), **kw)
    own = find_circuits(net, composition(str(folder), draws=200), **kw)
    assert ours.sizes == own.sizes and ours.sizes[next(iter(ours.sizes))] > 0
    for v in ours.data_vars:
        if ours[v].dtype.kind == "f":
            np.testing.assert_allclose(ours[v].values, own[v].values, rtol=1e-5, atol=1e-6)
    p = _bridge_class().boot_transformers(str(folder))
    p.enable_compatibility_mode()
    with pytest.raises(ModelError, match="weights were processed: boot an unprocessed bridge"):
        find_circuits(p, composition(p, draws=200), **kw)


def _hooked(tl, n_kv: int | None, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    cfg = tl.HookedTransformerConfig(n_layers=3, d_model=64, n_ctx=16, d_head=16, n_heads=4,
                                     d_vocab=50, act_fn="gelu", normalization_type="LN",
                                     n_key_value_heads=n_kv, positional_embedding_type="rotary")
    return tl.HookedTransformer(cfg)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("n_kv", [None, 2])
def test_hooked_transformer_of_3x(n_kv):
    tl = pytest.importorskip("transformer_lens", reason=HOW)
    try:
        tl.HookedTransformer  # noqa: B018 - 4.x raises ImportError here
    except (ImportError, AttributeError):
        pytest.skip("TransformerLens 4.x removed HookedTransformer; RMTBASE_TL3=1 "
                    "./scripts/test_tl.sh puts 3.9.0 first on the path")
    m = _hooked(tl, n_kv)
    info = model_info(m)
    assert (info.n_heads, info.n_kv_heads, info.d_h, info.rotary_fraction) == \
        (4, n_kv or 4, 16, 1.0)
    for a in load_heads(m):
        attn = m.blocks[a.layer].attn
        # exact: copies of stored values (the model's own tensors, transposed)
        np.testing.assert_array_equal(a.wq, attn.W_Q.detach().numpy().transpose(0, 2, 1))
        # exact: as above
        np.testing.assert_array_equal(a.wk, attn.W_K.detach().numpy().transpose(0, 2, 1))
    assert _against_tl(composition(m, draws=200), m) <= REL


# -- without TransformerLens: its conventions, written out --------------------------------

class _Attn:
    def __init__(self, rng, h, h_kv, d, dh):
        import torch

        t = lambda *s: torch.tensor(rng.standard_normal(s), dtype=torch.float32)  # noqa: E731
        self.W_Q, self.W_K, self.W_V = t(h, d, dh), t(h_kv, d, dh), t(h_kv, d, dh)
        self.W_O, self.b_Q, self.b_K = t(h, dh, d), t(h, dh), t(h_kv, dh)
        self.b_V, self.b_O = t(h_kv, dh), t(d)


class _Cfg:
    n_layers, n_heads, n_key_value_heads, d_head, d_model = 3, 4, 2, 8, 32
    model_name = "stand-in"


class _StandIn:
    """TransformerLens' per-head layout: q = x @ W_Q[h] + b_Q[h], out = z @ W_O."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        c = self.cfg = _Cfg()
        self.blocks = [type("B", (), {"attn": _Attn(rng, c.n_heads, c.n_key_value_heads,
                                                    c.d_model, c.d_head)})()
                       for _ in range(c.n_layers)]


_StandIn.__module__ = "transformer_lens.stand_in"  # recognised by its package, not imported


def _numpy_composition(m) -> dict[str, np.ndarray]:
    """Elhage et al.'s scores in TransformerLens' row convention (its ``composition_scores``:
    ‖left·right‖_F / (‖left‖_F ‖right‖_F); K: OV_{h1} · QK_{h2}ᵀ, Q: OV_{h1} · QK_{h2},
    V: OV_{h1} · OV_{h2}), from dense d × d matrices, keys/values repeated to query heads."""
    g = m.cfg.n_heads // m.cfg.n_key_value_heads
    qk, ov = [], []
    for blk in m.blocks:
        a = blk.attn
        wq, wo = a.W_Q.double().numpy(), a.W_O.double().numpy()
        wk = np.repeat(a.W_K.double().numpy(), g, 0)
        wv = np.repeat(a.W_V.double().numpy(), g, 0)
        qk.append(wq @ wk.transpose(0, 2, 1))
        ov.append(wv @ wo)
    L, H = len(qk), m.cfg.n_heads
    out = {k: np.full((L, H, L, H), np.nan) for k in KINDS}
    f = np.linalg.norm
    for l1 in range(L):
        for l2 in range(l1 + 1, L):
            for h1 in range(H):
                for h2 in range(H):
                    left = ov[l1][h1]
                    rights = {"k": qk[l2][h2].T, "q": qk[l2][h2], "v": ov[l2][h2]}
                    for k, r in rights.items():
                        out[k][l1, h1, l2, h2] = f(left @ r) / (f(left) * f(r))
    return out


def test_a_stand_in_of_transformer_lens_conventions_matches_its_formula():
    m = _StandIn()
    info = model_info(m)
    assert (info.source, info.n_kv_heads, info.d_h, info.d) == ("transformer_lens", 2, 8, 32)
    ds = composition(m, draws=200)
    want = _numpy_composition(m)
    for k in KINDS:
        np.testing.assert_allclose(ds["composition"].sel(kind=k).values, want[k], rtol=1e-5)
    for a in load_heads(m):  # per head: rmtbase's (d_h, d) is TransformerLens' (d, d_h)ᵀ
        attn = m.blocks[a.layer].attn
        # exact: copies of stored values (the stand-in's own tensors, transposed)
        np.testing.assert_array_equal(a.wq, attn.W_Q.numpy().transpose(0, 2, 1))
        # exact: as above
        np.testing.assert_array_equal(a.bq, attn.b_Q.numpy())
        # exact: as above
        np.testing.assert_array_equal(a.wk, np.repeat(attn.W_K.numpy(), 2, 0).transpose(0, 2, 1))


def test_refusals_are_one_line():
    m = _StandIn()
    with pytest.raises(InputError, match="revision"):
        model_info(m, revision="main")
    m.blocks[1] = type("B", (), {"attn": None})()
    with pytest.raises(ModelError, match="block 1 has no attn"):
        model_info(m)
    m = _StandIn()
    m.blocks[2].attn.W_Q = m.blocks[2].attn.W_Q[:, :, :4]
    with pytest.raises(ModelError, match=r"W_Q of stand-in has shape \(4, 32, 4\)"):
        list(load_heads(m))


def test_circuits_refuse_a_transformer_lens_model_without_a_transformers_one():
    """find_circuits runs a transformers forward: a TransformerLens model that holds no
    transformers model (3.x HookedTransformer; here the stand-in) is refused in one line before
    any work (before: a TypeError from its forward)."""
    from rmtbase.circuits import find_circuits

    m = _StandIn()
    ds = composition(m, draws=200)
    with pytest.raises(ModelError, match=r"TransformerLens _StandIn holds none: pass the "
                                         r"Hugging Face model"):
        find_circuits(m, ds, progress=False)
