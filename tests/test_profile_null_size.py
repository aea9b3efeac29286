"""The profile's Gaussian null is sized by its own Monte Carlo error: the
block draws of the reduced factors equal the statistics of the full reduced factors, the default
size keeps the null's error at most a quarter of a 1,000-head calibration's binomial se, and the
two rates the 2,000-draw null got wrong (symmetry at the Gemma-3 shape 640 × 256, the key-only
axes of grouped-key models) are within 2 se of 0.05 at n ≥ 1,000 heads."""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.scoring.profile import factors as fa


def test_block_axes_equal_the_statistics_of_the_reduced_factors():
    """alignment and symmetry from the d_h × d_h blocks (A, B, C) equal those of the full
    reduced factors ([A, 0], [B, C]) through rmtbase.stats.alignment, to float32 rounding: both
    are ratios bounded by 1 in absolute value (Cauchy–Schwarz), so the tolerance is ulps of 1
    (64 eps; a different draw moves them by ~1/d_h)."""
    import jax.numpy as jnp

    from rmtbase.stats.alignment import alignment, symmetry

    rng = np.random.default_rng(5)
    for d_h in (8, 32, 96):
        a = np.tril(rng.standard_normal((d_h, d_h)), -1) + np.diag(rng.uniform(5, 9, d_h))
        c = np.tril(rng.standard_normal((d_h, d_h)), -1) + np.diag(rng.uniform(5, 9, d_h))
        b = rng.standard_normal((d_h, d_h))
        if d_h == 96:  # a planted symmetric part, so symmetry is far from 0 too
            b = b + 0.8 * a
        a, b, c = (x.astype(np.float32) for x in (a, b, c))
        wq = np.concatenate([a, np.zeros_like(a)], axis=1)
        wk = np.concatenate([b, c], axis=1)
        got = fa.block_axes(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c))
        want = (alignment(wq, wk), symmetry(wq, wk))
        eps = 64 * float(np.finfo(np.float32).eps)
        for g, w in zip(got, want, strict=True):
            assert abs(float(g) - float(w)) <= eps, (d_h, float(g), float(w))
    assert float(want[1]) > 0.2  # the planted case is not near 0


def mc_rate_sd(draws: int, alpha: float = 0.05, kappa: float = 1.0) -> float:
    """Standard deviation of the p ≤ alpha rate that a shared null of ``draws`` draws gives
    heads of the null (over the null's own draws): its empirical (1 − alpha) quantile of
    |x − median| covers a Beta(N(1−α), Nα)-distributed mass, sd √(α(1−α)/N); ``kappa`` (≥ 1)
    for the median's own error on a skewed law (measured 0.94–1.05: rmtbase.scoring.profile.factors)."""
    return kappa * np.sqrt(alpha * (1 - alpha) / draws)


def test_default_size_keeps_the_null_error_below_a_quarter_of_the_calibration_se():
    """At n = 1,000 heads the binomial se of the p ≤ 0.05 rate is √(0.05·0.95/1000) = 0.0069;
    PROFILE_DRAWS draws add an MC sd ≤ a quarter of it (the largest kappa measured, 1.05:
    rmtbase.scoring.profile.factors, "How many draws"), where 2,000 draws added 0.71 of it."""
    se = np.sqrt(0.05 * 0.95 / 1000)
    assert mc_rate_sd(fa.PROFILE_DRAWS, kappa=1.05) <= se / 4
    assert mc_rate_sd(2000) > se / 2  # the former size: the defect this size removes


def _rate(p) -> tuple[float, float, int]:
    p = np.asarray(p, dtype=np.float64).ravel()
    p = p[np.isfinite(p)]
    return float(np.mean(p <= 0.05)), float(np.sqrt(0.05 * 0.95 / p.size)), int(p.size)


@pytest.mark.slow  # the 18,000-draw null at 640 x 256 (~100 s of CPU) and 1,200 heads (~30 s)
def test_symmetry_at_the_gemma3_shape_is_calibrated_on_1200_heads(module_cache):
    """1,200 heads of i.i.d. N(0, 1) factors at 640 × 256 stored as bfloat16 (the Gemma-3
    shape and storage, whose heads share the float32 null), each axis's two-sided p against the
    default profile null (profile.add_profile's _against): P(p ≤ 0.05) on symmetry within 2 se
    of 0.05 (the 2,000-draw null read 0.077 on 480 such heads), the other three axes within 3 se
    (four rates at once). se = √(0.05·0.95/1200) = 0.0063. Measured (18,000 draws): symmetry
    0.0500, alignment 0.0400, q_input_focus 0.0508, k_input_focus 0.0358 (z −2.3)."""
    import jax.numpy as jnp

    from rmtbase.scoring.profile.axes import _against
    from rmtbase.scoring.profile.cache import cached_profile_null

    d, d_h, n, chunk = 640, 256, 1200, 100
    null = cached_profile_null(d, d_h, "bfloat16")
    assert null["symmetry"].size == fa.PROFILE_DRAWS
    rng = np.random.default_rng(48)
    vals: dict[str, list] = {a: [] for a in fa.FACTOR_AXES}
    for _ in range(n // chunk):
        wq, wk = (jnp.asarray(rng.standard_normal((chunk, d_h, d), dtype=np.float32))
                  .astype(jnp.bfloat16) for _ in range(2))
        for a, v in fa.factor_profile(wq, wk).items():
            vals[a].append(v)
    for a in fa.FACTOR_AXES:
        rate, se, m = _rate(_against(np.concatenate(vals[a]), null[a])[3])
        print(f"640x256 bf16 {a}: P(p <= 0.05) = {rate:.4f} (n = {m}, se = {se:.4f})")
        assert m == n
        assert abs(rate - 0.05) <= (2 if a == "symmetry" else 3) * se, (a, rate, se)


@pytest.mark.slow  # 21 random grouped-key checkpoints through score_model: ~2 min
def test_key_only_axes_of_grouped_key_models_are_calibrated_on_1008_key_heads(
        tmp_path, score_cache):
    """Untrained LLaMA checkpoints with grouped keys (12 layers, 12 query heads on 4 key heads
    at 384 × 32, seeds 10-30: 21 × 48 = 1,008 key heads), scored by score_model: on the axes
    of W_K alone (k_input_focus against the profile null, entry_tails against the element
    table), one query head per key head (the others repeat its value), P(p ≤ 0.05) within 2 se
    of 0.05 (se = √(0.05·0.95/1008) = 0.0069; 0.078 on 192 key heads with the 2,000-draw
    profile null). Measured: k_input_focus 0.0496, entry_tails 0.0466 (18 min wall at load
    ~28)."""
    import torch
    from _checkpoints import random_checkpoint

    from rmtbase.scoring.score import score_model

    p: dict[str, list] = {"k_input_focus": [], "entry_tails": []}
    for seed in range(10, 31):
        folder = random_checkpoint(tmp_path / f"m{seed}", "llama", torch.float32, seed)
        ds = score_model(str(folder), progress=False, spectrum_draws=0)
        group = ds.sizes["head"] // int(ds.attrs["n_kv_heads"])
        assert group == 3
        for a in p:
            v = ds["profile_p"].sel(axis=a).values
            # exact: the key head's value repeated over its group (copies, no arithmetic)
            np.testing.assert_array_equal(v, np.repeat(v[:, ::group], group, axis=1))
            p[a].append(v[:, ::group].ravel())
    for a, v in p.items():
        rate, se, m = _rate(np.concatenate(v))
        print(f"GQA key heads {a}: P(p <= 0.05) = {rate:.4f} (n = {m}, se = {se:.4f})")
        assert m == 1008
        assert abs(rate - 0.05) <= 2 * se, (a, rate, se)


def test_the_stopping_note_names_the_draws_its_error_does_not_cover():
    """summary.txt's Draws line (scoring.heads.stopping_text.stopping_note): the stated stopping error is
    the spectral draws'; the note names the element table, the calibration and the profile null
    with its sequential sizes (2,000, 3,000, 4,000, 6,000, 10,000 or 18,000:
    scoring.profile.stopping.SCHEDULE, not always 18,000), its own rule and the 18,000's Monte
    Carlo sd, settled or not."""
    from rmtbase.scoring.heads.stopping_text import stopping_note
    from rmtbase.scoring.profile.stopping import SCHEDULE

    for settled in (True, False):
        note = stopping_note(1000, settled, 100_000)
        assert "covers the spectral null draws only" in note
        assert "element-statistic table" in note and "omnibus calibration" in note
        sizes = ", ".join(map(str, SCHEDULE[:-1]))  # every size of the schedule, in turn
        assert (f"profile null of the factor axes ({sizes} or {SCHEDULE[-1]} draws a shape, "
                "more only while a decision could differ") in note
        assert "rmtbase.scoring.profile.stopping" in note and "profile_null_draws" in note
        assert f"({fa.PROFILE_DRAWS} draws a shape" not in note  # not a fixed size
        assert f"{np.sqrt(0.05 * 0.95 / fa.PROFILE_DRAWS):.4f}" in note
