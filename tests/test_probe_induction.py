"""The probe's ``duplicate_token`` and ``induction`` behaviours against hand-built attention on
a tiny token sequence whose repeats are written out by hand here, and against TransformerLens'
head-detector normalisation (Σ A·D / T, written out independently); then through
``probe_model`` on a tiny GPT-2 folder against a direct loop."""

import numpy as np
import pytest

from rmtbase.probe.behaviour import BEHAVIOURS, DESCRIPTIONS, behaviours, token_patterns

# position: 0    1  2  3  4  5  6  7
IDS = np.array([0, 5, 6, 7, 5, 6, 7, 9])
T = IDS.size
#: query -> earlier occurrences of its token (by hand)
DUP = {4: [1], 5: [2], 6: [3]}
#: query -> the keys right after those occurrences (by hand)
IND = {4: [2], 5: [3], 6: [4]}


def _attention(targets: dict[int, list[int]]) -> np.ndarray:
    """(1, T, T) causal attention: uniform on ``targets[i]`` where given, else on key 0."""
    a = np.zeros((1, T, T))
    for i in range(T):
        keys = targets.get(i, [0])
        a[0, i, keys] = 1.0 / len(keys)
    return a


def test_patterns_by_hand():
    dup, ind = token_patterns(IDS)
    assert {i: list(np.flatnonzero(dup[i])) for i in range(T) if dup[i].any()} == DUP
    assert {i: list(np.flatnonzero(ind[i])) for i in range(T) if ind[i].any()} == IND
    # a token repeating its predecessor: TransformerLens' induction pattern counts key j = i
    dup, ind = token_patterns([0, 3, 3, 3])
    assert list(np.flatnonzero(dup[3])) == [1, 2] and list(np.flatnonzero(ind[3])) == [2, 3]
    assert list(np.flatnonzero(ind[2])) == [2] and not ind[1].any()


def test_exact_targets_score_one():
    for which, targets in (("duplicate_token", DUP), ("induction", IND)):
        b = behaviours(_attention(targets), causal=True, ids=IDS)
        assert b[which][0] == pytest.approx(1.0, abs=1e-15), which
    # the induction head's attention is no duplicate-token head and the other way round
    assert behaviours(_attention(IND), causal=True, ids=IDS)["duplicate_token"][0] == 0.0
    assert behaviours(_attention(DUP), causal=True, ids=IDS)["induction"][0] == 0.0
    # a previous-token head scores 0 on both here (no token repeats its predecessor)
    prev = _attention({i: [i - 1] for i in range(1, T)})
    b = behaviours(prev, causal=True, ids=IDS)
    assert b["prev_token"][0] == 1.0 and b["induction"][0] == 0.0


def test_uniform_attention_known_value():
    a = np.tril(np.ones((T, T)))
    a = (a / a.sum(axis=1, keepdims=True))[None]
    b = behaviours(a, causal=True, ids=IDS)
    want = np.mean([1 / 5, 1 / 6, 1 / 7])  # queries 4, 5, 6: one target each among i + 1 keys
    assert b["duplicate_token"][0] == pytest.approx(want, rel=1e-14)
    assert b["induction"][0] == pytest.approx(want, rel=1e-14)


def test_transformerlens_normalisation():
    """TransformerLens' detect_head ('mul') divides Σ A·D by Σ A = T; ours averages over the
    3 queries with a target: TL = ours × 3 / T. D written from the hand tables."""
    rng = np.random.default_rng(0)
    a = np.tril(rng.random((2, T, T)))
    a /= a.sum(axis=2, keepdims=True)
    b = behaviours(a, causal=True, ids=IDS)
    for which, table in (("duplicate_token", DUP), ("induction", IND)):
        d = np.zeros((T, T))
        for i, keys in table.items():
            d[i, keys] = 1.0
        tl = (a * d).sum(axis=(1, 2)) / a.sum(axis=(1, 2))
        np.testing.assert_allclose(b[which] * 3 / T, tl, rtol=1e-13)


def test_without_ids_nan_and_names():
    b = behaviours(_attention(IND), causal=True)
    assert np.isnan(b["induction"]).all() and np.isnan(b["duplicate_token"]).all()
    assert {"duplicate_token", "induction"} <= set(BEHAVIOURS) <= set(DESCRIPTIONS)
    # special tokens (content False) are not queries; no repeat at all: NaN, count 0
    b = behaviours(_attention({}), causal=True, ids=np.arange(T))
    assert np.isnan(b["induction"]).all()
    content = np.ones(T, dtype=bool)
    content[4] = False  # query 4 is no longer counted
    b = behaviours(_attention(IND), content, causal=True, ids=IDS)
    assert b["induction"][0] == 1.0
    half = _attention({5: [3], 6: [4]})  # query 4 wrong, only counted without the mask
    assert behaviours(half, content, causal=True, ids=IDS)["induction"][0] == 1.0
    assert behaviours(half, causal=True, ids=IDS)["induction"][0] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="token ids"):
        behaviours(_attention(IND), causal=True, ids=IDS[:-1])


def _gpt2_folder(path):
    """A random 2-layer GPT-2 with a word-level tokenizer (transformers only)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(30)]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<s>", *words])},
                                    unk_token="<s>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="<s>",
                                  unk_token="<s>")
    torch.manual_seed(0)
    net = GPT2LMHeadModel(GPT2Config(vocab_size=31, n_positions=64, n_embd=32, n_layer=2,
                                     n_head=4, initializer_range=0.3))
    net.save_pretrained(path)
    tok.save_pretrained(path)
    return path, words


def test_probe_model_matches_direct_loop(tmp_path):
    """probe_model's induction / duplicate_token on a random GPT-2 = a plain loop over
    output_attentions with the repeats found by list search (no token_patterns)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from rmtbase.probe import probe_model
    from rmtbase.probe.text import Text

    folder, words = _gpt2_folder(tmp_path / "gpt2")
    rng = np.random.default_rng(1)
    seg = list(rng.choice(words, 9))
    text = " ".join(list(rng.choice(words, 5)) + seg + list(rng.choice(words, 3)) + seg)
    ds = probe_model(folder, text=Text(text=text, name="t", sha256="0"), window=40,
                     progress=False)
    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(text)["input_ids"]
    net = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        att = net(input_ids=torch.tensor([ids]), output_attentions=True).attentions
    assert len(ids) < 40  # one window; GPT-2's tokenizer adds no BOS here
    for li, a in enumerate(att):
        a = a[0].double().numpy()
        for h in range(a.shape[0]):
            got = {}
            for name, keys_of in (
                    ("duplicate_token", lambda i: [j for j in range(i) if ids[j] == ids[i]]),
                    ("induction", lambda i: [j for j in range(1, i + 1)
                                             if j - 1 < i and ids[j - 1] == ids[i]])):
                vals = [a[h, i, keys_of(i)].sum() for i in range(1, len(ids)) if keys_of(i)]
                got[name] = np.mean(vals)
                assert float(ds[name][li, h]) == pytest.approx(got[name], rel=1e-5), (li, h)
    assert ds["induction"].attrs["units"] == "1"
