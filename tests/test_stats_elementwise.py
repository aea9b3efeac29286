"""Element statistics against independent references: sorted Weibull protocol, numpy
quantiles, scipy moments, closed-form entropies/KL of known distributions."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as sps

from rmtbase.errors import InputError
from rmtbase.stats.elementwise import ELEMENT_STATS, element_stats, entropy_bins, trim_ranks


def weibull_sorted(w, trim):
    """Reference implementation of the paper's protocol with a full sort (float64)."""
    a = np.sort(np.abs(np.ravel(w)).astype(np.float64))
    n = a.size
    f = (np.arange(1, n + 1) - 0.5) / n
    lo, hi = (1 - trim) / 2, (1 + trim) / 2
    keep = (f >= lo - 1e-12) & (f <= hi + 1e-12)
    k, b = np.polyfit(np.log(a[keep]), np.log(-np.log1p(-f[keep])), 1)
    return k, np.exp(-b / k)


@pytest.mark.parametrize("trim", [0.8, 0.9, 1.0])
def test_weibull_matches_sorted_protocol(trim):
    rng = np.random.default_rng(11)
    w = np.stack([rng.normal(size=(120, 250)), rng.laplace(size=(120, 250)),
                  rng.normal(size=(120, 250))])
    w[2, 0, :5] = 1e4  # bulk plus a few huge outliers: the bracket must adapt
    st = element_stats(jnp.asarray(w), trim=trim)
    for b in range(3):
        k, lam = weibull_sorted(w[b], trim)
        # sort-free binned sums: declared relative error < 1e-6 (measured ~1e-8)
        assert float(st["weibull_k"][b]) == pytest.approx(k, rel=1e-6)
        assert float(st["weibull_lambda"][b]) == pytest.approx(lam, rel=1e-6)


def test_weibull_recovers_weibull_shape():
    """|w| Weibull(k=0.7, λ=2): the fit recovers k within sampling error (N = 250k)."""
    rng = np.random.default_rng(12)
    w = 2.0 * rng.weibull(0.7, size=(500, 500)) * rng.choice([-1, 1], size=(500, 500))
    st = element_stats(jnp.asarray(w))
    # LS on the probability plot of exact Weibull data: consistent; spread of k ~ 1e-3
    assert float(st["weibull_k"]) == pytest.approx(0.7, abs=5e-3)
    assert float(st["weibull_lambda"]) == pytest.approx(2.0, rel=5e-3)


def test_trim_ranks_exact():
    assert trim_ranks(100, 0.8) == (11, 90)  # (i-0.5)/100 in [0.1, 0.9]
    assert trim_ranks(100, 1.0) == (1, 100)
    assert trim_ranks(10, 0.9) == (1, 10)
    for bad in (0, -0.1, 1.5, "x"):
        with pytest.raises(InputError):
            trim_ranks(10, bad)


def test_q99_is_the_order_statistic():
    rng = np.random.default_rng(13)
    # the shape (and trim) of test_weibull_matches_sorted_protocol[0.8]: one compiled program
    w = rng.standard_t(3, size=(3, 120, 250))
    st = element_stats(jnp.asarray(w))
    for b in range(3):
        a = np.abs(w[b]).ravel()
        q = np.quantile(a, 0.99, method="inverted_cdf")
        # declared resolution: one |w|-histogram bin, at most q·2^-11 (2^11 bins per octave)
        assert abs(a.max() / float(st["max_over_q99"][b]) - q) <= q * 2.0**-11


def test_moments_against_scipy():
    rng = np.random.default_rng(14)
    # the shape of test_weibull_matches_sorted_protocol[0.8]: one compiled program
    w = rng.gamma(3.0, size=(3, 120, 250)) - 1.0
    st = element_stats(jnp.asarray(w))
    for b in range(3):
        x = w[b].ravel()
        np.testing.assert_allclose(float(st["mean"][b]), x.mean(), rtol=1e-12)
        np.testing.assert_allclose(float(st["std"][b]), x.std(), rtol=1e-12)
        np.testing.assert_allclose(float(st["skewness"][b]), sps.skew(x), rtol=1e-10)
        np.testing.assert_allclose(float(st["excess_kurtosis"][b]), sps.kurtosis(x), rtol=1e-10)


def test_entropy_kl_sigma_fit_on_known_distributions():
    """N = 10⁶ each. Gaussian: sampling sd of the plug-in entropy ≈ √(Var ln f / N) ≈ 7e-4;
    ΔS removes σ̂'s fluctuation, leaving the Rice-bin discretisation (≈ Δ²/24 ≈ 1e-4) and
    the Miller–Madow remainder O(m/N²): tolerance 1e-3. Uniform: exact ln(b − a) up to the
    same corrections. σ_fit: core fit over ±2σ, relative sd ≈ 1.5e-3, tolerance 5 sd."""
    k1, k2, k3 = jax.random.split(jax.random.key(15), 3)
    w = jnp.stack([3.0 * jax.random.normal(k1, (1000, 1000), jnp.float64),
                   jax.random.uniform(k2, (1000, 1000), jnp.float64, -1.0, 1.0),
                   jax.random.laplace(k3, (1000, 1000), jnp.float64)])
    st = {k: np.asarray(v) for k, v in element_stats(w).items()}
    assert abs(st["delta_entropy"][0]) < 1e-3
    assert st["entropy"][0] == pytest.approx(0.5 * math.log(2 * math.pi * math.e * 9.0), abs=3e-3)
    assert abs(st["kl_gaussian"][0]) < 1e-3
    assert st["sigma_fit"][0] == pytest.approx(3.0, rel=7.5e-3)
    assert st["entropy"][1] == pytest.approx(math.log(2.0), abs=1e-3)
    # KL(U(-1,1) || N(0, 1/3)) = ½ ln(2πe/3) − ln 2
    kl = 0.5 * math.log(2 * math.pi * math.e / 3.0) - math.log(2.0)
    assert st["kl_gaussian"][1] == pytest.approx(kl, abs=2e-3)
    assert st["delta_entropy"][1] == pytest.approx(-kl, abs=2e-3)
    # Laplace(1): S = 1 + ln 2, variance 2
    assert st["entropy"][2] == pytest.approx(1 + math.log(2.0), abs=3e-3)
    assert st["sigma_fit"][2] < 0.9 * st["std"][2]  # a cusp: the core is narrower


def test_weibull_anchor_on_gaussian_head_size():
    """Gaussian 64×768 blocks: mean k over 64 blocks vs the anchor k0, |z| < 5 (SE from draws)."""
    try:
        from rmtbase.analytic.weibull import anchor

        k0 = float(anchor(0.1, 0.9)[0])
    except ImportError:
        k0 = 1.2054  # arXiv:2605.18898 eq. (2), until rmtbase.analytic.weibull lands
    w = jax.random.normal(jax.random.key(17), (64, 64, 768), jnp.float32)
    k = np.asarray(element_stats(w)["weibull_k"], np.float64)
    z = (k.mean() - k0) / (k.std(ddof=1) / math.sqrt(k.size))
    assert abs(z) < 5, (k.mean(), k0, z)


def test_shapes_keys_dtype_and_errors():
    w = jnp.ones((2, 3, 4, 5), jnp.float32) * jnp.arange(20.0, dtype=jnp.float32).reshape(4, 5)
    st = element_stats(w)
    assert set(st) == set(ELEMENT_STATS)
    assert all(v.shape == (2, 3) and v.dtype == jnp.float32 for v in st.values())
    const = element_stats(jnp.zeros((4, 4)))
    assert float(const["entropy"]) == -np.inf
    assert entropy_bins(1000) == 20 and entropy_bins(1001) == 21
    with pytest.raises(InputError):
        element_stats(jnp.ones(5))
    with pytest.raises(InputError):
        element_stats(jnp.ones((3, 3)), trim=0)


def test_zeros_inside_fit_range_give_nan():
    w = np.random.default_rng(5).normal(size=(40, 50))
    w.ravel()[:600] = 0.0  # 30 % exact zeros: ranks 1..600 include F = 0.1..0.3
    st = element_stats(jnp.asarray(w))
    assert np.isnan(float(st["weibull_k"]))
    w.ravel()[:600] = 0.0
    w.ravel()[:600] = 1e-3 * np.arange(1, 601)
    assert np.isfinite(float(element_stats(jnp.asarray(w))["weibull_k"]))


def weibull_log_histogram(w, trim=0.8):
    """The npm-weibull-py v0.4 protocol, re-implemented from its description: a 1024-bin
    histogram of log10|w| on [-12, 2], F at each bin's mid-count, x the bin centre, least
    squares weighted by the counts over the bins whose F lies in the trim."""
    a = np.maximum(np.abs(np.asarray(w, dtype=np.float32)).ravel(), 1e-13)
    edges = np.linspace(-12.0, 2.0, 1025)
    h = np.histogram(np.log10(a), bins=edges)[0].astype(float)
    f = (2 * np.cumsum(h) - h) / (2 * h.sum())
    x = (edges[:-1] + edges[1:]) / 2 * np.log(10.0)
    lo = (1 - trim) / 2
    keep = (f >= lo) & (f <= 1 - lo) & (h > 0)
    sw = np.sqrt(h[keep])
    a_ = np.stack([x[keep], np.ones(keep.sum())], axis=1) * sw[:, None]
    return np.linalg.lstsq(a_, np.log(-np.log(1 - f[keep] + 1e-12)) * sw, rcond=None)[0][0]


def test_weibull_differs_from_log_histogram_fit_as_documented():
    """The elementwise docstring's comparison with npm-weibull-py: |Δk| < 2e-3 on Gaussian
    matrices, and only the histogram fit moves when the weights are rescaled within one of its
    bins (×1 … ×1.032)."""
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((768, 384)).astype(np.float32)
    ours, theirs = [], []
    for f in np.linspace(1.0, 10 ** (14 / 1024), 9):
        w = (0.03 * f * w0).astype(np.float32)
        ours.append(float(element_stats(jnp.asarray(w))["weibull_k"]))
        theirs.append(weibull_log_histogram(w))
    assert np.max(np.abs(np.subtract(ours, theirs))) < 2e-3
    assert np.ptp(ours) < 1e-5
    assert np.ptp(theirs) > 1e-3


@pytest.mark.slow
def test_in_graph_tiles_change_only_the_rounding(monkeypatch):
    """From IN_GRAPH_MIN entries the passes run over in-graph tiles (and a remainder): on
    2^22 + 7 bfloat16-stored Student-t(5) values every statistic agrees with one pass over all
    entries to float32 rounding (histogram statistics 5e-5 absolute, the rest 1e-6 relative;
    the lattice-cell histogram accumulates fractional masses, so its tiles round less),
    and both are within 2e-5 of a float64 evaluation."""
    import jax

    from rmtbase.stats import tiles
    from rmtbase.stats.elementwise import flat_element_stats

    rng = np.random.default_rng(1)
    n = 2**22 + 7
    w = jnp.asarray(rng.standard_t(5, n).astype(np.float32)).astype(jnp.bfloat16)
    w = w.astype(jnp.float32)
    ref = jax.jit(lambda x: flat_element_stats(x, 0.8, "bfloat16"))(np.asarray(w, dtype=np.float64))
    tiled = jax.jit(lambda x: flat_element_stats(x, 0.8, "bfloat16"))(w)
    monkeypatch.setattr(tiles, "IN_GRAPH_MIN", 2**40)
    whole = jax.jit(lambda x: flat_element_stats(x, 0.8, "bfloat16"))(w)
    for k in tiled:
        a, b, r = float(tiled[k]), float(whole[k]), float(ref[k])
        if k in ("entropy", "delta_entropy", "kl_gaussian", "sigma_fit"):
            assert abs(a - b) < 5e-5 and abs(a - r) < 2e-5 and abs(b - r) < 2e-5, k
        else:
            assert a == pytest.approx(b, rel=1e-6, abs=1e-9), k
            assert a == pytest.approx(r, rel=2e-5, abs=1e-9), k


def test_q99_exact_on_a_stored_lattice_and_for_lone_entries():
    """bfloat16-stored values: every |w| bin holds one lattice value, so q99 is the order
    statistic exactly (to float32 rounding of max/q99); 40×50 float32 values: the bins around q99
    hold single entries, whose exp(Σ ln a) is the value to float32 rounding."""
    rng = np.random.default_rng(21)
    w = np.asarray(jnp.asarray(rng.standard_normal((300, 301)), jnp.float32)
                   .astype(jnp.bfloat16).astype(jnp.float32))
    small = rng.standard_normal((40, 50)).astype(np.float32)
    for x, storage in ((w, "bfloat16"), (small, "float32")):
        a = np.abs(x).ravel().astype(np.float64)
        q = np.quantile(a, 0.99, method="inverted_cdf")
        st = element_stats(jnp.asarray(x), storage=storage)
        assert float(st["max_over_q99"]) == pytest.approx(a.max() / q, rel=3e-7)


def test_magnitude_bins_contain_their_values():
    """The bit-read |w| bins: each positive value lies in its bin's [lo, hi), bins have relative
    width 2^-12..2^-11, zeros go to bin 0 and values below the 32 covered octaves to bin 1."""
    from rmtbase.stats._magnitude import MAG_BINS, _edges, mag_index, mag_top

    rng = np.random.default_rng(22)
    a = np.abs(rng.standard_t(2, 20000)).astype(np.float32) * np.float32(1e-3)
    a[:3] = 0.0
    a[3:6] = a.max() * 2.0**-40
    amax = jnp.float32(a.max())
    top = mag_top(amax)
    idx = np.asarray(mag_index(jnp.asarray(a), top))
    assert (idx[:3] == 0).all() and (idx[3:6] == 1).all() and idx.max() == MAG_BINS - 1
    lo, hi = (np.asarray(e, dtype=np.float64) for e in _edges(jnp.asarray(idx[6:]), top,
                                                               jnp.float32))
    v = a[6:].astype(np.float64)
    assert ((lo <= v) & (v < hi)).all()
    rel = (hi - lo) / lo
    assert rel.min() >= 2.0**-12 * (1 - 1e-9) and rel.max() <= 2.0**-11 * (1 + 1e-9)


@pytest.mark.slow
def test_fit_window_gives_the_same_numbers_bit_for_bit(monkeypatch):
    """The Weibull fit looks up its cumulative y table only in the FIT_WINDOW bins that keep
    ranks, falling back to every bin when they span more: both branches (a Gaussian's middle
    80 % spans 3.7 octaves; a log-normal with σ = 4 spans ~15, and trim 1 every octave)
    give the numbers of the lookup over every bin (to float32 rounding: two programs)."""
    from rmtbase.stats import _magnitude
    from rmtbase.stats.tiles import one_tile

    rng = np.random.default_rng(23)
    samples = {
        "gaussian": rng.standard_normal(60_000),
        "student_t2": rng.standard_t(2, 60_000),
        "wide": rng.lognormal(0.0, 4.0, 60_000) * rng.choice([-1.0, 1.0], 60_000),
    }

    def fits(w):
        st = jax.jit(lambda x: one_tile(x, (0.8, 0.9, 1.0), "float32"))(jnp.asarray(w, jnp.float32))
        return np.array([float(v) for kl in st["weibull"] for v in kl])

    windowed = {k: fits(w) for k, w in samples.items()}
    monkeypatch.setattr(_magnitude, "FIT_WINDOW", 10 * _magnitude.MAG_BINS)  # every bin
    for k, w in samples.items():
        whole = fits(w)
        assert np.all(np.isfinite(whole)), k
        # Not exact: FIT_WINDOW is traced into the program, so the two are two programs; the
        # lookup selects the same table entries, the fit's float32 sums may round in another
        # order. The Weibull shapes and scales are positive and away from 0, so 64 ulps
        # relative.
        np.testing.assert_allclose(windowed[k], whole, rtol=64 * np.finfo(np.float32).eps,
                                   atol=0, err_msg=k)
