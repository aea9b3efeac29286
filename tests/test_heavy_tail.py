"""WeightWatcher's heavy-tail metrics (rmtbase.stats.heavy_tail, heavy_tail_mp) against
independent computations: a plain loop of the Clauset–Shalizi–Newman fit, norms from the entries,
a Pareto sample of known exponent, the MP law of a Gaussian matrix; and (slow) against
WeightWatcher 0.7.7 itself in its own venv (``RMTBASE_WW_PYTHON``, default
/work/peers-ww/bin/python) on the same matrices. The quick tests keep the slow test's claim for
the fit (the loop follows WW's definition line by line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.stats.heavy_tail import (
    HEAVY_TAIL,
    heavy_tail_metrics,
    matrix_spectrum,
    norm_metrics,
    powerlaw_fit,
)
from rmtbase.stats.heavy_tail_mp import (
    _kde_linear,
    fmin_1d,
    js_distance,
    mp_fit,
    permutation,
    rand_distance,
)

ROOT = Path(__file__).resolve().parents[1]
WW_PYTHON = os.environ.get("RMTBASE_WW_PYTHON", "/work/peers-ww/bin/python")


def _csn_loop(lam, thresh=1e-5):
    """CSN fit as a plain loop: for each candidate xmin the MLE and the KS distance of the fitted
    CDF to the empirical CDF at its left limits; the first minimum of D."""
    x = np.sort(np.asarray(lam, dtype=np.float64))
    x = x[x > thresh]
    best = None
    for i in range(x.size - 1):
        tail = x[i:]
        n = tail.size
        a = 1.0 + n / np.sum(np.log(tail / x[i]))
        d = 1.0
        if a > 1:
            d = max(abs((1 - (t / x[i]) ** (1 - a)) - j / n) for j, t in enumerate(tail))
        if best is None or d < best[2]:
            best = (a, x[i], d, (a - 1) / np.sqrt(n))
    return best


def _matrices():
    rng = np.random.default_rng(7)
    u, v = rng.standard_normal(96), rng.standard_normal(160)
    return {"gauss": rng.standard_normal((96, 160)),
            "student": rng.standard_t(3, (160, 96)),
            "spiked": rng.standard_normal((96, 160)) + 0.4 * np.outer(u, v)}


@pytest.mark.parametrize("name", ["gauss", "student", "spiked"])
def test_fit_equals_the_loop(name):
    lam = matrix_spectrum(_matrices()[name])
    with jax.enable_x64(True):
        got = {k: float(v) for k, v in powerlaw_fit(jnp.asarray(lam)).items()}
    a, xmin, d, s = _csn_loop(lam)
    np.testing.assert_allclose([got["alpha"], got["xmin"], got["ks_distance"],
                                got["alpha_sigma"]], [a, xmin, d, s], rtol=1e-9)
    assert got["num_pl_spikes"] == np.sum(lam >= xmin)  # exact: a count


def test_fit_recovers_a_pareto_exponent():
    """Pareto(α = 3) above xmin = 1, n = 4000, key 0: the MLE's se is (α−1)/√n ≈ 0.03 at the
    full tail; the KS choice of xmin shortens it, so the tolerance is 0.2 (about 6 se at n/4)."""
    u = np.asarray(jax.random.uniform(jax.random.key(0), (4000,), dtype=jnp.float32),
                   dtype=np.float64)
    x = (1 - u) ** (-1 / 2.0)
    with jax.enable_x64(True):
        got = powerlaw_fit(jnp.asarray(x))
    assert abs(float(got["alpha"]) - 3.0) < 0.2


def test_fit_is_undefined_below_twenty_eigenvalues():
    with jax.enable_x64(True):
        got = powerlaw_fit(jnp.asarray(np.r_[np.zeros(10), np.arange(1.0, 20.0)]))
    assert np.isnan(float(got["alpha"]))


def test_norm_metrics_from_the_entries():
    """log_norm, log_spectral_norm, stable rank, Σλ² from the entries: ‖W‖_F², ‖W‖₂² by
    numpy's 2-norm, ‖WᵀW‖_F² (α = 2); relative tolerance 1e-10 (float64 rounding)."""
    w = _matrices()["student"]
    lam = matrix_spectrum(w)
    fro, two = np.sum(w * w), np.linalg.norm(w, 2) ** 2
    with jax.enable_x64(True):
        got = {k: float(v) for k, v in norm_metrics(jnp.asarray(lam), 2.0).items()}
    np.testing.assert_allclose(
        [got["log_norm"], got["log_spectral_norm"], got["stable_rank"],
         got["log_alpha_norm"], got["alpha_weighted"]],
        [np.log10(fro), np.log10(two), fro / two, np.log10(np.sum((w.T @ w) ** 2)),
         2 * np.log10(two)], rtol=1e-10)


def test_metrics_of_a_stack_are_those_of_each_matrix():
    m = _matrices()
    stack = np.stack([m["gauss"], m["spiked"]])
    both = heavy_tail_metrics(stack)
    for i, k in enumerate(("gauss", "spiked")):
        one = heavy_tail_metrics(m[k])
        np.testing.assert_allclose([both[s][i] for s in one], list(one.values()), rtol=1e-9)


def test_kde_is_the_linear_kernel_sum():
    y = np.asarray([0.1, 0.15, 0.5, 1.3])
    grid = np.linspace(0, 2, 41)
    want = np.array([np.sum(np.maximum(0, 1 - np.abs(g - y) / 0.1)) for g in grid]) / (4 * 0.1)
    np.testing.assert_allclose(_kde_linear(y, grid), want, rtol=1e-12, atol=1e-15)


def test_mp_fit_of_a_gaussian_matrix():
    """A 400×1200 N(0, 1) matrix (key 1): on the mean-1 scale the MP σ is 1; the fit's grid step is
    0.01 s₀ and the KDE's bandwidth 0.1, so σ within 0.05; no spike; soft rank within 0.1 of 1."""
    w = np.asarray(jax.random.normal(jax.random.key(1), (400, 1200)), dtype=np.float64)
    got = mp_fit(matrix_spectrum(w), 400, 1200)
    assert abs(got["sigma_mp"] - 1.0) < 0.05
    assert got["num_spikes"] == 0  # exact: a count
    assert abs(got["mp_softrank"] - 1.0) < 0.1


def test_mp_fit_counts_a_planted_spike():
    """Rank-one signal of strength 4 ≫ the BBP threshold Q^{-1/4} for a 300×900 matrix (key 2)."""
    k1, k2, k3 = jax.random.split(jax.random.key(2), 3)
    z = np.asarray(jax.random.normal(k1, (300, 900)), dtype=np.float64)
    u = np.asarray(jax.random.normal(k2, (300,)), dtype=np.float64)
    v = np.asarray(jax.random.normal(k3, (900,)), dtype=np.float64)
    w = z + 4 * np.sqrt(900) * np.outer(u / np.linalg.norm(u), v / np.linalg.norm(v))
    got = mp_fit(matrix_spectrum(w), 300, 900)
    assert got["num_spikes"] >= 1
    assert got["mp_softrank"] < 0.5


def test_js_distance_closed_forms():
    p = np.array([1.0, 2.0, 3.0])
    assert js_distance(p, p) == 0.0  # exact: p = m, every log term is ln 1 = 0
    # disjoint supports after sorting: (0, 1) against (1, 0) is impossible sorted, so use
    # p = (0, 1), q = (½, ½): m = (¼, ¾); JS = ½[ln(4/3)] + ½[½ ln 2 + ½ ln(2/3)]
    want = np.sqrt(0.5 * np.log(4 / 3) + 0.5 * (0.5 * np.log(2) + 0.5 * np.log(2 / 3)))
    np.testing.assert_allclose(js_distance([0.0, 1.0], [0.5, 0.5]), want, rtol=1e-14)


def test_rand_distance_separates_structure():
    """Key 3: a Gaussian matrix's permuted spectrum is its own law (distance < 0.02); a rank-one
    dominated one loses its spike under permutation (distance > 0.1)."""
    m = _matrices()
    assert rand_distance(m["gauss"], jax.random.key(3)) < 0.02
    assert rand_distance(m["spiked"], jax.random.key(3)) > 0.1


def test_records_map_a_batch_of_spectra_to_one_value_each():
    for rec in HEAVY_TAIL:
        got = jax.eval_shape(rec.fn, jax.ShapeDtypeStruct((2, 8), jnp.float32))
        assert got.shape == (2,)  # exact: shapes


@pytest.mark.slow
@pytest.mark.skipif(not Path(WW_PYTHON).exists(), reason="no WeightWatcher venv "
                    "(RMTBASE_WW_PYTHON)")
def test_equal_to_weightwatcher(tmp_path):
    """WeightWatcher 0.7.7 ``analyze(mp_fit=True, randomize=True)`` on one nn.Linear per matrix:
    every metric within rtol 1e-7 (float64 SVDs of two libraries), rand_distance within 0.005
    (each draws its own permutation; its spread at these sizes is about 0.002)."""
    mats = {k: v.astype(np.float32) for k, v in _matrices().items()}
    np.savez(tmp_path / "m.npz", **mats)
    subprocess.run([WW_PYTHON, str(ROOT / "tests" / "_ww_peer.py"), "matrices",
                    str(tmp_path / "m.npz"), str(tmp_path / "ww.json"), "--mp"],
                   check=True, capture_output=True, timeout=600)
    rows = json.loads((tmp_path / "ww.json").read_text())["layers"]
    names = {"ks_distance": "D", "alpha_sigma": "sigma"}
    for row in rows:
        w = mats[row["matrix"]]
        got = heavy_tail_metrics(w)
        got.update(mp_fit(matrix_spectrum(w), *w.shape))
        for k in (*got.keys() - {"bulk_max"}, "bulk_max"):
            np.testing.assert_allclose(got[k], row[names.get(k, k)], rtol=1e-7,
                                       err_msg=f"{row['matrix']} {k}")
        assert abs(rand_distance(w, jax.random.key(0)) - row["rand_distance"]) < 0.005


#: WeightWatcher's MPNet module names → rmtbase's component names.
_MPNET_NAMES = {"attention.attn.q": "q", "attention.attn.k": "k", "attention.attn.v": "v",
                "attention.attn.o": "o", "intermediate.dense": "ffn_in",
                "output.dense": "ffn_out"}


@pytest.mark.slow
@pytest.mark.skipif(not Path(WW_PYTHON).exists(), reason="no WeightWatcher venv "
                    "(RMTBASE_WW_PYTHON)")
def test_mpnet_alpha_equal_to_weightwatcher(tmp_path, monkeypatch):
    """A randomly initialised MPNet (d 384, FFN 1536, 2 layers; no trained MPNet offline, so
    this is the two tools' agreement) saved with save_pretrained: WW ``analyze()`` on the folder
    and ``score_heavy_tail`` give every encoder matrix the same α within rtol 1e-7."""
    import torch
    import transformers as tf

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail

    torch.manual_seed(0)
    tf.MPNetModel(tf.MPNetConfig(hidden_size=384, num_hidden_layers=2, num_attention_heads=12,
                                 intermediate_size=1536, vocab_size=1000)
                  ).save_pretrained(tmp_path / "mpnet")
    subprocess.run([WW_PYTHON, str(ROOT / "tests" / "_ww_peer.py"), "model",
                    str(tmp_path / "mpnet"), str(tmp_path / "ww.json")],
                   check=True, capture_output=True, timeout=600)
    want = {}
    for row in json.loads((tmp_path / "ww.json").read_text())["layers"]:
        parts = row["longname"].split(".")
        if parts[:2] == ["encoder", "layer"] and ".".join(parts[3:]) in _MPNET_NAMES:
            want[int(parts[2]), _MPNET_NAMES[".".join(parts[3:])]] = row["alpha"]
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    ds = score_heavy_tail(str(tmp_path / "mpnet"), draws=2, randomize=False)
    got = {(int(la), str(c)): float(ds["value"].sel(layer=la, component=c, metric="alpha"))
           for la in ds.layer.values for c in ds.component.values}
    assert sorted(got) == sorted(want) and len(want) == 12, (sorted(got), sorted(want))
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=1e-7)


def _scipy_fmin(f, x0):
    from scipy import optimize

    got = optimize.fmin(lambda x: f(np.asarray(x).ravel()[0]), x0, full_output=1, disp=False)
    return float(np.asarray(got[0]).ravel()[0])


@pytest.mark.parametrize("f", [
    lambda x: (x - 3.3) ** 2, abs, lambda x: 1.0, lambda x: np.nan, lambda x: np.sin(5 * x),
    lambda x: -x, lambda x: np.nan if x > 1 else (x - 1) ** 2],
    ids=["quadratic", "kink", "flat", "nan", "sine", "unbounded", "nan-above-1"])
def test_fmin_1d_is_scipys_fmin(f):
    """fmin_1d takes scipy's Nelder–Mead steps at N = 1, so it ends where ``scipy.optimize.fmin``
    does: on smooth, kinked, flat, NaN and unbounded functions (the call limit) from six
    starts, the zero start among them."""
    import warnings

    for x0 in (0.0, 1.0, -2.5, 1e-9, 7.0, 0.97):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want, got = _scipy_fmin(f, x0), fmin_1d(f, x0)
        # exact: the same IEEE operations in the same order as scipy's
        assert got == want or (np.isnan(got) and np.isnan(want)), (x0, got, want)


def test_mp_fit_polish_is_scipys_fmin(monkeypatch):
    """The MP fit of Gaussian, heavy-tailed and spiked spectra of five shapes (Q = 1 among them)
    is the one scipy's ``fmin`` gives, every key equal."""
    import rmtbase.stats.heavy_tail_mp as mp

    rng = np.random.default_rng(1)
    for shape in [(384, 384), (1536, 384), (200, 50), (64, 64), (1000, 999)]:
        for t in range(3):
            w = rng.standard_normal(shape)
            w = w * rng.standard_t(2, size=shape) if t == 1 else w
            w = w + 0.3 * np.outer(rng.standard_normal(shape[0]),
                                   rng.standard_normal(shape[1])) if t == 2 else w
            lam = np.linalg.svd(w, compute_uv=False) ** 2
            got = mp_fit(lam, *shape)
            with monkeypatch.context() as m:
                m.setattr(mp, "fmin_1d", _scipy_fmin)
                want = mp_fit(lam, *shape)
            assert got == want, (shape, t, got, want)  # exact: the same steps as scipy's


@pytest.mark.parametrize("size", [1, 2, 1537, 589_824])
def test_permutation_is_numpys_permutation_of_the_keys_data(size):
    """rand_distance's permutation is ``np.random.default_rng(key_data).permutation(size)``
    (its docstring), whether given the key or its data: computed here by numpy's own call."""
    key = jax.random.fold_in(jax.random.key(11), size)
    seed = np.asarray(jax.random.key_data(key), dtype=np.uint32).ravel().tolist()
    want = np.random.default_rng(seed).permutation(size)
    data = np.asarray(jax.random.key_data(key))
    np.testing.assert_array_equal(permutation(key, size), want)  # exact: integer permutations
    np.testing.assert_array_equal(permutation(data, size), want)  # exact: integer permutations


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
