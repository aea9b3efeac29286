"""report.html: self-contained, small, its data faithful to the Dataset, and working in a real
headless browser (Debian's Chromium; skipped with the reason where it is not installed)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import xarray as xr
from _browser import CHROMIUM, SKIP_REASON, run_page
from _checkpoints import gpt2, trajectory

from rmtbase.report import write_report
from rmtbase.report.compare import write_compare
from rmtbase.report.html_data import _TEST_VARS
from rmtbase.scoring.collection.trajectory import score_collection
from rmtbase.scoring.score import score_model

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


@pytest.fixture(scope="module")
def report12(tmp_path_factory, cache):
    """A random-init GPT-2 with 12 layers × 12 heads (d = 96, d_h = 8), all statistics,
    written by write_report."""
    root = tmp_path_factory.mktemp("html")
    folder = gpt2(root / "model", seed=5, n_layer=12, n_embd=96, n_head=12)
    ds = score_model(str(folder), draws=300, max_draws=2000, progress=False)
    out = root / "out"
    write_report(ds, out)
    return ds, out


def _data(page) -> dict:
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="rmtbase-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def js_num(x: float) -> str:
    """JavaScript String(+x.toPrecision(4)) for 1e-3 <= |x| < 1e5 (the page's number format)."""
    s = repr(float(f"{float(f'{x:.4g}'):.4g}"))
    return s[:-2] if s.endswith(".0") else s


def js_p(p: float) -> str:
    """The page's p-value format (fmtP)."""
    p = float(f"{p:.4g}")
    if p <= 1e-16:
        return "<1e-16"
    if p < 1e-3:
        m, e = f"{p:.1e}".split("e")
        return f"{m}e{int(e)}"
    s = repr(float(f"{p:.2g}"))
    return s[:-2] if s.endswith(".0") else s


def test_report_html_is_self_contained_and_small(report12):
    ds, out = report12
    page = out / "report.html"
    text = page.read_text(encoding="utf-8")
    assert page.stat().st_size < 1_000_000, page.stat().st_size  # 12 × 12 heads, PNGs included
    assert "report.html" in json.loads((out / "manifest.json").read_text())["files"]
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text)
    for needle in ("fetch(", "XMLHttpRequest", "@import", "import(", "<link"):
        assert needle not in text, needle
    assert text.count("data:image/png;base64,") == 2   # the profile, entropy_sigma
    # every other figure is linked, relative to the page, and exists there
    links = re.findall(r'<a href="(figures/[^"]+)">', text)
    assert "figures/effect_spectrum.png" in links
    assert sorted(links) == sorted(f"figures/{p.name}" for p in (out / "figures").iterdir()
                                   if p.name not in ("verdict.png", "entropy_sigma.png"))
    data = _data(page)
    (e,) = data["entries"]
    assert len(e["L"]) == 12 and len(e["H"]) == 12 and e["detail"]
    assert e["stats"] == [str(s) for s in ds["stat"].values]


def test_a_local_folder_is_named_by_its_folder_name_only(report12, cache):
    """No local absolute path reaches a reader: the model is its folder name in the Dataset's
    attrs (and scores.nc), summary.txt, report.html and heads.csv."""
    ds, out = report12
    root = str(out.parent)
    assert ds.attrs["model"] == "model" and ds.attrs["model_path"] == "model"
    texts = {name: (out / name).read_text(encoding="utf-8")
             for name in ("summary.txt", "report.html", "heads.csv")}
    with xr.open_dataset(out / "scores.nc") as back:
        texts["scores.nc attrs"] = json.dumps({k: str(v) for k, v in back.attrs.items()})
    for name, text in texts.items():
        for path in (root, str(cache)):
            assert path not in text, (name, path)
    assert texts["summary.txt"].startswith("model  (gpt2;")
    assert "<title>rmtbase score: model</title>" in texts["report.html"]


def test_embedded_data_follow_the_dataset(report12):
    ds, out = report12
    e = _data(out / "report.html")["entries"][0]
    n_s, n_h = len(e["stats"]), len(e["H"])
    for li, hi, j in ((0, 0, 0), (3, 7, 5), (11, 11, n_s - 1)):
        k = li * n_h + hi
        for key, var in (("v", "value"), ("m", "null_mean"), ("p", "p_value")):
            want = float(ds[var].values[li, hi, j])
            # rounded to the key's significant digits: relative error ≤ ½·10^(1 − digits)
            rel = 0.5 * 10.0 ** (1 - _TEST_VARS[key][1]) * (1 + 1e-9)
            assert e[key][k * n_s + j] == pytest.approx(want, rel=rel, abs=1e-12), (key, li, hi)
        assert e["head"]["p"][k] == pytest.approx(float(ds["head_p_value"][li, hi]), rel=1e-3)
    assert len(e["pm"]) == 12 * 12 * n_s and set(e["pm"]) <= set("egf-")
    hist = np.array(e["hist"]).reshape(12, 12, -1)
    np.testing.assert_allclose(hist.sum(-1) * 0.25, 1.0, atol=1e-3)  # nothing beyond ±8
    np.testing.assert_allclose(np.array(e["spec"]).reshape(12, 12, -1),
                               ds["qk_spectrum"].values, rtol=1e-3)


def test_qk_histogram_comes_from_the_same_product_and_follows_variance_gamma():
    """W_QK's element statistics are the null's implementation (to float32 rounding), and the
    histogram of null heads (z = entry/(√d_h σ_Q σ_K)) follows the unit-variance
    variance-gamma density (Gaunt 2014), not only the Gaussian."""
    import jax.numpy as jnp

    from rmtbase.analytic import variance_gamma as vg
    from rmtbase.scoring.measures.layer_stats import layer_stats as _layer_stats
    from rmtbase.scoring.measures.qk_histogram import QK_HIST_EDGES
    from rmtbase.stats import _qk_element_stats

    rng = np.random.default_rng(11)
    d_h, d, n = 2, 48, 60  # small d_h: the variance-gamma law is far from Gaussian
    wq = (0.02 * rng.standard_normal((n, d_h, d))).astype(np.float32)
    wk = (0.05 * rng.standard_normal((n, d_h, d))).astype(np.float32)
    st, _, hist = _layer_stats(wq, wk, "all")
    ref = _qk_element_stats(jnp.asarray(wq), jnp.asarray(wk), 0.8)
    # Not exact: layer_stats' compiled program holds _qk_element_stats among other
    # statistics, the reference is that function compiled alone; their float32 sums over
    # the d² = 2,304 entries may round differently. 64 ulps of each statistic's largest
    # value (excess kurtosis ~3 at d_h = 2: its scale, not 0's).
    for name, v in ref.items():
        v = np.asarray(v, dtype=np.float64)
        np.testing.assert_allclose(st[f"qk.{name}"], v, rtol=0, err_msg=name,
                                   atol=64 * np.finfo(np.float32).eps * np.abs(v).max())
    w = QK_HIST_EDGES[1] - QK_HIST_EDGES[0]
    mean = hist.mean(0)
    cdf = vg.cdf(QK_HIST_EDGES, d_h, 1 / np.sqrt(d_h))
    want = np.diff(cdf) / w
    gauss = np.exp(-0.5 * (0.5 * (QK_HIST_EDGES[1:] + QK_HIST_EDGES[:-1])) ** 2) / np.sqrt(2 * np.pi)
    core = np.abs(0.5 * (QK_HIST_EDGES[1:] + QK_HIST_EDGES[:-1])) < 3
    err_vg = np.abs(mean - want)[core].max()
    err_g = np.abs(mean - gauss)[core].max()
    assert err_vg < 0.03 and err_g > 3 * err_vg, (err_vg, err_g)


@needs_chromium
def test_headless_chromium_loads_without_errors_and_drills_down(report12, tmp_path):
    ds, out = report12
    li, hi = 3, 7
    actions = f"""
    var c = document.querySelector('#heatmap rect[data-l="{li}"][data-h="{hi}"]');
    c.dispatchEvent(new MouseEvent('click', {{bubbles: true}}));
    r.title = document.getElementById('detail-title').textContent;
    r.detail = document.getElementById('detail').innerText;
    r.svgs = document.querySelectorAll('#detail svg.plot').length;
    r.stathead = Array.prototype.map.call(
      document.querySelector('#detail table.stats').tHead.rows[0].cells,
      function (th) {{ return th.textContent; }});
    r.fold = document.querySelector('#detail details.diag').textContent;
    r.fold_open = document.querySelector('#detail details.diag').open;
    var th = document.querySelectorAll('#toptable thead th')[2]; th.click();
    r.sorted = Array.prototype.map.call(document.querySelectorAll('#toptable tbody tr'),
      function (tr) {{ return +tr.cells[2].getAttribute('data-v'); }});
    r.cells = document.querySelectorAll('#heatmap rect.cell').length;
    """
    r, console = run_page(out / "report.html", actions, tmp_path)
    assert r["errors"] == [] and console == [], (r["errors"], console)
    assert r["cells"] == 144 and r["title"] == f"layer {li}, head {hi}"
    h = ds.isel(layer=li, head=hi)
    assert f"head p = {js_p(float(h['head_p_value']))}" in r["detail"]
    for stat in ("qk.npr", "qk.spectral_entropy"):
        row = next(line for line in r["detail"].splitlines() if line.startswith(stat + "\t"))
        assert js_num(float(h["value"].sel(stat=stat))) in row.split("\t")[2], row
        assert js_num(float(h["null_mean"].sel(stat=stat))) in row.split("\t")[3], row
    assert r["svgs"] == 3  # spectrum vs band, density vs MP⊠MP, W_QK histogram vs references
    # one measure of how far in the main table: the effect in the statistic's own units with
    # the null's 95 % band; z, distance and the capped effect only in the closed fold
    assert r["stathead"] == ["statistic", "group", "value", "null mean", "effect", "null 95 %",
                             "p", "q"], r["stathead"]
    assert not r["fold_open"] and "z" in r["fold"] and "distance" not in r["stathead"]
    for stat in ("qk.npr", "qk.spectral_entropy"):
        row = next(line for line in r["detail"].splitlines() if line.startswith(stat + "\t"))
        size = float(h["effect_size"].sel(stat=stat))
        kind = str(ds["effect_kind"].sel(stat=stat).values)
        want = js_num(float(f"{size:.3g}"))
        want = want + "×" if kind == "ratio" else ("+" if size >= 0 else "") + want
        assert row.split("\t")[4] == want, (row, want)
    # qk.pr duplicates qk.npr: greyed, q = nan, and the line under the table says why
    assert "Grey rows (q = nan) are outside the decision" in r["detail"]
    assert r["sorted"] == sorted(r["sorted"]) and len(r["sorted"]) >= 25


def _with_contract(ds: xr.Dataset) -> xr.Dataset:
    """Stand-ins for the per-head distance variables of the score contract, from the
    real score: ``distance`` = z on the family, ``head_effect`` its largest |value| (made
    distinct), ``head_top_stat`` that statistic, ``n_spikes`` = leading ranks above the null
    band's top and ``spike_x`` those eigenvalues over the band's top at rank 1."""
    ds = ds.copy()
    z = ds["z"].where(ds["in_family"])
    L, H = ds.sizes["layer"], ds.sizes["head"]
    ds["distance"] = z
    ds["head_effect"] = np.abs(z).max("stat") + 1e-6 * np.arange(L * H).reshape(L, H)
    best = np.abs(z).fillna(-1).argmax("stat").values
    ds["head_top_stat"] = (("layer", "head"), ds["stat"].values[best].astype(str))
    x, top = ds["qk_spectrum"].values, ds["null_spectrum"].isel(quantile=-1).values
    above = np.cumprod(x > top, axis=-1).sum(-1)
    above[0, 0], above[0, 1] = 2, 0  # at least one head with spikes
    ds["n_spikes"] = (("layer", "head"), above.astype(np.int64))
    ds["spike_x"] = (("layer", "head", "spike"),
                     np.where(np.arange(x.shape[-1]) < above[..., None], x / top[0] + 1, np.nan))
    return ds.assign_coords(spike=np.arange(1, x.shape[-1] + 1))


@needs_chromium
@pytest.mark.parametrize("width", [1400, 1920])
def test_head_table_shows_the_profile_spikes_and_keeps_p_in_view(report12, tmp_path, width):
    """With the contract's variables the head table follows head_ranking (evidence), shows the
    outlier count and one column per profile axis (value and effect, no head effect); the
    drill-down shows the profile and names the outliers and their positions; at 1400 and 1920 px
    the statistics table's p and q columns are inside the visible page, not behind a
    sideways scroll."""
    ds = _with_contract(report12[0])
    out = tmp_path / "out"
    write_report(ds, out, figures=False)
    actions = """
    window.rmtbaseReport.pin(0, 0);
    r.head = Array.prototype.map.call(document.querySelectorAll('#toptable thead th'),
      function (th) { return th.textContent; });
    r.first = Array.prototype.map.call(document.querySelectorAll('#toptable tbody tr')[0].cells,
      function (td) { return td.textContent; });
    r.order = Array.prototype.map.call(document.querySelectorAll('#toptable tbody tr'),
      function (tr) { return [+tr.getAttribute('data-l'), +tr.getAttribute('data-h')]; });
    r.detail = document.getElementById('detail').innerText;
    var ths = document.querySelector('#detail table.stats').tHead.rows[0].cells;
    var wrap = document.querySelector('#detail .tablewrap');
    r.p_right = ths[ths.length - 2].getBoundingClientRect().right;
    r.q_right = ths[ths.length - 1].getBoundingClientRect().right;
    r.wrap_right = wrap.getBoundingClientRect().right;
    r.wrap_scroll = wrap.scrollWidth - wrap.clientWidth;
    r.page_scroll = document.documentElement.scrollWidth - window.innerWidth;
    r.inner = window.innerWidth;
    r.texts = document.querySelectorAll('#heatmap text.ns').length;
    """
    r, console = run_page(out / "report.html", actions, tmp_path, window=(width, 1000))
    assert r["errors"] == [] and console == [], (r["errors"], console)
    assert r["inner"] == width
    axes = [str(a).replace("_", " ") for a in ds["axis"].values]
    assert r["head"] == ["rank", "layer", "head", "kind", "departure", "outliers", "head p",
                         "head q", "flagged", *axes], r["head"]
    from rmtbase.report.tables import head_ranking

    want = head_ranking(ds)
    assert [tuple(x) for x in r["order"]] == want[: len(r["order"])]
    li, hi = want[0]
    assert r["first"][1:3] == [str(li), str(hi)]
    assert r["first"][r["head"].index("outliers")] == str(int(ds["n_spikes"][li, hi]))
    col = r["head"].index("concentration")
    eff = float(ds["profile_effect"].sel(layer=li, head=hi, axis="concentration"))
    assert js_num(float(f"{eff:.3g}")) + "×" in r["first"][col], r["first"]
    assert "head effect" not in r["detail"] and "profile" in r["detail"]
    assert "2 outliers" in r["detail"] and "× the edge" in r["detail"]
    sx = ds["spike_x"].values[0, 0, :2]
    assert all(js_num(float(f"{v:.3g}")) in r["detail"] for v in sx), r["detail"][:400]
    assert r["texts"] == 144
    assert r["wrap_scroll"] <= 0 and r["page_scroll"] <= 0, r
    assert r["q_right"] <= min(r["wrap_right"], width) + 0.5, r


@needs_chromium
@pytest.mark.slow
def test_collection_and_compare_pages_in_chromium(tmp_path, cache):
    steps = trajectory(tmp_path / "ckpt", strengths=(0.0, 3.0))
    ds = score_collection([str(p) for p in steps], stats="spectral", draws=300, max_draws=2000,
                          progress=False)
    write_report(ds, tmp_path / "traj", figures=False)
    actions = """
    var s = document.getElementById('entry-select'); s.value = '1';
    s.dispatchEvent(new Event('change'));
    document.querySelector('#heatmap rect[data-l="1"][data-h="2"]')
      .dispatchEvent(new MouseEvent('click', {bubbles: true}));
    r.detail = document.getElementById('detail').innerText;
    r.options = s.options.length;
    """
    r, console = run_page(tmp_path / "traj" / "report.html", actions, tmp_path)
    assert r["errors"] == [] and console == [], (r["errors"], console)
    assert r["options"] == 2 and "layer 1, head 2" in r["detail"]
    p = float(ds["head_p_value"].sel(checkpoint="step1").values[1, 2])
    assert f"head p = {js_p(p)}" in r["detail"]
    assert "No W_QK histogram" in r["detail"]  # spectral statistics only: said, not drawn
    write_compare([tmp_path / "traj"], tmp_path / "cmp", figures=False)
    r, console = run_page(tmp_path / "cmp" / "report.html",
                          "r.rows = document.querySelectorAll('table.sortable tbody tr').length;"
                          "r.over = document.documentElement.scrollWidth - window.innerWidth;"
                          "var t = document.querySelector('table.sortable');"
                          "r.right = t.parentNode.getBoundingClientRect().right;",
                          tmp_path, window=(1400, 900))
    assert r["errors"] == [] and console == [] and r["rows"] == 2, (r, console)
    assert r["over"] <= 0 and r["right"] <= 1400, r  # the table does not widen the page
    with xr.open_dataset(tmp_path / "traj" / "scores.nc") as back:
        assert back.sizes["checkpoint"] == 2
