"""BLOOM's fused ``query_key_value`` (rmtbase.models.bloom) against the model's own forward.

Independent extraction: for the d basis vectors e_j as d tokens, the fused projection (without
its bias) gives W e_j, and the module's own split of the fused output
(``BloomAttention._reshape``, the code its forward runs) yields head h's q at token j =
column j of W_Q,h (k likewise); the bias goes through the same split. No knowledge of the row
order is used, and one-hot float32 matmuls are exact, so the factors must be equal bit for
bit. The full logit/ALiBi check is ``tests/test_models_adapters.py`` (zoo spec
``bloom``).
"""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.models import load_heads, model_info

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

D, N, L = 64, 4, 2


@pytest.fixture(scope="module")
def bloom(tmp_path_factory):
    torch.manual_seed(11)
    cfg = transformers.BloomConfig(vocab_size=50, hidden_size=D, n_layer=L, n_head=N)
    model = transformers.BloomForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.1 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("bloom")
    model.save_pretrained(folder)
    return model, folder


def _forward_qk(model, layer):
    """(W_Q, W_K) each (n_head, d_h, d) and (b_Q, b_K) each (n_head, d_h) as the module splits
    its fused output (``BloomAttention._reshape``): weights from the basis inputs through the
    projection's weight, biases from its bias, each put through the model's own split."""
    attn = model.transformer.h[layer].self_attention
    lin = attn.query_key_value
    with torch.no_grad():
        w = torch.nn.functional.linear(torch.eye(D)[None], lin.weight)  # (1, d tokens, 3d)
        q, k, _ = attn._reshape(w)                                      # (1, n, d, d_h)
        bq, bk, _ = attn._reshape(lin.bias.detach()[None, None])      # (1, n, 1, d_h)
    return (q[0].numpy().transpose(0, 2, 1), k[0].numpy().transpose(0, 2, 1),
            bq[0, :, 0].numpy(), bk[0, :, 0].numpy())


def test_bloom_heads_equal_the_forward_split(bloom):
    model, folder = bloom
    info = model_info(folder)
    assert (info.architecture, info.d, info.n_heads, info.n_kv_heads, info.d_h) == \
        ("bloom", D, N, N, D // N)
    assert info.rotary_fraction == 0.0  # ALiBi: no rotation of q/k
    for source in (folder, model):
        layers = list(load_heads(source))
        assert len(layers) == L
        for lh in layers:
            wq, wk, bq, bk = _forward_qk(model, lh.layer)
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the
            #  model's own q/k rows)
            np.testing.assert_array_equal(lh.wq, wq)
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the
            #  model's own q/k rows)
            np.testing.assert_array_equal(lh.wk, wk)
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.bq, bq)
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.bk, bk)


def test_bloom_rows_are_interleaved_per_head(bloom):
    """A chunk(3) split of the fused rows would give another W_Q: guard against it."""
    model, folder = bloom
    lh = next(load_heads(folder))
    fused = model.transformer.h[0].self_attention.query_key_value.weight.detach().numpy()
    d_h = D // N
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wq[1], fused[3 * d_h:4 * d_h])  # head 1: (1, q)
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
    np.testing.assert_array_equal(lh.wk[1], fused[4 * d_h:5 * d_h])  # head 1: (1, k)
    assert not np.array_equal(lh.wq[1], fused[:D].reshape(N, d_h, D)[1])
