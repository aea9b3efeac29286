"""The permutation null grows its draws only for the heads whose decision is open, continuing
each head's stream exactly (rmtbase.scoring.stopping.head_growth)."""

from __future__ import annotations

import numpy as np
import pytest


def test_grown_heads_hold_the_draws_of_a_longer_run_and_the_others_keep_theirs(monkeypatch):
    """Two of six heads grown ×3 from 1,000 draws (60 with element statistics, not a multiple
    of the chunk): their draws equal, bit for bit, those of one run of 3,000 (180) draws drawn
    independently by permutation_null; the other heads keep their 1,000 draws and read NaN
    beyond; each head's rms is kept at every draw; the calibration draws follow (180 vs 60);
    a step whose arrays would not fit in memory is not taken."""
    from rmtbase.scoring.heads.reference import Cells
    from rmtbase.scoring.nulls.permutation import permutation_null
    from rmtbase.scoring.stopping import head_growth as G
    from rmtbase.stats.null_kind import PermutationNull

    rng = np.random.default_rng(10)
    wq = rng.standard_normal((2, 3, 8, 48)).astype(np.float32)
    wk = rng.standard_normal((2, 3, 8, 48)).astype(np.float32)
    tested = ("qk.npr", "qk.lambda_max", "qk.excess_kurtosis", "qk.kl_gaussian")
    cells = Cells(48, 8, "all", tested, factors=[(wq[i], wk[i]) for i in range(2)],
                  element_draws=60)
    ref = PermutationNull().reference(cells, "float32", draws=None, seed=5, progress=False)
    assert G.can_grow(ref) and ref.draws == 1000
    before = {k: v.copy() for k, v in ref.joint.items()}
    heads = np.zeros((2, 3), dtype=bool)
    heads[0, 2] = heads[1, 0] = True
    assert G.grow(ref, heads) == 2
    longer = permutation_null(wq[[0, 1], [2, 0]][None], wk[[0, 1], [2, 0]][None], draws=3000,
                              element_draws=180, seed=5)
    family = [k for k in ref.joint if k not in ("q.rms", "k.rms")]
    assert set(family) == {"qk.npr", "qk.lambda_max", "qk.excess_kurtosis", "qk.kl_gaussian"}
    for k, v in ref.joint.items():
        assert v.shape == (2, 3, 3000)
        for i, (a, b) in enumerate([(0, 2), (1, 0)]):
            # exact: the same jitted programs (2 heads, the same chunk shapes) on the same
            # permutations and entries
            np.testing.assert_array_equal(v[a, b], longer[k][0, i], err_msg=k)
        # exact: copies of stored values
        np.testing.assert_array_equal(v[0, :2, :1000], before[k][0, :2], err_msg=k)
        if k in ("q.rms", "k.rms"):
            assert np.isfinite(v).all()
        else:
            assert np.isnan(v[0, :2, 1000:]).all()
    n = G.calibration_draws(ref, family)
    assert n[0, 2] == n[1, 0] == 180 and n[0, 0] == n[1, 2] == 60
    assert (G.final_draws(ref, family) == 540).all()
    with pytest.raises(ValueError):  # heads at different factors are grown apart
        G.grow(ref, np.ones((2, 3), dtype=bool))
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "1G")  # 6 heads x 6 arrays x 9,000 draws fit
    assert G.fits(ref, 9)
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "1M")  # 3 copies of 2.6 MB do not
    assert not G.fits(ref, 9)
    fixed = PermutationNull().reference(cells, "float32", draws=1000, seed=5, progress=False)
    assert not G.can_grow(fixed)


def _llama():
    import torch
    import transformers as tf

    torch.manual_seed(1)
    cfg = tf.LlamaConfig(hidden_size=256, num_attention_heads=8, num_key_value_heads=8,
                         num_hidden_layers=1, intermediate_size=64, vocab_size=50,
                         max_position_embeddings=16)
    model = tf.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for layer in model.model.layers:
            for lin in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                torch.nn.init.normal_(lin.weight, std=0.02)
        attn = model.model.layers[0].self_attn
        spike = torch.randn(32, 1) @ torch.randn(1, 256)  # one head's W_Q, W_K share a direction
        attn.q_proj.weight[:32] += 0.0025 * spike
        attn.k_proj.weight[:32] += 0.0025 * spike
    return model


def test_an_open_head_is_grown_only_when_the_draws_are_not_fixed():
    """8 heads, spectral statistics, permutation null. With ``draws=1000`` fixed no head is
    grown. At an α putting the smallest statistics p exactly on its BH threshold (rank 1 of 8,
    on min(1, 2p)), that head is open at 1,000 draws (its bracket at ×9 straddles the
    threshold: joint_stopping.p_bounds/unsettled at the rule's level); the default run grows
    it (head_calibration_draws ≥ 3,000) and not the heads far from any threshold (p_S > 0.2 at
    1,000 draws: 1,000 draws), whose statistics p stay as they were."""
    from rmtbase.scoring.score import score_model
    from rmtbase.scoring.stopping import joint as J
    from rmtbase.scoring.stopping.rule import STOP_ERROR

    model = _llama()
    kw = dict(progress=False, stats="spectral", spectrum_draws=0, null="permutation")
    fixed = score_model(model, draws=1000, **kw)
    assert (fixed["head_calibration_draws"].values == 1000).all()
    p = fixed["head_p_statistics"].values
    alpha = 2 * p.size * float(np.nanmin(p)) * (1 + 1e-9)
    assert alpha < 0.5
    lo, hi = J.p_bounds(p, fixed["head_p_method"].values, 1000, 9000, STOP_ERROR / (p.size * 3))
    top = np.nanargmin(p)
    assert J.unsettled(lo, hi, alpha).ravel()[top]
    grown = score_model(model, alpha=alpha, **kw)
    draws = grown["head_calibration_draws"].values
    assert draws.ravel()[top] >= 3000
    assert (p > 0.2).sum() >= 3 and (draws[p > 0.2] == 1000).all()
    assert set(np.unique(draws)) <= {1000, 3000, 9000}
    assert grown.attrs["permutation_draws"] == 1000
    # exact: the same numpy code on copies of the same stored draws (NaN slots dropped first)
    np.testing.assert_array_equal(grown["head_p_statistics"].values[draws == 1000],
                                  p[draws == 1000])
