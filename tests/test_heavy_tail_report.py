"""The heavy-tail CSV and ESD figure (rmtbase.report.heavy_tail_report)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from rmtbase.report.heavy_tail_report import plot_esd, write_heavy_tail_csv
from rmtbase.scoring.matrices.heavy_tail import METRICS


def _ds():
    rng = np.random.default_rng(0)
    shape3 = (1, 2, len(METRICS))
    dims = ("layer", "component", "metric")
    ds = xr.Dataset({v: (dims, rng.random(shape3)) for v in
                     ("value", "p_value", "null_median", "null_lo", "null_hi", "band_units")},
                    coords={"layer": [0], "component": ["q", "ffn_in"], "metric": list(METRICS)})
    ds["rows"] = (dims[:2], np.array([[384, 0]]))  # ffn_in missing
    ds["cols"] = (dims[:2], np.array([[384, 0]]))
    for k, v in (("xmin", 1.5), ("null_well_trained", 0.25)):
        ds[k] = (dims[:2], np.array([[v, np.nan]]))
    for k, v in (("folklore", "well trained"), ("storage", "float32"),
                 ("null_storage", "float32")):
        ds[k] = (dims[:2], np.array([[v, ""]]))
    return ds


def test_csv_has_a_row_per_present_matrix(tmp_path):
    ds = _ds()
    path = write_heavy_tail_csv(ds, tmp_path / "heavy_tail.csv")
    got = pd.read_csv(path)
    assert list(got["component"]) == ["q"]
    np.testing.assert_allclose(got["alpha"], ds["value"].sel(layer=0, component="q",
                                                             metric="alpha"), rtol=1e-5)
    assert {"alpha_p", "alpha_null_lo", "rand_distance_null_hi", "folklore"} <= set(got.columns)


def test_esd_figure_draws_the_fit_and_the_band():
    """The power-law line at xmin is share (α − 1)/xmin (rtol 1e-12)."""
    rng = np.random.default_rng(1)
    lam = rng.pareto(2.0, 500) + 1.0
    null = rng.exponential(2.0, (20, 500))
    ax = plot_esd(lam, alpha=3.0, xmin=2.0, null=null)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    line = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"][0]
    x, y = line.get_data()
    np.testing.assert_allclose(y[0], np.mean(lam >= 2.0) * 2.0 / 2.0, rtol=1e-12)
    assert len(ax.collections) == 1  # the band
    ax2 = plot_esd(lam, alpha=np.nan, xmin=2.0)
    assert not [ln for ln in ax2.get_lines() if ln.get_linestyle() == "--"]
