"""The per-head profile (rmtbase.scoring.profile.axes): the new axes' Gaussian null draws against
their known moments (|z| < 5, se from the draws), a planted full-rank alignment through
score_heads at MiniLM's shape (shipped tables) read back on the alignment axis, untouched heads
at the nominal flag rate, and the profile variables in a score."""

import numpy as np
import pytest

from rmtbase.models.types import LayerHeads, ModelInfo
from rmtbase.scoring.profile.axes import AXES, profile_null
from rmtbase.scoring.score import score_heads

D, DH, HEADS, LAYERS = 384, 32, 12, 4


def test_null_moments():
    """n = 2000 null heads at d = 64, d_h = 8 (float32, and q8_0 through its round trip):
    alignment mean 0, variance 1/(d d_h); input focus mean 2/d_h (1 − 1/d)."""
    d, dh = 64, 8
    for storage in ("float32", "q8_0"):
        nd = profile_null(d, dh, storage, n=2000, seed=1)
        a = nd["alignment"]
        se = a.std(ddof=1) / np.sqrt(a.size)
        assert abs(a.mean() / se) < 5
        v = a * a
        assert abs((v.mean() - 1 / (d * dh)) / (v.std(ddof=1) / np.sqrt(v.size))) < 5
        f = nd["q_input_focus"]
        assert abs((f.mean() - 2 / dh * (1 - 1 / d)) / (f.std(ddof=1) / np.sqrt(f.size))) < 5
    again = profile_null(d, dh, "float32", n=300, seed=1)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(again["symmetry"], profile_null(d, dh, n=300, seed=1)
                                  ["symmetry"])


def _factor_draws(d, dh, n, seed):
    """The four statistics of n heads of i.i.d. N(0, 1) factors drawn in full (numpy), through
    the functions that score model heads: the law the reduced null draws must have."""
    from rmtbase.scoring.profile.axes import factor_profile

    rng = np.random.default_rng(seed)
    out = [factor_profile(rng.standard_normal((250, dh, d), dtype=np.float32),
                          rng.standard_normal((250, dh, d), dtype=np.float32))
           for _ in range(n // 250)]
    return {a: np.concatenate([o[a] for o in out]) for a in out[0]}


@pytest.mark.parametrize("d, dh", [(96, 16), (40, 24)])
def test_reduced_null_draws_have_the_law_of_full_factor_draws(d, dh):
    """2000 reduced null draws (Bartlett factor of the stacked Gram at 96 × 16; the factors
    themselves at 40 × 24, d < 2 d_h; column energies as χ²_{d_h} at both) against 2000 heads of
    full Gaussian factors: per axis the means within 5 standard errors of their difference, the
    variances likewise (se from the fourth moments), and a two-sample KS p > 10⁻³; alignment
    also against its exact law, (1 + a)/2 ~ Beta((n − 1)/2, (n − 1)/2), n = d·d_h."""
    from scipy import stats as st

    fast = profile_null(d, dh, n=2000, seed=4)
    full = _factor_draws(d, dh, 2000, seed=4)
    for a in fast:
        x, y = fast[a], full[a]
        se = np.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
        assert abs(x.mean() - y.mean()) < 5 * se, a
        vx, vy = (x - x.mean()) ** 2, (y - y.mean()) ** 2
        se_v = np.sqrt(vx.var(ddof=1) / x.size + vy.var(ddof=1) / y.size)
        assert abs(vx.mean() - vy.mean()) < 5 * se_v, a
        assert st.ks_2samp(x, y).pvalue > 1e-3, a
    half = (d * dh - 1) / 2
    assert st.kstest((1 + fast["alignment"]) / 2, st.beta(half, half).cdf).pvalue > 1e-3


def test_float_storages_share_the_float32_null_and_why():
    """float16/bfloat16 heads read the float32 draws (bit for bit); the reason, measured:
    rounding 200 pairs of Gaussian factors (64 × 8 and 384 × 32) to either storage moves each
    statistic by ≤ 0.05 of its null sd per draw (measured ≤ 0.028) and the mean by ≤ 0.01 sd
    (measured ≤ 5·10⁻⁴) — below the 2,000-draw null's median se (≈ 0.03 sd). Block formats
    draw their own null."""
    import jax

    from rmtbase.scoring.profile.axes import factor_profile
    from rmtbase.stats.precision import round_trip

    base = profile_null(64, 8, n=300, seed=2)
    for storage in ("bfloat16", "float16"):
        other = profile_null(64, 8, storage, n=300, seed=2)
        for a in base:
            # exact: float storages share the float32 null: the same program and seed
            np.testing.assert_array_equal(other[a], base[a])
    assert not np.array_equal(profile_null(64, 8, "q8_0", n=300, seed=2)["alignment"],
                              base["alignment"])
    for d, dh in ((64, 8), (384, 32)):
        kq, kk = jax.random.split(jax.random.key(5))
        wq = jax.random.normal(kq, (200, dh, d))
        wk = jax.random.normal(kk, (200, dh, d))
        exact = factor_profile(wq, wk)
        for storage in ("bfloat16", "float16"):
            stored = factor_profile(round_trip(wq, storage), round_trip(wk, storage))
            for a, v in exact.items():
                diff = (stored[a] - v) / v.std()
                assert np.abs(diff).max() <= 0.05 and abs(diff.mean()) <= 0.01, (d, storage, a)


def _model(rng, planted=None, sq=0.02, sk=0.05, storage="float32"):
    import ml_dtypes

    layers = []
    for li in range(LAYERS):
        wq = (sq * rng.standard_normal((HEADS, DH, D))).astype(np.float32)
        wk = (sk * rng.standard_normal((HEADS, DH, D))).astype(np.float32)
        if planted is not None and li == planted[0]:
            h = planted[1]
            wk[h] = (0.6 * wq[h] * (sk / sq) + 0.8 * wk[h]).astype(np.float32)
        if storage == "bfloat16":
            wq = wq.astype(ml_dtypes.bfloat16).astype(np.float32)
            wk = wk.astype(ml_dtypes.bfloat16).astype(np.float32)
        layers.append(LayerHeads(layer=li, wq=wq, wk=wk, storage=storage))
    info = ModelInfo(name="planted", revision=None, architecture="bert", d=D, d_h=DH,
                     n_layers=LAYERS, n_heads=HEADS, n_kv_heads=HEADS)
    return info, layers


@pytest.fixture(scope="module")
def planted(score_cache):
    info, layers = _model(np.random.default_rng(0), planted=(2, 5))
    return score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0)


def test_planted_alignment_is_read_back_and_flagged(planted):
    """A full-rank alignment 0.6 in L2 H5 (no low-rank change): alignment 0.6 ± 0.05, p ≤ 1e-3,
    flagged on the alignment axis; the 47 untouched heads |alignment| ≤ 0.05."""
    a = planted["profile_value"].sel(axis="alignment").values
    p = planted["profile_p"].sel(axis="alignment").values
    flag = planted["profile_flag"].sel(axis="alignment").values
    assert abs(a[2, 5] - 0.6) <= 0.05 and p[2, 5] <= 1e-3 and flag[2, 5]
    rest = np.ones(a.shape, dtype=bool)
    rest[2, 5] = False
    assert np.all(np.abs(a[rest]) <= 0.05)
    eff = planted["profile_effect"].sel(axis="alignment").values
    lo = planted["profile_band_lo"].sel(axis="alignment").values
    assert eff[2, 5] == pytest.approx(a[2, 5], abs=0.01) and lo[2, 5] < 0


def test_profile_variables_and_axes(planted):
    axes = list(planted["axis"].values)
    assert axes == [a for a in AXES if a not in ("entry_tails",)]   # spectral: no kurtosis
    for v in ("profile_value", "profile_effect", "profile_band_lo", "profile_band_hi",
              "profile_p", "profile_q", "profile_flag"):
        assert planted[v].dims == ("layer", "head", "axis")
    scale = planted["profile_value"].sel(axis="scale").values
    np.testing.assert_allclose(scale, planted["sigma_q"].values * planted["sigma_k"].values)
    assert np.isnan(planted["profile_p"].sel(axis="scale").values).all()


@pytest.mark.slow  # 10 random models of 48 heads through score_heads: ~1 min per storage
@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
def test_new_axes_flag_null_heads_at_the_nominal_rate(score_cache, storage):
    """10 random models × 48 heads = 480 null heads (stored as float32, or rounded to bfloat16
    and scored against the bfloat16 null): P(p ≤ 0.05) on each new axis within 3 binomial se
    (0.030) of 0.05."""
    rng = np.random.default_rng(3)
    p = {a: [] for a in ("alignment", "symmetry", "q_input_focus", "k_input_focus")}
    for _ in range(10):
        info, layers = _model(rng, storage=storage)
        ds = score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0)
        for a in p:
            p[a].append(ds["profile_p"].sel(axis=a).values.ravel())
    se = np.sqrt(0.05 * 0.95 / 480)
    for a, v in p.items():
        rate = np.mean(np.concatenate(v) <= 0.05)
        assert abs(rate - 0.05) <= 3 * se, (a, rate)


def test_terminal_table_is_the_profile(planted):
    """The terminal table (anomaly_table, also the head of summary.txt): the headline, then one
    line per axis with its band, flag count and top heads in the axis's own units; the planted
    head leads the alignment line, flagged (*); no line ranks by head_effect."""
    from rmtbase.report.tables import anomaly_table, summary_text

    text = anomaly_table(planted, 3)
    lines = text.splitlines()
    assert "heads differ from the null" in lines[0] and lines[1].startswith("Profile")
    assert len(lines) == 4 + planted.sizes["axis"] and lines[-1].startswith("Heads by departure")
    row = next(ln for ln in lines if ln.startswith("alignment "))
    cells = row.split()
    assert cells[1] == "shift" and "L2H5 0.6" in row and "(+0.6" in row and "*)" in row
    n_flag = planted["profile_flag"].sel(axis="alignment").values.sum()
    assert cells[cells.index("shift") + 3] == f"{n_flag}/48" and n_flag >= 1
    scale = next(ln for ln in lines if ln.startswith("scale "))
    assert scale.split()[1] == "value" and " - " in scale
    assert "head_effect" not in text and summary_text(planted, 3).startswith(text)


def test_permutation_profile_null_is_the_statistics_of_the_shuffled_heads():
    """Each permutation draw equals the numpy statistics of the head with its entries permuted by
    the shared permutations (rmtbase.scoring.nulls.permutation.permutations, chunk 0), to 1e-6."""
    from rmtbase.scoring.nulls.permutation import permutations
    from rmtbase.scoring.profile.axes import permutation_profile_null

    rng = np.random.default_rng(7)
    d, dh = 48, 6
    wq = rng.standard_normal((2, 3, dh, d)).astype(np.float32)
    wk = (0.5 * wq + rng.standard_normal((2, 3, dh, d))).astype(np.float32)
    out = permutation_profile_null(wq, wk, draws=5, seed=11)
    assert out["alignment"].shape == (2, 3, 5)
    pq, pk = permutations(11, 0, dh * d, 5)
    for li, h, b in ((0, 0, 0), (1, 2, 4), (0, 1, 3)):
        q = wq[li, h].ravel()[pq[b]].reshape(dh, d).astype(np.float64)
        k = wk[li, h].ravel()[pk[b]].reshape(dh, d).astype(np.float64)
        wqk = q.T @ k
        ref = {"alignment": np.sum(q * k) / np.sqrt(np.sum(q * q) * np.sum(k * k)),
               "symmetry": np.trace(wqk @ wqk) / np.sum(wqk * wqk)}
        for w, name in ((q, "q_input_focus"), (k, "k_input_focus")):
            e = (w * w).sum(axis=0)
            ref[name] = e.var() / e.mean() ** 2
        for a, v in ref.items():
            assert out[a][li, h, b] == pytest.approx(v, rel=1e-5, abs=1e-6), a


@pytest.mark.slow  # quick tier: the permutation draws equal numpy on the permuted head
def test_permutation_profile_is_calibrated_for_heavy_tailed_entries(score_cache):
    """Untrained heads whose entries are Student-t (3 dof): the Gaussian null mistakes their
    uneven column energies for input focus, the permutation null does not. 4 layers × 12 heads
    at d = 96, d_h = 8, 200 permutations: under the permutation null P(p ≤ 0.05) ≤ 0.05 + 3 se
    (se = 0.031, n = 48) on each new axis (a permutation test is exact, so the rate is at most
    nominal); under the Gaussian null the input-focus axes flag most heads."""
    rng = np.random.default_rng(5)
    d, dh, heads, n_layers = 96, 8, 12, 4
    layers = [LayerHeads(layer=li, wq=(0.02 * rng.standard_t(3, (heads, dh, d))).astype(
        np.float32), wk=(0.05 * rng.standard_t(3, (heads, dh, d))).astype(np.float32))
        for li in range(n_layers)]
    info = ModelInfo(name="t3", revision=None, architecture="bert", d=d, d_h=dh,
                     n_layers=n_layers, n_heads=heads, n_kv_heads=heads)
    perm = score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0,
                       null="permutation", draws=200)
    assert "permutations of each head" in perm.attrs["profile"]
    se = np.sqrt(0.05 * 0.95 / 48)
    for a in ("alignment", "symmetry", "q_input_focus", "k_input_focus"):
        p = perm["profile_p"].sel(axis=a).values
        assert np.isfinite(p).all() and np.mean(p <= 0.05) <= 0.05 + 3 * se, a
    gauss = score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0)
    for a in ("q_input_focus", "k_input_focus"):
        assert np.mean(gauss["profile_p"].sel(axis=a).values <= 0.05) > 0.5, a


@pytest.mark.slow  # quick tier: the permutation draws equal numpy on the permuted head
def test_planted_alignment_under_the_permutation_null(score_cache):
    """The planted alignment 0.6 (L2 H5) is flagged against its own shuffles too: beyond every
    shuffle, its p below the add-one floor 1/1001 (the tail-resolving p) and BH's
    first threshold 0.05/48; every head's band about 0."""
    info, layers = _model(np.random.default_rng(0), planted=(2, 5))
    ds = score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0,
                     null="permutation", draws=1000)
    p = ds["profile_p"].sel(axis="alignment").values
    assert p[2, 5] < 1 / 1001 and ds["profile_flag"].sel(axis="alignment")[2, 5]
    lo = ds["profile_band_lo"].sel(axis="alignment").values
    hi = ds["profile_band_hi"].sel(axis="alignment").values
    assert np.all(lo < 0) and np.all(hi > 0) and np.all(hi - lo < 0.06)


@pytest.mark.slow  # 12 random checkpoints scored with all statistics: 24 s on 2 quiet cores
@pytest.mark.parametrize("kind,dtype", [("bert", "float32"), ("bert", "bfloat16"),
                                        ("llama", "float32")])
def test_every_axis_is_calibrated_through_score_model(tmp_path, score_cache, kind, dtype):
    """Untrained BERT (float32, bfloat16) and LLaMA with grouped keys (12 query heads on 4 key
    heads), 4 checkpoints of 144 heads each (seeds 2-5), scored by score_model at their
    storage: on every axis with a null, P(p ≤ 0.05) within 3 binomial se of 0.05 (n = 576,
    se = 0.0091; 3 se because 18 rates are checked at once: each fails by chance with
    probability 0.0027). Axes of W_K alone (k_input_focus, entry_tails) take one query head
    per key head under grouped keys — the others repeat its value — so n = 192 there (se =
    0.0157). Measured (the reduced profile null, format 2): BERT fp32 0.047-0.056, bf16
    0.047-0.057, LLaMA-GQA 0.038-0.062 (k_input_focus 0.062 on 192 key heads); with the
    earlier factor-path null 0.047-0.061, 0.047-0.061, 0.040-0.064."""
    import torch
    from _checkpoints import random_checkpoint as _random_checkpoint

    from rmtbase.scoring.score import score_model

    p: dict[str, list] = {}
    for seed in range(2, 6):
        folder = _random_checkpoint(tmp_path / f"m{seed}", kind, getattr(torch, dtype), seed)
        ds = score_model(str(folder), progress=False, spectrum_draws=0)
        assert ds.attrs["storage_dtype"] == dtype
        group = ds.sizes["head"] // int(ds.attrs["n_kv_heads"])  # query heads per key head
        for a in ds["axis"].values:
            v = ds["profile_p"].sel(axis=a).values
            if a in ("k_input_focus", "entry_tails"):
                # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the
                #  key-head value repeated over its group)
                np.testing.assert_array_equal(v, np.repeat(v[:, ::group], group, axis=1))
                v = v[:, ::group]
            if np.isfinite(v).any():
                p.setdefault(str(a), []).append(v.ravel())
    assert set(p) == {"concentration", "alignment", "symmetry", "q_input_focus",
                      "k_input_focus", "entry_tails"}
    for a, v in p.items():
        x = np.concatenate(v)
        rate, se = np.mean(x <= 0.05), np.sqrt(0.05 * 0.95 / x.size)
        print(f"{kind} {dtype} {a}: P(p <= 0.05) = {rate:.3f} (n = {x.size})")
        assert abs(rate - 0.05) <= 3 * se, (a, rate)
