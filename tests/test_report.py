"""rmtbase.report (tables, figures) and rmtbase.files.output on a score built from synthetic values (no model,
no Monte Carlo): tables, figures against their references, all-or-nothing output folders."""

from __future__ import annotations

import json
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from scipy import integrate  # noqa: E402

from rmtbase.decision.verdict import score_values  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402
from rmtbase.report import (
    collection_figures,  # noqa: E402
    figures,  # noqa: E402
    write_report,  # noqa: E402
)
from rmtbase.report import tables as report  # noqa: E402

STATS = ["qk.npr", "qk.lambda_max", "q.std", "q.entropy", "qk.std", "qk.entropy",
         "qk.excess_kurtosis"]


def _ds(L=3, H=4, d=64, d_h=8):
    """A score of L×H heads with one planted anomaly at (layer 1, head 2) in qk.npr, shaped as
    scores written before head_effect existed (``distance``, ``head_effect`` and
    ``group_effect`` dropped; :func:`_with_effects` adds synthetic ones)."""
    rng = np.random.default_rng(0)
    n = 800
    null = {"q.rms": np.ones(n), "k.rms": np.ones(n)}
    centre = {"qk.npr": 0.8, "qk.lambda_max": 3000.0, "q.std": 1.0, "q.entropy": 1.4189,
              "qk.std": np.sqrt(d_h), "qk.entropy": 2.45, "qk.excess_kurtosis": 0.75}
    for s in STATS:
        null[s] = centre[s] + 0.01 * abs(centre[s]) * rng.standard_normal(n)
    sig = 0.02 * (1 + 0.1 * rng.uniform(size=(L, H)))
    values = {}
    for s in STATS:
        v = centre[s] + 0.01 * abs(centre[s]) * rng.standard_normal((L, H))
        p = {"q.std": 1, "q.entropy": 1, "qk.std": 2, "qk.entropy": 2, "qk.lambda_max": 4}.get(s, 0)
        values[s] = v * sig**p if s not in ("q.entropy", "qk.entropy") else v + p * np.log(sig)
    values["qk.npr"][1, 2] = 0.5  # the planted anomaly
    ds = score_values(values, sig, sig, null, alpha=0.05)
    ds = ds.drop_vars(["distance", "head_effect", "group_effect", "stat_group"], errors="ignore")
    ds["qk_spectrum"] = (("layer", "head", "rank"),
                         np.sort(rng.gamma(4, 0.25, size=(L, H, d_h)), axis=-1)[..., ::-1])
    ds["qk_spectrum"][1, 2, 0] = 120.0  # an outlier far right
    ds["null_spectrum"] = (("quantile", "rank"),
                           np.array([np.linspace(3, 0.1, d_h) * f for f in (0.7, 1, 1.4)]))
    ds["sigma_q"] = (("layer", "head"), sig)
    ds["sigma_k"] = (("layer", "head"), sig)
    ds = ds.assign_coords(quantile=[0.025, 0.5, 0.975])
    ds.attrs.update(model="toy", architecture="gpt2", d=d, d_h=d_h,
                    null="i.i.d. N(0, sigma^2) entries", storage_dtype="bfloat16",
                    storage_dtypes="bfloat16", quantisation="none", null_storage="bfloat16")
    return ds


def _with_effects(ds, n_spikes=True):
    """``ds`` with the per-head distance variables of the score contract:
    ``distance`` (layer, head, stat) signed, ``head_effect`` its largest |value| over the
    family, ``head_top_stat`` that statistic, ``n_spikes`` and ``spike_x``. Effects span
    1.2 … 900 null sd, distinct, in an order that is neither index order nor head-p order
    (the planted head (1, 2) comes second)."""
    ds = ds.copy()
    L, H = ds.sizes["layer"], ds.sizes["head"]
    rng = np.random.default_rng(7)
    fam = [str(s) for s in ds["stat"].values[ds["in_family"].values]]
    eff = np.geomspace(1.2, 900.0, L * H)[rng.permutation(L * H)].reshape(L, H)
    eff[2, 3], eff[1, 2] = 900.0, 600.0
    others = [v for v in np.unique(eff) if v not in (900.0, 600.0)]
    free = [(i, j) for i in range(L) for j in range(H) if (i, j) not in ((2, 3), (1, 2))]
    for (i, j), v in zip(free, others, strict=False):
        eff[i, j] = v
    dist = np.full((L, H, ds.sizes["stat"]), np.nan)
    top = np.empty((L, H), dtype=object)
    for i in range(L):
        for j in range(H):
            k = [str(s) for s in ds["stat"].values].index(fam[(i + j) % len(fam)])
            for m, s in enumerate(ds["stat"].values):
                if str(s) in fam:
                    dist[i, j, m] = rng.uniform(-1, 1) * eff[i, j] * 0.9
            dist[i, j, k] = -eff[i, j] if (i + j) % 2 else eff[i, j]
            top[i, j] = str(ds["stat"].values[k])
    ds["distance"] = (("layer", "head", "stat"), dist)
    ds["head_effect"] = (("layer", "head"), eff)
    ds["head_effect"].attrs["units"] = "null sd"
    ds["head_top_stat"] = (("layer", "head"), top.astype(str))
    if n_spikes:
        d_h = ds.sizes["rank"]
        ns = np.minimum((np.log10(eff) * 1.5).astype(np.int64), d_h)
        sx = np.full((L, H, d_h), np.nan)
        for i in range(L):
            for j in range(H):
                sx[i, j, : ns[i, j]] = np.sort(1.0 + rng.gamma(2, 0.5, ns[i, j]))[::-1]
        ds["n_spikes"] = (("layer", "head"), ns)
        ds["spike_x"] = (("layer", "head", "spike"), sx)
        ds = ds.assign_coords(spike=np.arange(1, d_h + 1))
    return ds


def test_tables_one_row_per_test_and_per_head():
    ds = _ds()
    df = report.long_table(ds)
    assert len(df) == 3 * 4 * len(STATS)
    row = df[(df["layer"] == 1) & (df["head"] == 2) & (df["stat"] == "qk.npr")].iloc[0]
    assert row.z < -20 and bool(row.flag) and row.sigma_q == ds.sigma_q.values[1, 2]
    heads = report.head_table(ds)
    assert len(heads) == 12 and {"head_p_value", "head_flag", "head_top_stat"} <= set(heads)


def test_ranking_and_summary_lead_with_the_anomaly():
    ds = _ds()
    assert report.head_ranking(ds)[0] == (1, 2)
    lines = report.anomaly_table(ds, n=3).splitlines()
    assert "1 of 12 heads differ from the null" in lines[0] and "bfloat16" in lines[0]
    assert lines[2].split()[:2] == ["1", "2"] and "qk.npr" in lines[2]
    assert len(lines) == 5
    text = report.summary_text(ds)
    for needle in ("Null: i.i.d. N(0, sigma^2)", "Storage of W_Q/W_K", "bfloat16",
                   "Cauchy combination", "Counted once", "spectrum:", "entry law:"):
        assert needle in text, needle


def test_ranking_is_by_evidence_and_ignores_head_effect():
    """The ranking is the decision's evidence (head p, ties in index order) whatever
    head_effect says (head_effect was qk.kl_gaussian's narrow null in disguise): a
    score with synthetic head_effect ranks exactly as without; (2, 3), whose head_effect is
    the largest (900), is not first; the table shows no head_effect column and the note says
    it ranks nothing."""
    base = _ds()
    ds = _with_effects(base)
    ranking = report.head_ranking(ds)
    assert ranking == report.head_ranking(base) and ranking[0] == (1, 2)
    p = ds["head_p_value"].values
    got = [p[li, hi] for li, hi in ranking]
    assert got == sorted(got)
    assert ranking[0] != (2, 3) and float(ds["head_effect"].values[2, 3]) == 900.0
    lines = report.anomaly_table(ds, n=4).splitlines()
    assert "effect" not in lines[1] and lines[2].split()[:2] == ["1", "2"]
    assert "ranks nothing" in report.summary_text(ds)
    tied = base.copy()
    tied["head_p_value"] = xr.full_like(base["head_p_value"], 1e-16)
    assert report.head_ranking(tied) == [(i, j) for i in range(3) for j in range(4)]


def test_csv_columns_and_rank_follow_the_score():
    """heads.csv has a rank column (1 = first of head_ranking, the order of evidence) and
    head_effect, n_spikes where scored; scores.csv carries distance. Old scores keep the old
    columns."""
    base = _ds()
    for ds in (base, _with_effects(base)):
        heads = report.head_table(ds)
        ranking = report.head_ranking(ds)
        first = heads[heads["rank"] == 1].iloc[0]
        assert (first["layer"], first["head"]) == ranking[0] == (1, 2)
        assert sorted(heads["rank"]) == list(range(1, 13))
        new = "head_effect" in ds
        assert ({"head_effect", "n_spikes"} <= set(heads)) == new
        assert ("distance" in set(report.long_table(ds))) == new
    ds = _with_effects(base)
    heads = report.head_table(ds).set_index(["layer", "head"])
    assert heads.loc[(2, 3), "head_effect"] == 900.0
    long = report.long_table(ds).set_index(["layer", "head", "stat"])
    top = str(ds["head_top_stat"].values[1, 2])
    assert long.loc[(1, 2, top), "distance"] == float(ds["distance"].sel(layer=1, head=2,
                                                                         stat=top))


def test_effect_heatmaps_share_fixed_limits_and_mark_flags():
    ds = _ds()
    fig, ax = plt.subplots()
    assert figures.plot_effect_heatmap(ds, "qk.npr", ax=ax) is ax
    assert ax.images[0].get_clim() == (-figures.EFFECT_LIM, figures.EFFECT_LIM)
    assert ax.images[0].get_cmap().name.startswith("RdBu")
    # exact: integers / booleans (marker positions)
    np.testing.assert_array_equal(np.asarray(ax.collections[0].get_offsets()), [[2, 1]])
    ax2 = figures.plot_effect_heatmap(ds, "q.std")
    assert ax2.images[0].get_clim() == ax.images[0].get_clim()
    ax3 = figures.plot_verdict(ds)
    assert ax3.images[0].get_clim() == (0, figures.VERDICT_LIM)
    # exact: integers / booleans (marker positions)
    np.testing.assert_array_equal(np.asarray(ax3.collections[0].get_offsets()), [[2, 1]])
    plt.close("all")
    with pytest.raises(InputError):
        figures.plot_effect_heatmap(ds, "qk.nope")


def test_verdict_colours_the_evidence_on_a_fixed_scale():
    """The verdict heatmap: −log₁₀ head p on the fixed [0, VERDICT_LIM] whether or not the
    score has head_effect (never null sd); spike counts written in the cells of a small grid;
    flagged heads boxed; the title names the model in full on its own line; big grids get no
    text; a collection's grid shares the scale."""
    from rmtbase.scoring.collection.combine import combine

    ds = _with_effects(_ds())
    ax = figures.plot_verdict(ds)
    im = ax.images[0]
    want = -np.log10(np.clip(ds["head_p_value"].values, 10.0**-figures.VERDICT_LIM, 1))
    np.testing.assert_allclose(im.get_array().data, want)
    assert (im.norm.vmin, im.norm.vmax) == (0.0, figures.VERDICT_LIM)
    texts = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text()
             for t in ax.texts}
    assert len(texts) == 12 and texts[(2, 1)] == str(int(ds["n_spikes"].values[1, 2]))
    # exact: integers / booleans (marker positions)
    np.testing.assert_array_equal(np.asarray(ax.collections[0].get_offsets()), [[2, 1]])
    assert ax.get_title().splitlines()[0] == "toy"
    assert "head p" in ax.figure.axes[-1].get_ylabel()
    plt.close("all")
    ax = figures.plot_verdict(_with_effects(_ds(), n_spikes=False))
    assert len(ax.texts) == 0 and ax.images[0].norm.vmax == figures.VERDICT_LIM
    big = _with_effects(_ds(L=21, H=20, d_h=8))
    assert len(figures.plot_verdict(big).texts) == 0
    plt.close("all")
    fig = collection_figures.verdict_grid(combine([ds, ds], ["a", "b"], "model"))
    panels = [a for a in fig.axes if a.images]
    assert len(panels) == 2 and all(a.images[0].norm.vmax == figures.VERDICT_LIM
                                    for a in panels)
    assert not any("null sd" in a.get_ylabel() for a in fig.axes)


def _effects(layers: int, heads: int, stats: int, seed: int) -> xr.Dataset:
    """Normal effects over layer × head × ``qk.s<i>``, nothing flagged."""
    shape = (layers, heads, stats)
    return xr.Dataset({"effect": (("layer", "head", "stat"),
                                  np.random.default_rng(seed).normal(size=shape)),
                       "flag": (("layer", "head", "stat"), np.zeros(shape, bool))},
                      coords={"layer": np.arange(layers), "head": np.arange(heads),
                              "stat": [f"qk.s{i}" for i in range(stats)]},
                      attrs={"model": "m"})


def test_effect_overview_stays_legible_for_a_30_layer_model():
    """30 layers × 32 heads, 8 panels: the figure stays under 1800 px a side at 100 dpi."""
    ds = _effects(30, 32, 8, seed=1)
    fig = figures.effect_overview(ds, [f"qk.s{i}" for i in range(8)], "test")
    w, h = fig.get_size_inches() * 100
    assert w < 1800 and h < 1800, (w, h)


def test_effect_overview_labels_the_shared_grid_on_its_outer_panels_only():
    """5 panels in 4 columns: layer ticks and label on the first column; head ticks and label
    on the lowest panel of each column (row 0's columns 1–3 have none below them)."""
    fig = figures.effect_overview(_effects(3, 4, 5, seed=2), [f"qk.s{i}" for i in range(5)],
                                  "test")
    fig.canvas.draw()
    panels = [a for a in fig.axes if a.images][:5]

    def shown(labels):
        return any(t.get_visible() and t.get_text() for t in labels)
    assert [shown(a.get_yticklabels()) for a in panels] == [True, False, False, False, True]
    assert [a.get_ylabel() for a in panels] == ["layer", "", "", "", "layer"]
    assert [shown(a.get_xticklabels()) for a in panels] == [False, True, True, True, True]
    assert [a.get_xlabel() for a in panels] == ["", "head", "head", "head", "head"]


def test_entropy_figure_draws_the_excess_over_gaussian_with_true_references():
    """ΔS = entropy − ½ ln(2π e σ²): each head's dot is its entropy less the Gaussian entropy
    at its std (−∫ φ ln φ by quadrature); the Gaussian reference is ΔS = 0; the W_QK panel's
    variance-gamma curve is rmtbase.analytic.variance_gamma.entropy at that std less the
    Gaussian; the null bars sit at x = σ_Q (W_Q) and √d_h σ_Q σ_K (W_QK), centred on the null
    mean less the Gaussian entropy there. Log ticks carry no minor labels."""
    from rmtbase.analytic import variance_gamma as vg

    def quad_entropy(s):
        phi = lambda x: np.exp(-x * x / (2 * s * s)) / np.sqrt(2 * np.pi * s * s)  # noqa: E731
        return integrate.quad(lambda x: -phi(x) * np.log(phi(x)), -12 * s, 12 * s)[0]

    ds = _ds()
    d_h = ds.attrs["d_h"]
    for matrix in ("q", "qk"):
        ax = figures.plot_entropy_sigma(ds, matrix)
        ref = [ln for ln in ax.lines if "Gaussian" in str(ln.get_label())][0]
        # exact: a plotted constant 0.0
        np.testing.assert_array_equal(ref.get_ydata(), 0.0)
        dots = [c for c in ax.collections if c.get_label() in ("heads", "entropy flagged (BH)")]
        xy = np.concatenate([np.asarray(c.get_offsets()) for c in dots])
        sig = ds["value"].sel(stat=f"{matrix}.std").values.ravel()
        ent = ds["value"].sel(stat=f"{matrix}.entropy").values.ravel()
        for x, y in xy[[0, -1]]:
            i = int(np.argmin(np.abs(sig - x)))
            assert y == pytest.approx(ent[i] - quad_entropy(x), rel=1e-7, abs=1e-9)
        bars = [c for c in ax.containers][0]
        x_bar = bars.lines[0].get_xdata()
        sq, sk = ds.sigma_q.values.ravel(), ds.sigma_k.values.ravel()
        want = sq if matrix == "q" else np.sqrt(d_h) * sq * sk
        np.testing.assert_allclose(x_bar, want, rtol=1e-12)
        m = ds["null_mean"].sel(stat=f"{matrix}.entropy").values.ravel()
        y_bar = bars.lines[0].get_ydata()
        assert y_bar[0] == pytest.approx(m[0] - quad_entropy(want[0]), rel=1e-7, abs=1e-9)
        if matrix == "qk":
            vgl = [ln for ln in ax.lines if "variance-gamma" in str(ln.get_label())][0]
            x0, y0 = vgl.get_xdata()[10], vgl.get_ydata()[10]
            want_vg = vg.entropy(d_h, x0 / np.sqrt(d_h)) - quad_entropy(x0)
            assert y0 == pytest.approx(want_vg, rel=1e-7, abs=1e-9)
        ax.figure.canvas.draw()
        assert all(t.get_text() == "" for t in ax.xaxis.get_minorticklabels())
        plt.close("all")


def test_spectrum_plots_use_log_x_and_name_the_head():
    ds = _ds()
    ax = figures.plot_spectrum(ds, 1, 2, why="most anomalous #1")
    line = [ln for ln in ax.lines if "head 2" in str(ln.get_label())][0]
    np.testing.assert_allclose(line.get_ydata(), ds.qk_spectrum.sel(layer=1, head=2).values)
    assert ax.get_yscale() == "log" and "toy" in ax.get_title() and "anomalous" in ax.get_title()
    ax.figure.canvas.draw()
    assert all(t.get_text() == "" for t in ax.yaxis.get_minorticklabels())
    labels = [t.get_text() for t in ax.yaxis.get_majorticklabels() if t.get_text()]
    assert labels and all("$" not in t for t in labels)  # plain numbers, not 2×10⁻¹
    plt.close("all")
    ax = figures.plot_spectrum_density(ds, 1, 2)
    assert ax.get_xscale() == "log"
    heights = np.array([p.get_height() for p in ax.patches])
    widths = np.array([p.get_width() for p in ax.patches])
    assert np.sum(heights * widths) == pytest.approx(1.0)
    assert max(p.get_x() + p.get_width() for p in ax.patches) > 120  # the outlier is shown
    plt.close("all")


def test_write_report_files_manifest_and_roundtrip(tmp_path):
    ds = _ds()
    written = write_report(ds, tmp_path / "out", n_spectra=1)
    out = tmp_path / "out"
    for name in ("scores.nc", "scores.csv", "heads.csv", "summary.txt", "manifest.json"):
        assert (out / name).is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert set(manifest["files"]) | {"manifest.json"} == on_disk == set(written)
    back = xr.open_dataset(out / "scores.nc")
    try:
        assert back["flag"].dtype == bool and back["head_flag"].dtype == bool
        # exact: a file round trip of these arrays (lossless), or one read of one file
        xr.testing.assert_equal(back[["z", "flag", "value", "head_p_value"]].load(),
                                ds[["z", "flag", "value", "head_p_value"]])
        for v in ("z", "flag", "value", "head_p_value"):  # CF attributes added on top
            assert back[v].attrs.items() >= ds[v].attrs.items() - {("units", None)}
        assert back.attrs["Conventions"] == "CF-1.10"
    finally:
        back.close()
    df = pd.read_csv(out / "scores.csv")
    assert len(df) == 84 and {"layer", "head", "stat", "z", "effect", "p_value"} <= set(df)
    pngs = {p.name for p in (out / "figures").glob("*.png")}
    assert {"verdict.png", "effect_spectrum.png", "effect_product_law.png",
            "entropy_sigma.png", "spectrum_L1_H2.png"} <= pngs
    for p in (out / "figures").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    no_fig = write_report(ds, tmp_path / "nofig", figures=False)
    assert not (tmp_path / "nofig" / "figures").exists() and len(no_fig) == 6  # + report.html


@pytest.mark.parametrize("n_spikes", [True, False])
def test_reports_with_the_distance_variables_single_and_collection(tmp_path, n_spikes):
    """A score with head_effect (with and without n_spikes) writes every figure; summary.txt,
    heads.csv and report.html's embedded rank follow the evidence (head p: (1, 2) first), not
    head_effect, and report.html embeds no head_effect; a collection of such scores lists each
    entry's heads the same way and carries the columns in heads.csv."""
    import re

    from rmtbase.scoring.collection.combine import combine

    ds = _with_effects(_ds(), n_spikes=n_spikes)
    out = tmp_path / "one"
    write_report(ds, out, n_spectra=1)
    assert {"verdict.png", "entropy_sigma.png", "spectrum_L1_H2.png"} <= \
        {p.name for p in (out / "figures").glob("*.png")}
    summary = (out / "summary.txt").read_text()
    assert summary.splitlines()[2].split()[:2] == ["1", "2"]
    heads = pd.read_csv(out / "heads.csv")
    assert ("n_spikes" in heads) == n_spikes and "head_effect" in heads
    assert tuple(heads.loc[heads["rank"] == 1, ["layer", "head"]].iloc[0]) == (1, 2)
    page = (out / "report.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="rmtbase-data">(.*?)</script>', page, re.S).group(1))
    h = data["entries"][0]["head"]
    assert h["rank"][1 * 4 + 2] == 1 and "eff" not in h
    assert ("ns" in h) == n_spikes and ("sx" in h) == n_spikes
    if n_spikes:
        assert len(h["sx"][2 * 4 + 3]) == int(ds["n_spikes"].values[2, 3])
    coll = combine([ds, ds], ["a", "b"], "model")
    write_report(coll, tmp_path / "coll", figures=False)  # verdict_grid: tested above
    text = (tmp_path / "coll" / "summary.txt").read_text()
    for block in text.split("== ")[1:]:
        assert block.splitlines()[3].split()[:2] == ["1", "2"], block
    cheads = pd.read_csv(tmp_path / "coll" / "heads.csv")
    assert "head_effect" in cheads and ("n_spikes" in cheads) == n_spikes


def test_rerun_replaces_the_whole_folder_and_failures_leave_it_intact(tmp_path, monkeypatch):
    ds = _ds()
    out = tmp_path / "out"
    write_report(ds, out, n_spectra=3)
    first = sorted(p.name for p in (out / "figures").iterdir())
    write_report(ds, out, n_spectra=0)  # fewer spectrum figures: stale ones must go
    second = sorted(p.name for p in (out / "figures").iterdir())
    assert len(second) < len(first) and set(second) < set(first)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(figures, "plot_entropy_sigma", boom)
    with pytest.raises(OSError):
        write_report(ds, out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left


def test_output_folder_refusals_and_stale_temporaries(tmp_path):
    from rmtbase.files.output import check_output_dir

    (tmp_path / "file").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "thesis.tex").write_text("precious")
    for bad in ("file", "other", "x" * 250):
        with pytest.raises(InputError):
            check_output_dir(tmp_path / bad, "rmtbase score")
    assert check_output_dir(tmp_path / "new" / "deeper", "rmtbase score").name == "deeper"
    dead = tmp_path / ".out.tmp-999999999-abcd1234"
    dead.mkdir()
    write_report(_ds(), tmp_path / "out", figures=False)
    assert not dead.exists()
    if os.geteuid() != 0:  # root can write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(InputError):
            check_output_dir(ro / "out", "rmtbase score")
