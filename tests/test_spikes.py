"""rmtbase.decision.spikes: the step-down count of W_QK's outlier eigenvalues, and its effect on
``head_effect``, on planted multiplicative spikes W_K ← W_K (I + θ v vᵀ)^{1/2} at d = 768,
d_h = 64 (θ_c = 5.424) — through the decision functions and through score_model on a
GPT-2 layout."""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.decision.spikes import count_spikes, spike_threshold, spikes_of

D, DH = 768, 64
THETA_C = 5.424


def test_threshold_is_the_exchangeable_order_statistic():
    x = np.arange(1.0, 100.0)  # N = 99: ⌈0.95 · 100⌉ = 95th smallest
    assert spike_threshold(x) == 95.0
    assert spike_threshold(x[::-1]) == 95.0
    assert spike_threshold(np.arange(10.0)) == np.inf  # N < 1/α − 1: no threshold
    per_head = np.stack([x, x + 1])
    assert spike_threshold(per_head).tolist() == [95.0, 96.0]


def test_step_down_stops_at_the_first_miss():
    x = np.array([[5.0, 4.0, 1.0, 3.0], [0.5, 0.4, 0.3, 0.2]])
    n, sx = count_spikes(x, 2.0, upper_edge=2.0)
    assert n.tolist() == [2, 0]
    assert sx[0, :2].tolist() == [2.5, 2.0] and np.isnan(sx[0, 2:]).all()
    assert np.isnan(sx[1]).all()


def _null_xmax(n=4000):
    from rmtbase.baseline.cache import null_table
    from rmtbase.decision.scale import normalise
    from rmtbase.scoring.nulls.layer_null import null_arrays as _null_arrays

    t = _null_arrays(null_table(D, DH, stats="spectral", min_draws=n, progress=False),
                     ["qk.lambda_max"], D, DH)
    return normalise("qk.lambda_max", t["qk.lambda_max"], t["q.rms"], t["k.rms"]) / D**2


def _spiked(rng, thetas, d=D, dh=DH):
    """Normalised spectrum (descending) of W_Qᵀ W_K with W_K ← W_K (I + Σ θ_j v_j v_jᵀ)^{1/2}
    for orthonormal v_j, from the d_h × d_h product of the Grams (no d × d matrix)."""
    wq, wk = rng.standard_normal((dh, d)), rng.standard_normal((dh, d))
    if thetas:
        v = np.linalg.qr(rng.standard_normal((d, len(thetas))))[0]
        for j, th in enumerate(thetas):
            wk = wk + np.outer(wk @ v[:, j], v[:, j]) * (np.sqrt(1 + th) - 1)
    lam = np.sort(np.linalg.eigvals((wq @ wq.T) @ (wk @ wk.T)).real)[::-1]
    return lam / ((wq**2).mean() * (wk**2).mean() * d**2)


@pytest.fixture(scope="module")
def null_xmax():
    return _null_xmax()


def test_null_heads_rarely_get_a_spike(null_xmax):
    """Null heads through the numpy factor path against the table's fast-path draws: the count
    is > 0 with probability α = 0.05 exactly (exchangeability). n = 300, rate within 4
    binomial se of 0.05."""
    rng = np.random.default_rng(11)
    n, _ = spikes_of(np.array([_spiked(rng, []) for _ in range(300)]), null_xmax, D, DH)
    rate = np.mean(n > 0)
    se = np.sqrt(0.05 * 0.95 / n.size)
    assert abs(rate - 0.05) < 4 * se, rate
    assert n.max() <= 2


def test_planted_spikes_are_counted(null_xmax):
    """40 draws per case, fixed seed. Measured (this seed): one spike found at 1.5θ_c in 20/40,
    at 2θ_c in 31/40, at 3θ_c in 39/40, at 4θ_c and 6θ_c in 40/40; a rank-3 head (three
    orthonormal v, 4θ_c each) gives 3 in 38/40 and 2 in 2/40. A single spike is never counted
    twice and the rank-3 head never four times (Weyl: the (r+1)-th eigenvalue is at most a
    null head's largest)."""
    rng = np.random.default_rng(0)
    found = {}
    for m in (2, 3, 4, 6):
        n, sx = spikes_of(np.array([_spiked(rng, [m * THETA_C]) for _ in range(40)]),
                          null_xmax, D, DH)
        assert n.max() <= 1, (m, np.bincount(n))
        found[m] = np.mean(n == 1)
        assert np.all(sx[n == 1, 0] > 0.9)  # in units of the MP⊠MP edge
    assert found[2] >= 0.6 and found[3] >= 0.95 and found[4] == 1.0 and found[6] == 1.0
    n3, _ = spikes_of(np.array([_spiked(rng, [4 * THETA_C] * 3) for _ in range(40)]),
                      null_xmax, D, DH)
    assert n3.max() <= 3 and np.mean(n3 == 3) >= 0.9


@pytest.fixture(scope="module")
def planted_score():
    """Random GPT-2 layout (768, 12 heads of 64, 4 layers; init N(0, 0.02²)) with spikes in
    layer 1: heads 0–4 single spikes at 1.5, 2, 3, 4, 6 θ_c, head 5 a rank-3 spike (4θ_c each),
    scored with all statistics against the Gaussian null."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from rmtbase.scoring.score import score_model

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=D, n_layer=4, n_head=12, vocab_size=64, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    rng = np.random.default_rng(5)
    w = model.transformer.h[1].attn.c_attn.weight  # Conv1D (d, 3d): input-major
    with torch.no_grad():
        for h, thetas in enumerate([[1.5 * THETA_C], [2 * THETA_C], [3 * THETA_C],
                                    [4 * THETA_C], [6 * THETA_C], [4 * THETA_C] * 3]):
            cols = slice(D + h * DH, D + (h + 1) * DH)
            wk = w[:, cols].T.double().numpy()  # (d_h, d)
            v = np.linalg.qr(rng.standard_normal((D, len(thetas))))[0]
            for j, th in enumerate(thetas):
                wk = wk + np.outer(wk @ v[:, j], v[:, j]) * (np.sqrt(1 + th) - 1)
            w[:, cols] = torch.from_numpy(wk.T.astype(np.float32))
    return score_model(model, progress=False, spectrum_draws=0)


@pytest.mark.slow
def test_planted_heads_through_score_model(planted_score):
    ds = planted_score
    n = ds["n_spikes"].values
    assert n[1, 2:5].tolist() == [1, 1, 1]  # 3θ_c and up
    assert n[1, 5] == 3
    untouched = np.ones(n.shape, dtype=bool)
    untouched[1, :6] = False
    assert np.mean(n[untouched] == 0) >= 0.9  # 42 untouched heads; P(> 0) = 0.05 each
    eff = ds["head_effect"].values[1, :5]
    assert np.all(np.diff(eff) > 0), eff  # grows with θ
    assert ds["head_effect"].values[1, 4] > np.max(ds["head_effect"].values[untouched])
    assert ds["head_top_stat"].values[1, 4] in ("qk.lambda_max", "qk.condition_number",
                                                "qk.stable_rank", "qk.npr",
                                                "qk.spectral_entropy", "qk.sum_lambda2")
    sx = ds["spike_x"].values[1, 4]
    assert sx[0] > 1.0 and np.isnan(sx[1:]).all()


def _aligned(rng, a, d=D, dh=DH):
    """Normalised spectrum of W_Qᵀ W_K with W_K = a·W_Q + √(1 − a²)·G: a full-rank alignment,
    no low-rank change of either factor."""
    wq, g = rng.standard_normal((dh, d)), rng.standard_normal((dh, d))
    wk = a * wq + np.sqrt(1 - a * a) * g
    lam = np.sort(np.linalg.eigvals((wq @ wq.T) @ (wk @ wk.T)).real)[::-1]
    return lam / ((wq**2).mean() * (wk**2).mean() * d**2)


def test_a_full_rank_alignment_also_makes_outliers(null_xmax):
    """n_spikes is spectral concentration, not a count of low-rank changes.
    W_K = a·W_Q + √(1 − a²)·G at 768 × 64 gives mean n_spikes 1.3 (a = 0.5), 2.8 (0.7) and
    5.8 (1.0) with no low-rank change at all (the Weyl bound concerns additive low-rank
    changes). 40 heads per a, fixed seed; bands of ±4 se of the mean around these
    values."""
    rng = np.random.default_rng(5)
    for a, expected in ((0.5, 1.3), (0.7, 2.8), (1.0, 5.8)):
        n, _ = spikes_of(np.array([_aligned(rng, a) for _ in range(40)]), null_xmax, D, DH)
        se = max(n.std(ddof=1), 0.5) / np.sqrt(n.size)
        assert abs(n.mean() - expected) <= 4 * se + 0.15, (a, n.mean(), se)
