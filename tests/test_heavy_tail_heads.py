"""WeightWatcher's α of each head's W_QK as a statistic of the registry: shipped, but it joins a
score only when named (``--stats spectral,ww_alpha``), as a plugin's statistic does, so a
default score never changes; named, each head's α is the power-law fit of the d × d product's
ESD (its d_h nonzero eigenvalues) with a p from the same Gaussian null as every statistic.

Cost: three spectral Gaussian scores of 2 layers x 3 heads at d = 96, d_h = 24 (one table)."""

from __future__ import annotations

import numpy as np
import pytest
from _gaussian_heads import gaussian_heads
from test_plugins import fresh_registries  # noqa: F401 - fixture: forgets what was registered

from rmtbase.stats.heavy_tail import heavy_tail_metrics


def test_head_alpha_joins_only_when_named_and_is_the_products_fit(
        score_cache, fresh_registries):  # noqa: F811
    from rmtbase.scoring.score import score_heads

    info, layers = gaussian_heads(2, 3, 24, 96, seed=5)
    kw = dict(stats="spectral", progress=False, spectrum_draws=0, draws=400)
    plain = score_heads(info, layers, **kw)
    named = score_heads(info, layers, **{**kw, "stats": ("spectral", "ww_alpha")})
    again = score_heads(info, layers, **kw)  # after naming it, in the same process
    assert "qk.ww_alpha" not in plain["stat"].values
    assert list(named["stat"].values) == [*plain["stat"].values, "qk.ww_alpha"]
    assert list(again["stat"].values) == list(plain["stat"].values)
    for v in ("p_value", "head_p_value"):
        # exact: the same compiled programs on the same inputs and cached null, one process
        np.testing.assert_array_equal(again[v].values, plain[v].values, err_msg=v)
    alpha = named["value"].sel(stat="qk.ww_alpha").values
    assert np.isfinite(named["p_value"].sel(stat="qk.ww_alpha").values).all()
    for li, lh in enumerate(layers):
        for h in range(3):  # the d x d product, formed here, through the matrix-level fit
            wqk = lh.wq[h].astype(np.float64).T @ lh.wk[h].astype(np.float64)
            want = heavy_tail_metrics(wqk)["alpha"]
            np.testing.assert_allclose(alpha[li, h], want, rtol=1e-4, err_msg=f"L{li}H{h}")


@pytest.mark.slow  # 200 heads against a 2,000-draw table
def test_head_alpha_is_calibrated_on_gaussian_heads(score_cache, fresh_registries):  # noqa: F811
    """Gaussian heads (the null's own model, another seed): α's p < 0.05 for 5 % of them,
    within 2 se (n = 200 heads: se = √(0.05 · 0.95 / 200) = 0.015)."""
    from rmtbase.scoring.score import score_heads

    info, layers = gaussian_heads(10, 20, 24, 96, seed=11)
    ds = score_heads(info, layers, stats=("spectral", "ww_alpha"), progress=False,
                     spectrum_draws=0, draws=2000)
    p = ds["p_value"].sel(stat="qk.ww_alpha").values.ravel()
    n, rate = p.size, float((p < 0.05).mean())
    se = np.sqrt(0.05 * 0.95 / n)
    assert n == 200 and abs(rate - 0.05) <= 2 * se, (rate, se)
    print(f"alpha: {rate:.3f} of {n} Gaussian heads at p < 0.05")
