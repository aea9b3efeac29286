"""Study ``circuits``: K-composition against a computation from GPT-2's raw
state dict, the helpers on hand values, the quick pipeline (a few training steps: outputs and
probe labels, not a circuit), and, slow, the acceptance criteria on trained models of 3 seeds."""

import numpy as np
import pytest
import xarray as xr

from rmtbase import studies
from rmtbase.studies.circuits import auc, largest_step, outranked, profile_drop_ratio, profile_lags


def _random_gpt2(path, seed=0):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    net = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=3,
                                     n_head=4, n_inner=16, initializer_range=0.1))
    net.save_pretrained(path)
    return net


def test_k_composition_against_state_dict(tmp_path):
    """Elhage's K-composition from explicit float64 d × d products of GPT-2's Conv1D weights
    (x @ W layout: W_Q,h = c_attn.weight[:, h·dh:(h+1)·dh]ᵀ, W_O,h = c_proj.weight[h·dh:…]ᵀ)
    against the study's :func:`k_composition`, which is the library's float32 implementation.
    Tolerance 1e-5 relative, the bound for composition: s² = tr(Mᵀ G_Q M G_V) is a sum
    of (d_h² + d) float32 products, |error| ≲ (d_h² + d)·2⁻²⁴ ≈ 6e-6 of the terms' magnitude
    at d = 32, d_h = 8 (s relative half that), with no cancellation beyond a factor ~3 for
    random weights (measured worst 2.4e-7 against the float64 Gram implementation it replaces)."""
    from rmtbase.studies.circuits import k_composition

    net = _random_gpt2(tmp_path / "g")
    got = k_composition(tmp_path / "g")
    sd = {k: v.double().numpy() for k, v in net.state_dict().items()}
    d, H = 32, 4
    dh = d // H

    def head(layer, h):
        w = sd[f"transformer.h.{layer}.attn.c_attn.weight"]
        sl = slice(h * dh, (h + 1) * dh)
        wq, wk, wv = w[:, :d][:, sl].T, w[:, d:2 * d][:, sl].T, w[:, 2 * d:][:, sl].T
        wo = sd[f"transformer.h.{layer}.attn.c_proj.weight"][sl, :].T
        return wq.T @ wk, wo @ wv

    n = 0
    for l2 in range(3):
        for l1 in range(3):
            for a in range(H):
                for b in range(H):
                    if l1 >= l2:
                        assert np.isnan(got[l1, b, l2, a])
                        continue
                    qk, _ = head(l2, a)
                    _, ov = head(l1, b)
                    want = np.linalg.norm(qk @ ov) / (np.linalg.norm(qk) * np.linalg.norm(ov))
                    assert got[l1, b, l2, a] == pytest.approx(want, rel=1e-5)
                    n += 1
    assert n == 3 * 16


def test_helpers_on_hand_values():
    assert auc([3, 2, 1, 0], [True, False, False, False]) == 1.0
    assert auc([0, 2, 1, 3], [True, False, False, False]) == 0.0
    assert auc([1, 1, 0, 2], [True, True, False, False]) == 0.5
    assert auc([1, 1, 0, 1], [True, True, False, False]) == 0.75  # 2 wins, 2 ties of 4
    assert np.isnan(auc([1, 2], [False, False]))
    assert outranked([3, 2, 1, 0], [True, False, False, False]) == 0.0
    assert outranked([3, 2, 1, 0], [True, False, True, False]) == 0.5
    assert np.isnan(outranked([1, 2], [True, True]))
    assert largest_step([5, 5, 4, 1, 1], fall=True) == 3
    assert largest_step([0, 0.1, 0.2, 0.9, 1.0], fall=False) == 3
    # (checkpoint, axis, layer, head) = (5, 1, 1, 2): interval 1 (from the initialisation)
    # left out; head 0 jumps in interval 3, head 1 in interval 2
    axes = np.array([[0, 0], [9, -5], [9.1, -5.5], [11, -5.5], [11.1, -5.6]])[:, None, None, :]
    assert profile_lags(axes, 3).tolist() == [[[0, 1]]]
    np.testing.assert_allclose(profile_drop_ratio(axes, 3), [[[1.9 / 0.1, 0.0]]])
    from rmtbase.studies._copying import copying_score

    assert copying_score(np.diag([1.0, 2.0, 3.0])) == pytest.approx(1.0)
    assert copying_score(-np.eye(4)) == pytest.approx(-1.0)
    assert copying_score(np.roll(np.eye(6), 1, axis=0)) == pytest.approx(0.0, abs=1e-12)
    # a 2-cycle and two fixed points: eigenvalues 1, -1, 1, 1 -> 2 / 4
    assert copying_score(np.eye(4)[[1, 0, 2, 3]]) == pytest.approx(0.5)


def test_quick_pipeline(tmp_path):
    """A few training steps: every output is written, the probe labels are computed from
    finite behaviours, the checkpoints are HF folders with a tokenizer (no circuit asked)."""
    res = studies.run("circuits", tmp_path, quick=True, seed=0)
    out = tmp_path / "circuits"
    names = {p.name for p in out.iterdir()}
    assert {"circuits.nc", "summary.txt", "circuits_loss.png", "circuits_rank.png",
            "checkpoints"} <= names
    ds = xr.load_dataset(out / "circuits.nc")
    assert ds.sizes["checkpoint"] == 4 and ds.sizes["head_from"] == ds.sizes["head_to"] == 4
    for b in ("prev_token", "induction", "duplicate_token"):
        assert np.isfinite(ds[b].values).all(), b
        assert ((ds[b].values >= 0) & (ds[b].values <= 1 + 1e-6)).all(), b
    k = ds["k_composition"].values
    assert np.isfinite(k).all() and (k > 0).all() and (k <= 1 + 1e-9).all()
    s = res["summary"]
    assert s["n_pairs"] == 16 and s["steps"] == 30
    assert s["k_vs_rmtbase_composition"] < 1e-5  # own helper = rmtbase.composition
    kp = ds["k_composition_p"].values
    assert ((kp > 0) & (kp <= 1)).all()
    assert s["n_circuit_pairs"] == int(ds["circuit_pair"].values.sum())
    prof = ds["profile"]
    assert prof.dims == ("checkpoint", "axis", "layer", "head")
    assert list(prof["axis"].values) == ["alignment", "symmetry", "q_input_focus",
                                         "k_input_focus"]
    assert np.isfinite(prof.values).all()
    assert prof.values[0, 0, 0, 0] != prof.values[-1, 0, 0, 0]  # the weights were trained
    assert ((ds["profile_lag"].values >= 0) & (ds["profile_lag"].values <= 3)).all()
    cs, cpv = ds["copying"].values, ds["copying_p"].values
    assert cs.shape == (2, 4) and (np.abs(cs) <= 1 + 1e-9).all()
    assert ((cpv > 0) & (cpv <= 1)).all()
    ckpts = sorted((out / "checkpoints").iterdir())
    assert [c.name for c in ckpts] == [f"step_{int(x):05d}" for x in
                                       ds["checkpoint_step"].values]
    assert (ckpts[-1] / "config.json").is_file() and (ckpts[-1] / "tokenizer.json").is_file()
    assert ds["repeat_loss"].values[0] == pytest.approx(ds.attrs["ln_vocab"], abs=0.1)


#: The default recipe (docs/circuits.md: V 32, segments L 2-5, 1,500 steps), seeds 0-9
#: measured: every one forms the circuit (1 previous-token head -> 3-4 induction heads);
#: seeds 0, 2, 4, 5, 7 and 9 meet every criterion (7 and 9 run after the contrast reading of
#: the K rise was fixed). The misses are all the rank criterion, by one non-circuit pair:
#: seed 1: L0 H2 -> L1 H1 (a partly induction-like head, probe 0.21) has the largest
#: K-composition, its circuit pairs rank 2-4 (outranked by 1 of 13 = 7.7 %, AUC 0.92); seed 3:
#: its weakest induction head (L1 H0) reads layer-0 head 0 slightly more than the
#: previous-token head (rank 5, p 3.2e-3, outranked by 1 of 12); seeds 6 and 8: a circuit
#: pair ranks 4th (outranked by 1 of 13, AUC 0.974; seed 6's previous-token head also copies,
#: +0.16). strict: a change that makes them pass fails here, so docs/circuits.md's tables get
#: updated.
_MISS = {1: "a non-circuit pair outranks the circuit pairs", 3: "a circuit pair ranks 5th, "
         "p 3.2e-3", 6: "a circuit pair ranks 4th of 16", 8: "a circuit pair ranks 4th of 16"}
SEEDS = tuple(pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=_MISS[s]
                                                      + " (docs/circuits.md)"))
              if s in _MISS else s for s in range(10))


@pytest.mark.slow  # ten trainings of 1,500 steps, 69-80 CPU-s each
@pytest.mark.parametrize("seed", SEEDS)
def test_trained_models_contain_the_circuit(tmp_path, seed):
    """The acceptance criteria per seed: the probe finds previous-token → induction pairs; every
    one has K-composition p ≤ 1e-3 (rmtbase.composition's null) and is outranked by at most
    5 % of the other pairs, AUC ≥ 0.95, and the circuit pairs' K-composition rises against the
    other pairs' (``k_contrast``, every interval searched) within one checkpoint of the
    repeated-token loss drop (module docstring of studies.circuits; lag 0 on seeds 0-6). And the induction heads' W_QK symmetry changes most (after
    the first interval) within one checkpoint of the drop (measured lag 0 for 15 of the 16
    induction heads of seeds 0-4, 1 for the other)."""
    from rmtbase.studies._induction_train import Recipe
    from rmtbase.studies.circuits import run_seed

    res = run_seed(tmp_path, seed, Recipe(), profile=False)
    s = res["summary"]
    assert s["repeat_loss_end"] < 0.5 * s["ln_vocab"], s
    assert s["n_circuit_pairs"] >= 1, s
    assert s["outranked_worst"] <= 0.05, s
    assert s["circuit_p_worst"] <= 1e-3, s
    assert s["auc"] >= 0.95, s
    assert s["drop_lag"] <= 1, s
    assert s["profile_lag_induction_symmetry"] <= 1, s
    # the second known head type: induction heads copy (measured 0.99-1.00, p 1e-3, seeds 0-4),
    # the previous-token head maps x to the skip-bigram's pi(x) (measured -0.29 to -0.18)
    assert s["copying_induction_min"] >= 0.9, s
    assert s["copying_p_induction_worst"] <= 1e-3, s
    assert s["copying_prev_max"] < 0, s
