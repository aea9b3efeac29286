"""The circuit tools checked where the truth is known, on small GPT-2s **with MLPs** and ≥ 3
layers trained to contain a previous-token → induction circuit
(:mod:`rmtbase.studies._mlp_induction`).

The ground truth is this file's own path patching, in plain torch from the state dict (no
rmtbase code, no transformers forward): for each induction head R (induction score ≥ 0.4 on
repeated random tokens, by :func:`induction_scores`) and each head S of an earlier layer, S's
direct output is subtracted from R's **key input only** (the residual R's layer reads,
LayerNorm recomputed on the patched residual, R's keys from it, its queries and values from
the clean residual, causal mask), and R's induction score is measured again; the drop
(clean − patched, mean over sequences, with its standard error) is S's causal effect on R
through K. The causally dominant K source is the largest drop.

The forward is checked against transformers' logits, and the patching against a run of the
model with the source head's output projection zeroed (MLPs zeroed, so that the receiver's
residual is exactly the clean one minus the source's output) in the quick tier.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

#: Repeated random tokens: BOS, a random segment of this length, the same segment again.
REP_LEN = 8
#: Sequences of the probe (fixed generator seed below).
N_SEQ = 128
#: Induction heads: induction score ≥ this (the study's label threshold).
INDUCTION_MIN = 0.4


# The plain-torch GPT-2 (forward, LayerNorm, Conv1D q/k/v, causal softmax) is shared with the
# zoo's truth (tests/_circuit_truth.py, which adds the via-MLP path and the other scores).
from _circuit_truth import _layer, _ln, _pattern, _qkv, forward  # noqa: E402


def repeated_tokens(vocab, n=N_SEQ, length=REP_LEN, seed=0):
    """(ids, pos): BOS (id 0), a uniform random segment of ``length`` tokens from 1 … V, the
    same segment again; positions 0 … 2·length."""
    rng = np.random.default_rng(seed)
    seg = rng.integers(1, vocab + 1, size=(n, length))
    ids = np.concatenate([np.zeros((n, 1), np.int64), seg, seg], axis=1)
    pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).copy()
    return torch.from_numpy(ids), torch.from_numpy(pos)


def induction_scores(pattern):
    """(B, H) mean attention of each second-copy query i (length + 1 … 2 length) on the key
    i − length + 1, the token after the query token's earlier occurrence, for the
    :func:`repeated_tokens` layout (T = 2 length + 1)."""
    length = (pattern.shape[-1] - 1) // 2
    i = torch.arange(length + 1, 2 * length + 1)
    return pattern[:, :, i, i - length + 1].mean(-1)


def path_patch(sd, ids, pos, n_head, receiver, source, where=("k",), run=None):
    """(B,) the receiver's induction score with the source head's direct output removed from
    the receiver's ``where`` inputs only ("q" and/or "k"; the other reads the clean residual;
    the score does not read values). ``receiver``, ``source``: (layer, head), source layer <
    receiver layer. ``run``: :func:`forward`'s result on (ids, pos), computed when None."""
    (lr, hr), (ls, hs) = receiver, source
    _, resid, heads, _ = forward(sd, ids, pos, n_head) if run is None else run
    w = _layer(sd, lr)
    clean = _qkv(w, _ln(resid[lr], w["ln_1.weight"], w["ln_1.bias"]), n_head)
    patched = _qkv(w, _ln(resid[lr] - heads[ls][:, hs], w["ln_1.weight"], w["ln_1.bias"]),
                   n_head)
    q, k = (patched[j] if name in where else clean[j] for j, name in enumerate("qk"))
    return induction_scores(_pattern(q[:, hr:hr + 1], k[:, hr:hr + 1]))[:, 0]


def k_drops(sd, ids, pos, n_head, receiver):
    """{source: (mean drop, se over sequences)} of every head of an earlier layer."""
    run = forward(sd, ids, pos, n_head)
    base = induction_scores(run[3][receiver[0]])[:, receiver[1]]
    out = {}
    for ls in range(receiver[0]):
        for hs in range(n_head):
            d = (base - path_patch(sd, ids, pos, n_head, receiver, (ls, hs), run=run)).numpy()
            out[(ls, hs)] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))))
    return out


def _tiny(seed=0, zero_mlp=False, n_layer=3):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=17, n_positions=48, n_embd=32, n_layer=n_layer, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False,
                     initializer_range=0.2, attn_implementation="eager")
    net = GPT2LMHeadModel(cfg).eval()
    if zero_mlp:
        with torch.no_grad():
            for blk in net.transformer.h:
                blk.mlp.c_proj.weight.zero_()
                blk.mlp.c_proj.bias.zero_()
    return net


def _sd(net):
    return {k: v.detach().double() for k, v in net.state_dict().items()}


def test_forward_equals_transformers():
    net = _tiny().double()
    ids, pos = repeated_tokens(16, n=4, length=8)
    with torch.no_grad():
        ref = net(input_ids=ids, position_ids=pos, output_attentions=True)
        logits, _, _, pats = forward(_sd(net), ids, pos, 4)
    assert torch.allclose(logits, ref.logits, rtol=1e-9, atol=1e-9)
    for a, b in zip(pats, ref.attentions, strict=True):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_patching_equals_a_run_without_the_source():
    """MLPs zeroed: layer 1's residual is then the clean one minus layer-0 head s's output
    exactly when s's output projection rows are zeroed, so patching q and k together must give
    layer 1's attention of that run, and patching k alone must differ from it."""
    net = _tiny(1, zero_mlp=True, n_layer=2).double()
    ids, pos = repeated_tokens(16, n=4, length=8)
    sd = _sd(net)
    s, dh = 2, 8
    cut = {k: v.clone() for k, v in sd.items()}
    cut["transformer.h.0.attn.c_proj.weight"][s * dh:(s + 1) * dh] = 0
    _, _, _, pats = forward(cut, ids, pos, 4)
    for r in range(4):
        want = induction_scores(pats[1])[:, r]
        got = path_patch(sd, ids, pos, 4, (1, r), (0, s), where=("q", "k"))
        assert torch.allclose(got, want, rtol=1e-10, atol=1e-12)
    k_only = path_patch(sd, ids, pos, 4, (1, 0), (0, s))
    assert not torch.allclose(k_only, induction_scores(pats[1])[:, 0], atol=1e-6)


def ground_truth(folder):
    """Per induction head of the trained model in ``folder`` (receivers in layers ≥ 1 with
    induction score ≥ :data:`INDUCTION_MIN`): its score, every earlier head's K drop
    (:func:`k_drops`), the causally dominant source, the runner-up, and the dominant source's
    rank among the receiver's earlier sources by K-composition (rmtbase's one implementation,
    raw weights; 1 = largest)."""
    import json
    from pathlib import Path

    from transformers import GPT2LMHeadModel

    from rmtbase.studies._circuit_checkpoint import k_composition

    net = GPT2LMHeadModel.from_pretrained(folder)
    info = json.loads((Path(folder) / "train_info.json").read_text())
    n_head = net.config.n_head
    sd = _sd(net)
    ids, pos = repeated_tokens(info["recipe"]["vocab"])
    with torch.no_grad():
        _, _, _, pats = forward(sd, ids, pos, n_head)
        scores = np.stack([induction_scores(p).mean(0).numpy() for p in pats])
        kc = k_composition(folder)
        rows = []
        for lr, hr in zip(*np.nonzero(scores[1:] >= INDUCTION_MIN), strict=True):
            rec = (int(lr) + 1, int(hr))
            drops = k_drops(sd, ids, pos, n_head, rec)
            order = sorted(drops, key=lambda s: -drops[s][0])
            weights = sorted(drops, key=lambda s: -kc[s[0], s[1], rec[0], rec[1]])
            rows.append({"receiver": rec, "induction": float(scores[rec]), "drops": drops,
                         "dominant": order[0], "runner_up": order[1],
                         "rank_weights": weights.index(order[0]) + 1,
                         "n_sources": len(order), "weights_top": weights[:3]})
    return {"info": info, "scores": scores, "rows": rows}


def _name(lh):
    return f"L{lh[0]}H{lh[1]}"


def test_circuits_doc_names_no_machine_path():
    """docs/circuits.md names no shared note by its machine path."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "circuits.md").read_text()
    assert re.findall(r"(?:/work/|/tmp/|/home/)\S*", text) == []


def tool_dominant_k(folder, receivers, draws=200):
    """({receiver: (layer, head) of the tool's dominant confirmed K source or None}, the tool's
    labels (layer, head)) by :func:`rmtbase.circuits.find_circuits` (k = 3) on its own repeated
    random tokens (:data:`REP_LEN` a half, 64 sequences, seed 1: other draws than the ground
    truth's). ``receivers=None``: the tool picks its receivers from its own labels."""
    from transformers import GPT2LMHeadModel

    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.head.sequences import repeated_sequences
    from rmtbase.scoring.composition.run import composition

    net = GPT2LMHeadModel.from_pretrained(folder)
    seqs = repeated_sequences(net.config, n=REP_LEN, batch=N_SEQ, seed=1)
    comp = composition(str(folder), draws=draws)
    ds = find_circuits(str(folder), comp, k=3, sequences=seqs, progress=False,
                       receivers_of_interest=None if receivers is None else list(receivers))
    out = {r: None for r in receivers or ()}
    for i in range(ds.sizes["candidate"]):
        row = {v: ds[v].values[i] for v in ("kind", "layer_from", "head_from", "layer_to",
                                            "head_to", "dominant", "confirmed")}
        if str(row["kind"]) == "k" and bool(row["dominant"]) and bool(row["confirmed"]):
            out[(int(row["layer_to"]), int(row["head_to"]))] = (int(row["layer_from"]),
                                                                int(row["head_from"]))
    return out, ds["label"].transpose("layer", "head").values


#: (configuration, seed) trained and checked; docs/circuits.md "Models with MLPs" has the
#: table. Seeds where a claim fails would be strict xfails with the reason; measured
#: 2026-11-26: all nine pass (48 induction heads; the causal source ranks 1st by
#: K-composition for 43, 2nd of 8 for three layer-2 heads of 4x4d64 seed 0, where a layer-1
#: head with ~1.6x its K-composition has a negative causal effect, and 3rd and 2nd of 8 for two
#: heads of 3x8d64 seed 1, outranked by a weaker previous-token head).
_MISS: dict = {}
CASES = tuple(pytest.param(c, s, marks=pytest.mark.xfail(strict=True, reason=_MISS[c, s]))
              if (c, s) in _MISS else (c, s)
              for c in ("3x4d64", "4x4d64", "3x8d64") for s in (0, 1, 2))


@pytest.mark.slow  # trains each model when not cached: 160-400 CPU-s (docs/circuits.md)
@pytest.mark.parametrize(("config", "seed"), CASES)
def test_tools_find_the_causally_dominant_k_source(config, seed):
    """For every induction head of a trained model with MLPs, the ground truth's causally
    dominant K source (this file's path patching; its drop ≥ 5 se and ≥ 0.1 above the
    runner-up's, so that "dominant" is not a tie) is (1) in the weights' top 3 by
    K-composition among the receiver's earlier sources and (2) the source that
    ``rmtbase.circuits.find_circuits``, choosing its receivers by its own labels, labels
    ``induction`` and confirms as the dominant K source."""
    from rmtbase.studies._mlp_induction import trained_folder

    folder = trained_folder(config, seed)
    gt = ground_truth(folder)
    info = gt["info"]
    assert info["repeat_loss_end"] < 0.5 * info["ln_vocab"], info
    assert gt["rows"], f"no induction head: {gt['scores'].round(2).tolist()}"
    tool, labels = tool_dominant_k(folder, None)
    for r in gt["rows"]:
        rec, dom, ru = r["receiver"], r["dominant"], r["runner_up"]
        (d, se), d2 = r["drops"][dom], r["drops"][ru][0]
        where = f"{_name(rec)} <- {_name(dom)} (drop {d:.3f} +- {se:.3f}, next {d2:.3f})"
        assert d >= 5 * se and d - d2 >= 0.1, where
        assert r["rank_weights"] <= 3, f"{where}: weights rank {r['rank_weights']}"
        assert labels[rec] == "induction", f"{where}: the tool labels it {labels[rec]}"
        assert tool.get(rec) == dom, f"{where}: the tool's dominant K source {tool.get(rec)}"


def test_no_library_bars_drops_only_a_report_of_unexpected_keys(tmp_path, capfd, caplog):
    """transformers' load report (a warning table) of a causal-LM checkpoint read as its base
    model lists lm_head.weight as unexpected: dropped inside ``no_library_bars``, as are the
    save bar; a report of missing keys still shows (``study circuits``)."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    from rmtbase._library_bars import no_library_bars

    cfg = GPT2Config(vocab_size=10, n_positions=8, n_embd=8, n_layer=1, n_head=2,
                     tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    capfd.readouterr()
    caplog.clear()
    with no_library_bars():
        GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "lm")
        GPT2Model.from_pretrained(tmp_path / "lm")
        GPT2Model(cfg).save_pretrained(tmp_path / "base")
    err = capfd.readouterr().err
    assert "Writing model shards" not in err, err  # the bar: tqdm on stderr
    assert "LOAD REPORT" not in caplog.text, caplog.text  # the report: a logged warning
    with no_library_bars():
        GPT2LMHeadModel.from_pretrained(tmp_path / "base")
    assert "LOAD REPORT" in caplog.text and "MISSING" in caplog.text, caplog.text


def test_study_help_says_what_circuits_trains_and_how_long(capsys):
    from rmtbase.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["study", "circuits", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for words in ("circuits trains", "2 layers", "attention only", "1,500 steps", "CPU-s",
                  "--quick"):
        assert words in out, words


def test_trained_folder_is_written_whole_and_then_read(tmp_path, monkeypatch):
    """A tiny configuration (3 layers, MLPs kept): the folder holds a loadable GPT-2 with
    MLP output weights not zeroed (the attention-only recipe zeroes them) and
    ``train_info.json``; a second call reads it
    instead of training (training is replaced by a failure)."""
    import json

    from transformers import GPT2LMHeadModel

    from rmtbase.errors import InputError
    from rmtbase.studies import _mlp_induction as M

    tiny = M.Recipe(n_layer=3, n_head=2, n_embd=16, steps=3, batch=4, eval_batch=8)
    monkeypatch.setitem(M.CONFIGS, "tiny", tiny)
    f = M.trained_folder("tiny", 0, tmp_path)
    info = json.loads((f / "train_info.json").read_text())
    assert info["recipe"]["n_layer"] == 3 and info["seed"] == 0
    assert abs(info["repeat_loss_start"] - info["ln_vocab"]) < 0.1  # init std 0.02: ~uniform
    net = GPT2LMHeadModel.from_pretrained(f)
    assert net.config.n_inner == 4 * 16
    assert all(float(b.mlp.c_proj.weight.detach().abs().max()) > 0 for b in net.transformer.h)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny_seed0"]
    monkeypatch.setattr(M, "train", lambda *a: pytest.fail("trained again"))
    assert M.trained_folder("tiny", 0, tmp_path) == f
    with pytest.raises(InputError, match="unknown configuration"):
        M.trained_folder("nope", 0, tmp_path)
