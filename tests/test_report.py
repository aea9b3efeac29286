"""Tests of rmtbase.scoring.report on a hand-made score Dataset (no model, no Monte Carlo)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from scipy import integrate  # noqa: E402

from rmtbase.errors import InputError  # noqa: E402
from rmtbase.scoring import report  # noqa: E402

STATS = ["qk.npr", "qk.lambda_max", "q.std", "q.entropy", "qk.std", "qk.entropy"]


def _ds(L=3, H=4, d=64, d_h=8):
    rng = np.random.default_rng(0)
    S = len(STATS)
    z = rng.normal(size=(L, H, S))
    z[1, 2, 0] = -12.0  # the planted anomaly
    p = np.clip(rng.uniform(size=(L, H, S)), 0.002, 1)
    p[1, 2, :2] = 0.002
    flag = np.zeros((L, H, S), bool)
    flag[1, 2, :2] = True
    sig = 0.02 * (1 + 0.1 * rng.uniform(size=(L, H)))
    value = rng.normal(size=(L, H, S))
    value[..., 2] = sig
    value[..., 4] = sig**2 * np.sqrt(d_h)
    value[..., 3] = 0.5 * np.log(2 * np.pi * np.e * sig**2) - 0.01
    value[..., 5] = 0.5 * np.log(2 * np.pi * np.e * value[..., 4] ** 2) - 0.05
    dims = ("layer", "head", "stat")
    ds = xr.Dataset(
        {"value": (dims, value), "null_mean": (dims, value - 0.01 * z), "null_std": (dims, np.full_like(z, 0.01)),
         "z": (dims, z), "p_value": (dims, p), "q_value": (dims, np.minimum(1, p * 10)),
         "percentile": (dims, 100 * p), "flag": (dims, flag),
         "sigma_q": (("layer", "head"), sig), "sigma_k": (("layer", "head"), sig),
         "qk_spectrum": (("layer", "head", "rank"),
                         np.sort(rng.gamma(4, 0.25, size=(L, H, d_h)), axis=-1)[..., ::-1]),
         "null_spectrum": (("quantile", "rank"),
                           np.array([np.linspace(3, 0.1, d_h) * f for f in (0.7, 1, 1.4)]))},
        coords={"layer": np.arange(L), "head": np.arange(H), "stat": STATS,
                "quantile": [0.025, 0.5, 0.975]},
        attrs={"model": "toy", "architecture": "gpt2", "d": d, "d_h": d_h, "alpha": 0.05},
    )
    ds["z"][0, 0, 1] = np.nan
    return ds


def test_long_table_is_one_row_per_test():
    ds = _ds()
    df = report.long_table(ds)
    assert len(df) == 3 * 4 * len(STATS)
    row = df[(df["layer"] == 1) & (df["head"] == 2) & (df["stat"] == "qk.npr")].iloc[0]
    assert row.z == -12.0 and bool(row.flag) and row.sigma_q == ds.sigma_q.values[1, 2]


def test_ranking_and_terminal_table_lead_with_the_anomaly():
    ds = _ds()
    ds["null_draws"] = ("stat", np.full(len(STATS), 999))
    assert report.head_ranking(ds)[0] == (1, 2)
    text = report.anomaly_table(ds, n=3)
    lines = text.splitlines()
    assert "2 of 72 tests flagged" in lines[0] and "smallest possible p=0.002" in lines[0]
    assert lines[2].split()[:3] == ["1", "2", "2"] and "qk.npr" in lines[2]
    assert len(lines) == 5


def test_z_heatmap_is_symmetric_diverging_and_marks_flags():
    ds = _ds()
    fig, ax = plt.subplots()
    out = report.plot_z_heatmap(ds, "qk.npr", ax=ax)
    assert out is ax
    im = ax.images[0]
    lo, hi = im.get_clim()
    assert lo == -hi == -12.0
    assert im.get_cmap().name.startswith("RdBu")
    marks = ax.collections[0].get_offsets()
    np.testing.assert_array_equal(np.asarray(marks), [[2, 1]])  # (head, layer)
    ax2 = report.plot_z_heatmap(ds, "qk.lambda_max", vmax=3)
    assert ax2.images[0].get_clim() == (-3, 3)
    assert np.ma.is_masked(ax2.images[0].get_array()[0, 0])  # the NaN cell
    plt.close("all")
    with pytest.raises(InputError):
        report.plot_z_heatmap(ds, "qk.nope")


def test_entropy_reference_is_gaussian_entropy():
    """The drawn reference equals −∫ φ_σ ln φ_σ by quadrature at the plotted σ."""
    ds = _ds()
    for matrix in ("q", "qk"):
        ax = report.plot_entropy_sigma(ds, matrix)
        ref = [ln for ln in ax.lines if "Gaussian" in str(ln.get_label())][0]
        xs, ys = ref.get_xdata(), ref.get_ydata()
        for i in (0, len(xs) // 2, -1):
            s = xs[i]
            phi = lambda x, s=s: np.exp(-x * x / (2 * s * s)) / np.sqrt(2 * np.pi * s * s)  # noqa: E731
            h, _ = integrate.quad(lambda x, phi=phi: -phi(x) * np.log(phi(x)), -12 * s, 12 * s)
            assert ys[i] == pytest.approx(h, rel=1e-8, abs=1e-10)
        pts = ax.collections  # errorbars + heads + flagged
        assert len(pts) >= 2
        plt.close("all")


def test_spectrum_plots():
    ds = _ds()
    ax = report.plot_spectrum(ds, 1, 2)
    line = [ln for ln in ax.lines if "head 2" in str(ln.get_label())][0]
    np.testing.assert_allclose(line.get_ydata(), ds.qk_spectrum.sel(layer=1, head=2).values)
    assert ax.get_yscale() == "log" and len(ax.collections) == 1  # the null band
    plt.close("all")
    ax = report.plot_spectrum_density(ds, 1, 2)
    heights = np.array([p.get_height() for p in ax.patches])
    widths = np.array([p.get_width() for p in ax.patches])
    assert np.sum(heights * widths) == pytest.approx(1.0)
    assert any("MP" in str(ln.get_label()) for ln in ax.lines)
    plt.close("all")


def test_write_report_files_roundtrip(tmp_path):
    ds = _ds()
    written = report.write_report(ds, tmp_path / "out", n_spectra=1)
    out = tmp_path / "out"
    for name in ("scores.nc", "scores.csv", "summary.txt"):
        assert (out / name).is_file()
    back = xr.open_dataset(out / "scores.nc")
    try:
        assert back["flag"].dtype == bool
        xr.testing.assert_identical(back[["z", "flag", "value"]].load(), ds[["z", "flag", "value"]])
        assert back.attrs["model"] == "toy"
    finally:
        back.close()
    df = pd.read_csv(out / "scores.csv")
    assert len(df) == 72 and {"layer", "head", "stat", "z", "p_value", "flag"} <= set(df.columns)
    pngs = sorted((out / "figures").glob("*.png"))
    headline = [s for s in STATS if s in report.HEADLINE_STATS]
    assert len(headline) == 4
    assert {p.name for p in pngs} == ({f"z_{s}.png" for s in headline}
                                      | {"z_all.png", "entropy_sigma.png", "spectrum_L1_H2.png",
                                         f"spectrum_L{report.head_ranking(ds)[-1][0]}_H"
                                         f"{report.head_ranking(ds)[-1][1]}.png"})
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(written) >= {"scores.nc", "entropy_sigma"}
    every = report.write_report(ds, tmp_path / "every", heatmaps="all", n_spectra=0)
    assert {f"z_{s}" for s in STATS} <= set(every)
    no_fig = report.write_report(ds, tmp_path / "nofig", figures=False)
    assert not (tmp_path / "nofig" / "figures").exists() and len(no_fig) == 3
