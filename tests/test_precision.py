"""rmtbase.stats.precision: round trips against independent references, lattice cells, and the
lattice-robust histogram statistics of rmtbase.stats.elementwise."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from rmtbase.errors import InputError
from rmtbase.stats.elementwise import element_stats
from rmtbase.stats.precision import (
    check_storage,
    detect_quantisation,
    lattice_cells,
    round_trip,
)


def _fp16(x: float) -> float:
    return float(np.float32(np.float16(np.float32(x))))


def _ggml_reference(block: np.ndarray, fmt: str) -> np.ndarray:
    """Scalar transcription of ggml's quantize_row_*_ref + dequantize_row_* (float32 math)."""
    x = block.astype(np.float32)
    out = np.empty_like(x)
    if fmt == "q4_0":
        amax, mx = np.float32(0), np.float32(0)
        for v in x:
            if amax < abs(v):
                amax, mx = abs(v), v
        d = np.float32(mx / np.float32(-8))
        idd = np.float32(1) / d if d else np.float32(0)
        for j, v in enumerate(x):
            q = min(15, int(np.float32(v * idd) + np.float32(8.5)))  # (int8_t) truncates; >= 0
            out[j] = np.float32(q - 8) * np.float32(_fp16(d))
    elif fmt == "q4_1":
        lo, hi = x.min(), x.max()
        d = np.float32((hi - lo) / np.float32(15))
        idd = np.float32(1) / d if d else np.float32(0)
        for j, v in enumerate(x):
            q = min(15, int(np.float32((v - lo) * idd) + np.float32(0.5)))
            out[j] = np.float32(q) * np.float32(_fp16(d)) + np.float32(_fp16(lo))
    else:
        amax = np.abs(x).max()
        d = np.float32(amax / np.float32(127))
        idd = np.float32(1) / d if d else np.float32(0)
        for j, v in enumerate(x):
            y = float(np.float32(v * idd))
            q = math.copysign(math.floor(abs(y) + 0.5), y)  # C roundf
            out[j] = np.float32(q) * np.float32(_fp16(d))
    return out


@pytest.mark.parametrize("fmt", ["q4_0", "q4_1", "q8_0"])
def test_block_round_trip_matches_ggml_reference(fmt):
    rng = np.random.default_rng(3)
    w = (0.02 * rng.standard_normal((3, 128))).astype(np.float32)
    w[0, :32] = 0.0  # an all-zero block (d = 0)
    got = np.asarray(round_trip(jnp.asarray(w), fmt))
    want = np.stack([np.concatenate([_ggml_reference(r[i:i + 32], fmt)
                                     for i in range(0, 128, 32)]) for r in w])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    levels = [len(np.unique(got[1, i:i + 32])) for i in range(0, 128, 32)]
    assert max(levels) <= (16 if fmt != "q8_0" else 255)


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
def test_float_round_trip_is_torch_rounding(storage):
    rng = np.random.default_rng(4)
    w = (0.02 * rng.standard_normal(4096)).astype(np.float32)
    want = torch.from_numpy(w).to(getattr(torch, storage)).float().numpy()
    # exact: float32 -> float16/bfloat16 rounding is correctly rounded (round-to-nearest-even) in
    #  JAX and torch
    np.testing.assert_array_equal(np.asarray(round_trip(jnp.asarray(w), storage)), want)


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
def test_lattice_cells_are_half_gaps_to_the_neighbours(storage):
    """Each cell reaches half-way to the adjacent representable values (torch.nextafter in the
    storage dtype): an independent construction of the rounding cell."""
    rng = np.random.default_rng(5)
    w = np.concatenate([0.02 * rng.standard_normal(2000), [1.0, -1.0, 0.5, 2.0**-14, 3e-6]])
    v = torch.from_numpy(w.astype(np.float32)).to(getattr(torch, storage))
    up = torch.nextafter(v, torch.full_like(v, float("inf"))).float().numpy()
    dn = torch.nextafter(v, torch.full_like(v, float("-inf"))).float().numpy()
    vf = v.float().numpy()
    below, above = (np.asarray(a) for a in lattice_cells(jnp.asarray(vf), storage))
    np.testing.assert_allclose(below, (vf - dn) / 2, rtol=1e-6)
    np.testing.assert_allclose(above, (up - vf) / 2, rtol=1e-6)


def test_detect_quantisation_and_storage_names():
    rng = np.random.default_rng(6)
    w = (0.02 * rng.standard_normal((8, 256))).astype(np.float32)
    assert detect_quantisation(w) is None
    assert detect_quantisation(np.asarray(round_trip(jnp.asarray(w), "bfloat16"))) is None
    for fmt in ("q4_0", "q4_1", "q5_0", "q8_0"):  # q5_0: as in a Gemma folder
        deq = round_trip(jnp.asarray(w), fmt)
        assert detect_quantisation(np.asarray(deq)) == fmt
        for st in ("float16", "bfloat16"):  # dequantised, then stored in 16 bits
            want = None if (fmt, st) == ("q8_0", "bfloat16") else fmt  # undecidable
            assert detect_quantisation(np.asarray(round_trip(deq, st)), storage=st) == want
    for st in ("float16", "bfloat16"):
        assert detect_quantisation(np.asarray(round_trip(jnp.asarray(w), st)), storage=st) is None
    assert check_storage(None) == "float32" and check_storage("BFLOAT16") == "bfloat16"
    with pytest.raises(InputError):
        check_storage("int4")
    with pytest.raises(InputError):
        round_trip(jnp.ones((2, 40)), "q4_0")


def test_detect_quantisation_quick_rejection_gives_the_full_rules_answer(monkeypatch):
    """Above 1024 blocks, float weights are ruled out on a strided sample of blocks first: on
    float32/bfloat16 Gaussian weights, on each format, and on matrices in which 30 %, 60 % or
    95 % of the rows were dequantised, the answer is the full rule's (the sample check off)."""
    from rmtbase.stats import detection

    rng = np.random.default_rng(8)
    w = (0.02 * rng.standard_normal((64, 1024))).astype(np.float32)  # 2048 blocks
    cases = {"float32": (w, "float32"),
             "bfloat16": (np.asarray(round_trip(jnp.asarray(w), "bfloat16")), "bfloat16")}
    for fmt in ("q4_0", "q4_1", "q5_0", "q8_0"):
        deq = np.asarray(round_trip(jnp.asarray(w), fmt))
        cases[fmt] = (deq, "float32")
        for share in (0.3, 0.6, 0.95):
            mixed = w.copy()
            rows = rng.permutation(64)[:round(share * 64)]
            mixed[rows] = deq[rows]
            cases[f"{fmt} {share:.0%}"] = (mixed, "float32")
    quick = {k: detect_quantisation(x, storage=st) for k, (x, st) in cases.items()}
    monkeypatch.setattr(detection, "_DETECT_SAMPLE", 10**9)  # the full rule only
    full = {k: detect_quantisation(x, storage=st) for k, (x, st) in cases.items()}
    assert quick == full
    assert quick["float32"] is None and quick["bfloat16"] is None
    fmts = ("q4_0", "q4_1", "q5_0", "q8_0")
    assert all(quick[f] == f and quick[f"{f} 95%"] == f for f in fmts)
    assert all(quick[f"{f} 60%"] is None for f in fmts)


def test_cell_histogram_is_the_expected_dithered_histogram():
    """The lattice-cell histogram equals the mean histogram of uniformly dithered copies
    (each value moved uniformly within its own cell): an independent Monte Carlo of the same
    definition. 400 dithered copies; per bin |difference| < 5 standard errors of the mean."""
    from rmtbase.stats.elementwise import _cell_histogram

    rng = np.random.default_rng(7)
    w = np.asarray(round_trip(jnp.asarray((0.02 * rng.standard_normal((64, 128)))
                                          .astype(np.float32)), "bfloat16")).ravel()
    below, above = (np.asarray(a, dtype=np.float64) for a in lattice_cells(jnp.asarray(w),
                                                                            "bfloat16"))
    lo, hi = (w - below).min(), (w + above).max()
    nb = math.ceil(2 * w.size ** (1 / 3))
    got = np.asarray(_cell_histogram(jnp.asarray(w - below), jnp.asarray(w + above),
                                     jnp.asarray(lo), jnp.asarray((hi - lo) / nb), nb,
                                     jnp.float64))
    counts = np.stack([np.histogram(w - below + rng.uniform(size=w.size) * (below + above),
                                    bins=nb, range=(lo, hi))[0] for _ in range(400)])
    se = counts.std(axis=0, ddof=1) / np.sqrt(counts.shape[0])
    assert got.sum() == pytest.approx(w.size, rel=1e-9)
    assert np.all(np.abs(got - counts.mean(axis=0)) <= 5 * se + 1e-9)
    assert np.any(se > 0)


@pytest.mark.parametrize("shape", [(64, 768), (128, 4096)])
def test_lattice_cells_remove_the_bfloat16_bias(shape):
    """Gaussian factors rounded to bfloat16: counting points biases the (self-normalised)
    entropy down and the KL up by many null standard deviations (measured: z ≈ −31 and +54 at
    4096×128); with lattice cells the mean paired shift is below 1.5 null sd (measured 0.4–0.9
    sd across σ mantissas; the remainder is the estimator's own and is shared by the matched
    null, whose calibration at several σ is tested in test_precision_null.py). 8 paired
    matrices; sd of a single matrix's statistic from the unrounded ones."""
    rng = np.random.default_rng(8 + shape[1])
    w = (0.02 * rng.standard_normal((8, *shape))).astype(np.float32)
    wb = np.asarray(round_trip(jnp.asarray(w), "bfloat16"))
    exact = element_stats(jnp.asarray(w))
    cells = element_stats(jnp.asarray(wb), storage="bfloat16")
    points = element_stats(jnp.asarray(wb))
    for stat in ("delta_entropy", "kl_gaussian"):  # shape statistics (entropy − ½ln 2πeσ̂²)
        sd = float(np.std(np.asarray(exact[stat]), ddof=1))
        d_cells = np.mean(np.asarray(cells[stat]) - np.asarray(exact[stat]))
        d_points = np.mean(np.asarray(points[stat]) - np.asarray(exact[stat]))
        assert abs(d_cells) < 1.5 * sd, (stat, d_cells, sd)
        if shape[1] == 4096:
            assert abs(d_points) > 10 * sd, (stat, d_points, sd)


def test_sigma_fit_is_infinite_for_a_flat_top_and_finite_for_gaussian():
    rng = np.random.default_rng(9)
    u = rng.uniform(-1, 1, (1, 64, 768))
    g = rng.standard_normal((1, 64, 768))
    assert np.isposinf(float(element_stats(jnp.asarray(u))["sigma_fit"][0]))
    assert 0.9 < float(element_stats(jnp.asarray(g))["sigma_fit"][0]) < 1.1
