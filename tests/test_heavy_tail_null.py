"""The heavy-tail null (rmtbase.baseline.heavy_tail_null) and the scored table
(rmtbase.scoring.matrices.heavy_tail): the null's draws are the matrix null's, prefixes of longer
tables, rescaling is the metrics of the rescaled spectra, and p-values of Gaussian matrices are
calibrated at two storages (n, rate and se stated)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline.heavy_tail_null import heavy_tail_null_draws, heavy_tail_null_table
from rmtbase.baseline.matrix_null import matrix_null_draws
from rmtbase.scoring.matrices.heavy_tail import (
    compare,
    folklore,
    null_metrics,
    rescaled,
)
from rmtbase.stats.heavy_tail import matrix_spectrum
from rmtbase.stats.heavy_tail_mp import spectrum_table
from rmtbase.stats.precision import round_trip


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))


def test_draws_are_the_matrix_nulls():
    """Σλ of draw i is ‖W_i‖_F² = m n rms_i² of the matrix null's draw i (float32 rms: 1e-5)."""
    got = heavy_tail_null_draws(48, 32, 4, seed=3)
    rms = matrix_null_draws(48, 32, 4, seed=3)["rms"]
    np.testing.assert_allclose(got["lambda"].sum(axis=1), 48 * 32 * rms ** 2, rtol=1e-5)


def test_a_longer_table_extends_the_shorter():
    short = heavy_tail_null_table(40, 24, draws=3)
    long = heavy_tail_null_table(40, 24, draws=6)
    # exact: draw i is computed by the same programs from the same key in both tables
    assert np.array_equal(long["lambda"].values[:3], short["lambda"].values)
    again = heavy_tail_null_table(24, 40, draws=5)  # (n, m) shares the float null; from cache
    assert np.array_equal(again["lambda"].values, long["lambda"].values[:5])  # exact: read back


def test_rescaled_equals_the_metrics_of_the_scaled_spectra():
    lam = heavy_tail_null_draws(64, 40, 3)["lambda"]
    null = spectrum_table(lam, 64, 40)
    got = rescaled(null, 123.0)
    want = spectrum_table(lam * (123.0 / lam.sum(axis=1))[:, None], 64, 40)
    for k in ("log_norm", "log_spectral_norm", "alpha_weighted", "log_alpha_norm", "alpha",
              "stable_rank", "mp_softrank"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, err_msg=k)


def test_folklore_labels():
    assert [folklore(a) for a in (1.5, 2.0, 6.0, 6.5, np.nan)] == [
        "over-trained", "well trained", "well trained", "under-trained", ""]


@pytest.mark.parametrize("shape,storage", [
    ((64, 96), "float32"), ((64, 96), "bfloat16"),
    pytest.param((96, 96), "float32", marks=pytest.mark.slow),  # Q = 1: the quarter-circle fit
    pytest.param((48, 192), "float16", marks=pytest.mark.slow)])
def test_gaussian_matrices_are_calibrated(shape, storage):
    """n = 150 N(0, 0.02²) matrices (key 11) against a null of 149 draws: the rejection rate at
    0.05 of α, stable rank and MP soft rank each within 2 se = 2 √(0.05·0.95/150) = 0.036 of 0.05
    (the rates are in the assertion message)."""
    n = 150
    m, k = shape
    null = null_metrics(max(m, k), min(m, k), storage, 149)
    w = round_trip(0.02 * jax.random.normal(jax.random.key(11), (n, m, k), jnp.float32),
                   storage)
    got = spectrum_table(matrix_spectrum(np.asarray(w, dtype=np.float32)), m, k)
    got["rand_distance"] = np.zeros(n)  # not tested here (a permutation per matrix)
    p = {s: [] for s in ("alpha", "stable_rank", "mp_softrank")}
    for i in range(n):
        one = {s: v[i] for s, v in got.items()}
        rows = compare(one, rescaled(null, one["sum_lambda"]))
        for s in p:
            p[s].append(rows[s][1])
    se = np.sqrt(0.05 * 0.95 / n)
    rates = {s: float(np.mean(np.asarray(v) <= 0.05)) for s, v in p.items()}
    assert all(abs(r - 0.05) <= 2 * se for r in rates.values()), rates


@pytest.mark.parametrize("detected, quantized_null, want", [
    (None, "auto", "float32"), (None, "none", "float32"), (None, "q4_0", "q4_0"),
    ("q8_0", "auto", "q8_0"), ("q8_0", "none", "float32"), ("q8_0", "q4_0", "q4_0")])
def test_null_storage_follows_quantized_null(detected, quantized_null, want):
    """The heavy-tail null's storage is the whole-matrix score's (cells.matrix_null_storage)."""
    from rmtbase.scoring.matrices.heavy_tail_inputs import storages
    from rmtbase.stats.storage import storage_record

    w = np.ones((4, 64), np.float32)
    lc = type("LC", (), {"storage": {"q": detected or "float32"}})()
    assert storages(w, lc, "q", quantized_null, "q") == ("float32", want)
    if quantized_null == "q4_0":
        from rmtbase.errors import InputError
        from rmtbase.scoring.matrices.cells import matrix_null_storage

        with pytest.raises(InputError, match="not a multiple of 32"):
            matrix_null_storage(storage_record("float32"), None, "q4_0", 48, "q")


def test_stored_metrics_are_those_of_the_stored_spectra():
    """The table's metric_<name> at σ = 1 against spectrum_table of its own spectra (rtol 1e-12:
    the same float64 programs, batch sizes may differ)."""
    table = heavy_tail_null_table(40, 24, draws=4)
    want = spectrum_table(table["lambda"].values, 40, 24)
    for k, v in want.items():
        np.testing.assert_allclose(table[f"metric_{k}"].values, v, rtol=1e-12, err_msg=k)


def test_score_heavy_tail_on_minilm_queries():
    """The embedded MiniLM's 6 query matrices against 19 null draws: α is the matrix's own fit,
    log_norm = log₁₀ ‖W‖_F² has no p (the null is conditioned on it), every other p is an
    add-one p of 19 draws (≥ 2/20)."""
    from rmtbase.models import default_model_path, load_components
    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail
    from rmtbase.stats.heavy_tail import heavy_tail_metrics

    ds = score_heavy_tail(components=("q",), draws=19)
    assert ds.sizes == {"layer": 6, "component": 1, "metric": 11, "eig": 384,
                        "summary": 8}  # exact: sizes
    w = next(iter(load_components(default_model_path(), components=("q",)))).matrices["q"]
    np.testing.assert_allclose(ds["value"].sel(layer=0, component="q", metric="alpha"),
                               heavy_tail_metrics(w)["alpha"], rtol=1e-12)
    assert np.isnan(ds["p_value"].sel(metric="log_norm")).all()
    p = ds["p_value"].drop_sel(metric="log_norm").values
    assert np.all((p >= 2 / 20 - 1e-12) & (p <= 1))
    assert set(np.unique(ds["folklore"].values)) <= {"over-trained", "well trained",
                                                     "under-trained"}
