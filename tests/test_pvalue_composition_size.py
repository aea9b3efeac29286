"""The composition null sized by its own Monte Carlo error.

Every model of a shape is read against the same Gaussian-factor null (seed 0), so that
sample's realised size — the probability that a fresh null pair gets ``composition_p`` ≤ α —
is what every user of the shape gets. Over nulls of N draws it has mean ≤ α (add-one) and
sd √(α(1 − α)/N) (:func:`rmtbase.scoring.stopping.joint.rate_sd`): 0.0049 at α = 0.05 and
the former default N = 2,000, as large as 0.71 of a 1,000-pair calibration's binomial se
(0.0069). The default is now sized as the statistics' joint null
(:func:`~rmtbase.scoring.stopping.joint.needed_draws`: sd ≤ ¼ of that se, N ≥ 16,000):
``GaussianNull.composition_draws`` = 18,000, sd 0.0016.

A null's realised size is measured here as the fraction of F fresh null draws (other seeds)
whose add-one p against it is ≤ 0.05; that fraction's own binomial se is √(α(1 − α)/F)."""

from __future__ import annotations

import numpy as np
import pytest

ALPHA = 0.05


def _scores(seed: int, d: int, d_h: int, n: int) -> np.ndarray:
    import jax

    from rmtbase.scoring.composition.pairs import null_scores

    return null_scores(jax.random.key(seed), d, d_h, d_h, n)


def _size(null_sorted: np.ndarray, fresh: np.ndarray) -> float:
    """Fraction of ``fresh`` null scores whose composition_p against ``null_sorted`` ≤ α."""
    from rmtbase.scoring.composition.dataset import upper_p

    return float(np.mean(upper_p(fresh, null_sorted) <= ALPHA))


def test_the_default_draws_keep_the_size_error_below_a_quarter_of_a_calibration_se():
    """The default is at least the joint null's size rule (a test that fails if it shrinks)."""
    from rmtbase.scoring.stopping.joint import needed_draws, rate_sd
    from rmtbase.stats.null_kind import GaussianNull

    n = GaussianNull.composition_draws
    assert n >= needed_draws()
    se_1000 = np.sqrt(ALPHA * (1 - ALPHA) / 1000)
    assert rate_sd(n, ALPHA) <= 0.25 * se_1000 < rate_sd(2000, ALPHA)


@pytest.mark.slow  # 96,000 draws at 768 x 64: 214 s wall at load 12 on the 2-core machine
def test_the_realised_size_at_gpt2_small_shape():
    """768 × 64 (GPT-2 small), F = 40,000 fresh draws (seed 7; binomial se 0.0011).
    Reproduced: the shipped seed-0 null at the former default 2,000 draws has realised size
    0.0561 (z +5.6 on the fresh draws' se; 0.0563 and 0.0587 on other fresh draws). At the new
    default 18,000 draws: seed 0 0.0485, seeds 11 and 12 (not shipped) 0.0469 and 0.0477, each
    within 2 se of 0.05, se = √(rate_sd(18,000)² + binomial se²) = 0.0020 (z −0.8, −1.6, −1.2;
    the three share the fresh draws). Measured 2026-11-26: 1 passed in 214 s (load ≈ 12 on 2
    cores)."""
    from rmtbase.scoring.stopping.joint import rate_sd
    from rmtbase.stats.null_kind import GaussianNull

    n_fresh, n = 40_000, GaussianNull.composition_draws
    fresh = _scores(7, 768, 64, n_fresh)
    se_f = np.sqrt(ALPHA * (1 - ALPHA) / n_fresh)
    old = _size(_scores(0, 768, 64, 2000), fresh)
    assert old > ALPHA + 4 * se_f, old  # the seed-0 sample at 2,000 draws runs high
    sizes = {s: _size(_scores(s, 768, 64, n), fresh) for s in (0, 11, 12)}
    se = np.hypot(rate_sd(n, ALPHA), se_f)
    print(f"768x64: seed-0 null at 2,000 draws {old:.4f}; at {n}: {sizes} (se {se:.4f})")
    for s, r in sizes.items():
        assert abs(r - ALPHA) <= 2 * se, (s, r, se)


@pytest.mark.slow  # 20 nulls of 2,000 and 20 of 18,000 at 64 x 8 plus 400,000 fresh: 28 s
def test_the_realised_size_spread_over_nulls_is_the_monte_carlo_error():
    """64 × 8, F = 400,000 fresh draws (seed 101; se 0.00034), nulls at seeds 1,000–1,019.
    The sd of the realised size over 20 nulls follows rate_sd: within its 99 % χ² interval
    (19 df) of √(α(1 − α)/N) at N = 2,000 (0.0049) and at the default 18,000 (0.0016, fresh
    se added in quadrature); at the default at most 3 of the 20 nulls lie beyond 2 se of 0.05
    (expected 0.9; P(> 3) ≈ 0.01) and their mean within 2 of its se, √(rate_sd²/20 + se_f²)
    (the fresh draws are shared). Measured: N = 2,000 mean 0.0493, sd 0.0044 (rate_sd 0.0049),
    range 0.0447–0.0595; N = 18,000 mean 0.0504, sd 0.0022 (0.0017; χ² interval up to
    0.0024), range 0.0457–0.0537; 28 s."""
    from scipy import stats

    from rmtbase.scoring.stopping.joint import rate_sd
    from rmtbase.stats.null_kind import GaussianNull

    fresh = _scores(101, 64, 8, 400_000)
    se_f = np.sqrt(ALPHA * (1 - ALPHA) / fresh.size)
    k = 20
    lo, hi = (np.sqrt(stats.chi2.ppf(q, k - 1) / (k - 1)) for q in (0.005, 0.995))
    for n in (2000, GaussianNull.composition_draws):
        sizes = np.array([_size(_scores(1000 + s, 64, 8, n), fresh) for s in range(k)])
        want = np.hypot(rate_sd(n, ALPHA), se_f)
        sd = sizes.std(ddof=1)
        print(f"64x8 N={n}: mean {sizes.mean():.4f} sd {sd:.4f} (rate_sd {want:.4f}), "
              f"min {sizes.min():.4f} max {sizes.max():.4f}")
        assert lo * want <= sd <= hi * want, (n, sd, want)
        if n == GaussianNull.composition_draws:
            assert np.sum(np.abs(sizes - ALPHA) > 2 * want) <= 3, sizes
            se_mean = np.hypot(rate_sd(n, ALPHA) / np.sqrt(k), se_f)
            assert abs(sizes.mean() - ALPHA) <= 2 * se_mean, (sizes.mean(), se_mean)


def test_a_pair_near_its_bh_threshold_is_open_and_the_rest_are_not():
    """:func:`p_error` on 100 pairs read from 2,000 draws: the one pair no draw reached
    (p = 1/2,001, at the first BH threshold α/100 = 5·10⁻⁴) could be flagged or not at
    20,000 draws; pairs at p ≈ 0.5 cannot; its se is √(p(1 − p)/2,000)."""
    from rmtbase.scoring.composition.dataset import p_error

    p = np.full(100, 1001 / 2001)
    p[0] = 1 / 2001
    se, open_ = p_error(p, p, 2000, ALPHA, tail=False)
    assert open_.tolist() == [True] + [False] * 99
    assert np.allclose(se, np.sqrt(p * (1 - p) / 2000))
    p[0] = 1.0  # nothing near a threshold: nothing open
    assert not p_error(p, p, 2000, ALPHA, tail=False)[1].any()


def test_composition_states_its_draws_and_warns_where_permutations_limit_a_flag(tmp_path):
    """A random GPT-2 (3 layers × 4 heads, d 64): composition.nc's ``composition_p_se`` is
    √(p(1 − p)/N) with N the draws (attr ``draws`` on the p variables), and
    ``composition_size_sd`` is rate_sd(N, α); under the permutation null with 50 draws BH
    over the 3 × 48 entries cannot flag (needs 2,879) and the file says so
    (``composition_draws_note``, which ``rmtbase score`` prints); the Gaussian null, whose
    tail reaches beyond the draws, has no such note."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import rmtbase
    from rmtbase.scoring.stopping.joint import rate_sd

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=4, n_embd=64, vocab_size=32,
                               n_positions=16)).save_pretrained(tmp_path / "m")
    ds = rmtbase.composition(str(tmp_path / "m"), draws=500)
    p = ds.composition_p.values
    assert ds.composition_p.attrs["draws"] == ds.composition_p_se.attrs["draws"] == 500
    ok = np.isfinite(p)
    assert np.allclose(ds.composition_p_se.values[ok], np.sqrt(p * (1 - p) / 500)[ok])
    assert np.isnan(ds.composition_p_se.values[~ok]).all()
    assert ds.attrs["composition_size_sd"] == rate_sd(500, ALPHA)
    assert ds.attrs["composition_open_pairs"] >= 0
    assert "composition_draws_note" not in ds.attrs
    po = ds.qk_overlap_p.values
    assert ds.qk_overlap_p_tail.attrs["draws"] == ds.qk_overlap_p_se.attrs["draws"] == 500
    assert np.allclose(ds.qk_overlap_p_se.values, np.sqrt(po * (1 - po) / 500), equal_nan=True)
    from rmtbase.report.composition_figure import composition_json

    doc = composition_json(ds)  # --json states the same (docs/json.md)
    assert (doc["draws"], doc["size_sd"]) == (500, rate_sd(500, ALPHA))
    assert doc["open_pairs"] == ds.attrs["composition_open_pairs"]
    perm = rmtbase.composition(str(tmp_path / "m"), draws=50, null="permutation")
    assert perm.composition_p_se.attrs["draws"] == 50
    assert ("BH over all 144 pair entries cannot flag any pair (it needs draws >= 2879)"
            in perm.attrs["composition_draws_note"])


def test_the_cached_null_is_the_drawn_one_and_a_bad_file_is_drawn_again(tmp_path, monkeypatch):
    """:func:`cached_null`: a cold call draws and stores, a warm one reads the same numbers
    without drawing; a file that does not hold what its name says (truncated) is drawn again
    with one warning and replaced."""
    from rmtbase.scoring.composition.cache import cached_null, null_path

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    calls = []

    def draw():
        calls.append(1)
        return _scores(3, 64, 8, 300)

    first = cached_null("composition", 64, 8, 300, 3, "float32", draw)
    again = cached_null("composition", 64, 8, 300, 3, "float32", draw)
    # exact: one read of a file (the cached netCDF) against the array it stored
    assert len(calls) == 1 and np.array_equal(first, again) and first.size == 300
    path = null_path("composition", 64, 8, 300, 3, "float32")
    import xarray as xr

    with xr.open_dataset(path) as ds:
        short = ds.load().isel(draw=slice(0, 10))
    short.to_netcdf(path)
    with pytest.warns(RuntimeWarning, match="does not hold what its name says"):
        third = cached_null("composition", 64, 8, 300, 3, "float32", draw)
    # exact: the same jitted program and inputs (the redraw after the bad file)
    assert len(calls) == 2 and np.array_equal(third, first)
    # exact: one read of the rewritten file against the array it stored
    with xr.open_dataset(path) as ds:
        # exact: the cached file holds this process's own draws, read back losslessly
        assert np.array_equal(ds["null"].values, first)


@pytest.mark.parametrize("draws, flagged_open", [(1000, 1), (18_000, 0)])
def test_heads_read_from_fixed_draws_state_how_many_decisions_are_open(draws, flagged_open):
    """``head_open_decisions`` (:func:`rmtbase.scoring.stopping.joint_growth._state_open`): of 100 heads
    read from one reference, 99 at p 0.5 and one with no calibration draw beyond it (count 0,
    p 10⁻⁴, Cauchy-tailed): with 1,000 draws (the permutation null's per-head default) its
    BH flag over 100 heads (needs 2p ≤ 5·10⁻⁴) could differ at 18,000 draws; read from
    18,000 nothing is open; a head at p 0.5 instead leaves nothing open."""
    from types import SimpleNamespace

    import xarray as xr

    from rmtbase.scoring.stopping.joint_growth import _state_open

    p = np.full((1, 100), 0.5)
    method = np.full((1, 100), "empirical", dtype=object)
    k = np.full((1, 100), 500)
    p[0, 1], method[0, 1], k[0, 1] = 1e-4, "extrapolated", 0
    ref = SimpleNamespace(joint={"q.rms": np.zeros(draws)}, rows=None)
    how = SimpleNamespace(alpha=ALPHA, progress=False)

    def state(p, method, k):
        ds = xr.Dataset({"head_p_value": (("layer", "head"), p),
                         "head_p_method": (("layer", "head"), method),
                         "head_p_exceedances": (("layer", "head"), k)})
        _state_open([ref], ds, how)
        return ds.attrs["head_open_decisions"]

    assert state(p, method, k) == flagged_open
    p[0, 1], method[0, 1], k[0, 1] = 0.5, "empirical", 500
    assert state(p, method, k) == 0


def test_rmtbase_score_prints_the_permutation_draws_note(tmp_path, capsys):
    """``rmtbase score --composition --null permutation --draws 40`` on a random GPT-2
    (3 × 4 heads): the note that BH over the 144 entries cannot flag (needs 2,879 draws) is on
    stderr and in composition.nc; ``--quiet`` leaves it in the file only."""
    import torch
    import xarray as xr
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.cli import main

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=4, n_embd=64, vocab_size=32,
                               n_positions=16)).save_pretrained(tmp_path / "m")
    want = "BH over all 144 pair entries cannot flag any pair (it needs draws >= 2879)"
    for quiet, out in ((False, tmp_path / "o"), (True, tmp_path / "q")):
        capsys.readouterr()
        assert main(["score", str(tmp_path / "m"), "--composition", "--null", "permutation",
                     "--draws", "40", "--stats", "spectral", "--out", str(out),
                     "--no-figures", *(["--quiet"] if quiet else [])]) == 0
        assert (want in capsys.readouterr().err) is not quiet
        with xr.open_dataset(out / "composition.nc") as ds:
            assert want in ds.attrs["composition_draws_note"]
