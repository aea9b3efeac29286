"""Behaviour labels (rmtbase.circuits.head.labels), repeated random tokens (sequences) and the
circuit search's output (find/table) on a tiny random-weight model, no network."""

import numpy as np
import pytest
import xarray as xr

from rmtbase.circuits.head import labels as L
from rmtbase.circuits.head.sequences import repeated_sequences, repeated_tokens
from rmtbase.errors import InputError
from rmtbase.probe import behaviour as bh


def _probe(rows):
    """A probe Dataset of one layer whose heads have the given statistics (others 0)."""
    names = ("induction", "prev_token", "duplicate_token", "self", "first_token")
    ds = xr.Dataset(coords={"layer": [0], "head": np.arange(len(rows))})
    for n in names:
        ds[n] = (("layer", "head"), np.array([[r.get(n, 0.0) for r in rows]], dtype=float))
    return ds


def test_label_rule_thresholds_priority_and_ties():
    rows = [
        {"prev_token": 0.9, "first_token": 0.95},       # specific label beats the sink
        {"induction": 0.5, "duplicate_token": 0.45},    # the larger specific score wins
        {"first_token": 0.8, "self": 0.39},             # only the sink passes
        {"self": 0.41},
        {"prev_token": 0.39, "induction": 0.399},       # nothing reaches 0.4
        {"induction": 0.6, "prev_token": 0.6},          # tie: earlier label of LABELS
        {"duplicate_token": np.nan, "self": 0.4},       # NaN earns nothing; >= threshold
    ]
    out = L.label_heads(_probe(rows))
    lab = list(out["label"].values[0])
    assert lab == ["previous-token", "induction", "first-token", "self/local", "none",
                   "induction", "self/local"]
    score = out["label_score"].values[0]
    np.testing.assert_array_equal(score[[0, 1, 2, 3, 5, 6]],  # exact: copied inputs
                                  [0.9, 0.5, 0.8, 0.41, 0.6, 0.4])
    assert np.isnan(score[4]) and out["label_statistic"].values[0][4] == ""
    assert list(out["label_statistic"].values[0][:3]) == ["prev_token", "induction",
                                                         "first_token"]
    assert L.label_heads(_probe(rows), threshold=0.95)["label"].values[0][0] == "first-token"


def test_labels_of_exact_patterns_built_by_hand():
    """Attention built to do one thing labels as that thing, through the probe's statistics."""
    ids = np.array([5, 1, 2, 3, 4, 1, 2, 3, 4])  # BOS then a repeated half
    t = ids.size
    prev, sink, induction = np.zeros((t, t)), np.zeros((t, t)), np.zeros((t, t))
    prev[0, 0] = sink[:, 0] = 1.0
    for i in range(1, t):
        prev[i, i - 1] = 1.0
    _, ind_mask = bh.token_patterns(ids)
    for i in range(t):
        js = np.flatnonzero(ind_mask[i])
        if js.size:
            induction[i, js] = 1.0 / js.size
        else:
            induction[i, 0] = 1.0
    attn = np.stack([prev, sink, induction])
    content = np.ones(t, dtype=bool)
    content[0] = False
    stats = bh.behaviours(attn, content, causal=True, ids=ids)
    ds = xr.Dataset(coords={"layer": [0], "head": [0, 1, 2]})
    for k, v in stats.items():
        ds[k] = (("layer", "head"), v[None])
    out = L.label_heads(ds)
    assert list(out["label"].values[0]) == ["previous-token", "first-token", "induction"]
    np.testing.assert_allclose(out["label_score"].values[0], 1.0, atol=1e-12)


def test_label_heads_refuses_a_probe_without_statistics():
    with pytest.raises(InputError, match="lacks induction"):
        L.label_heads(xr.Dataset(coords={"layer": [0], "head": [0]}))
    with pytest.raises(InputError, match="threshold"):
        L.label_heads(_probe([{}]), threshold=0.0)


def test_repeated_tokens_follow_the_transformerlens_convention():
    x = repeated_tokens(100, 7, 5, seed=3, bos_token_id=9)
    assert x.shape == (5, 15) and x.dtype == np.int64
    assert np.all(x[:, 0] == 9)
    np.testing.assert_array_equal(x[:, 1:8], x[:, 8:])  # exact: integer ids
    # exact: integer ids from one seed
    np.testing.assert_array_equal(x, repeated_tokens(100, 7, 5, seed=3, bos_token_id=9))
    assert not np.array_equal(x, repeated_tokens(100, 7, 5, seed=4, bos_token_id=9))
    g = np.random.default_rng(3)
    # exact: integer ids, a Generator of the same seed
    np.testing.assert_array_equal(repeated_tokens(100, 7, 5, seed=g)[:, :7], x[:, 1:8])
    assert repeated_tokens(100, 7, 5).shape == (5, 14)
    with pytest.raises(InputError, match="vocab_size"):
        repeated_tokens(0, 7, 5)


def test_repeated_tokens_are_uniform_on_the_vocabulary():
    """n = 20,000 draws of 10 ids: each id's share is 0.1 with binomial se 0.0021; every share
    within 5 se (fixed seed)."""
    x = repeated_tokens(10, 1000, 20, seed=0)[:, :1000].ravel()
    share = np.bincount(x, minlength=10) / x.size
    se = np.sqrt(0.1 * 0.9 / x.size)
    assert np.all(np.abs(share - 0.1) < 5 * se)


def test_repeated_sequences_read_the_config():
    from types import SimpleNamespace

    cfg = SimpleNamespace(vocab_size=50, bos_token_id=1, max_position_embeddings=20)
    s = repeated_sequences(cfg, n=8, batch=3, seed=0)
    assert s.source == "repeated_random_tokens" and s.ids.shape == (3, 17)
    assert not s.content[0] and s.content[1:].all()
    # a BOS id outside the vocabulary (GPT-2's 50256 in a small config) gives no prefix
    s = repeated_sequences(SimpleNamespace(vocab_size=50, bos_token_id=50256), n=4, batch=2)
    assert s.ids.shape == (2, 8) and s.content.all()
    with pytest.raises(InputError, match="exceed the model's 20 positions"):
        repeated_sequences(cfg, n=10, batch=1)


def test_the_circuit_search_defaults_to_repeated_random_tokens_at_several_lengths():
    """The default sequences: repeats of 5, 10, 20 and 50 distinct tokens (each fitting 128
    positions and 59 usable ids), max(16, 200/n) sequences each; text needs a tokenizer.
    With 49 usable ids the longest repeat is 49."""
    from types import SimpleNamespace

    from rmtbase.circuits.head.run import make_sequences
    from rmtbase.circuits.head.sequences import length_sequences, repeat_lengths

    assert repeat_lengths(SimpleNamespace(vocab_size=50, bos_token_id=1,
                                          max_position_embeddings=128)) == (5, 10, 20, 49)
    cfg = SimpleNamespace(vocab_size=60, bos_token_id=1, max_position_embeddings=128)
    assert repeat_lengths(cfg) == (5, 10, 20, 50)
    got = length_sequences(cfg, repeat_lengths(cfg), seed=0)
    assert {n: s.ids.shape for n, s in got.items()} == {
        5: (40, 11), 10: (20, 21), 20: (16, 41), 50: (16, 101)}
    for n, s in got.items():
        half = s.ids[:, 1:n + 1]
        assert s.source == "repeated_random_tokens" and s.repeat == n
        assert all(len(set(row)) == n for row in half)       # distinct within a half
        assert not (half == 1).any()                         # the BOS id never drawn
        # exact: integer token ids
        np.testing.assert_array_equal(half, s.ids[:, n + 1:])
    net = SimpleNamespace(config=cfg)
    with pytest.raises(InputError, match="needs the model's tokenizer"):
        make_sequences(net, None, "text", 0)
    with pytest.raises(InputError, match="sequences must be"):
        make_sequences(net, None, "prose", 0)


