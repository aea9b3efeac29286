"""Whole-matrix trajectories: ``rmtbase score ckpts/step* --components ...``
writes one collection — ``components.nc`` with the leading ``checkpoint`` dimension, each entry
exactly ``score_components`` of its folder alone, ``components.csv`` per entry, the
k-versus-step figure — and entries of different shapes are padded. Null tables go to a
temporary RMTBASE_CACHE."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from _checkpoints import L, gpt2, trajectory

from rmtbase.cli import main
from rmtbase.errors import InputError
from rmtbase.scoring.collection.combine import combine_components, entries, entry
from rmtbase.scoring.collection.trajectory import score_component_collection
from rmtbase.scoring.matrices.components import score_components
from rmtbase.stats.matrix import MATRIX_STATS

DRAWS = 50


@pytest.fixture(scope="module")
def steps(tmp_path_factory, module_cache):
    return trajectory(tmp_path_factory.mktemp("ctraj"), strengths=(0.0, 1.5, 3.0))


def _same_score(a: xr.Dataset, b: xr.Dataset) -> None:
    """Identical variables, coordinates and attributes (``created`` aside)."""
    # exact: the same call twice in one process: same compiled programs, same inputs
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())
    keep = {k: str(v) for k, v in a.attrs.items() if k != "created"}
    assert keep == {k: str(v) for k, v in b.attrs.items() if k != "created"}


@pytest.mark.slow
def test_cli_components_over_checkpoints_writes_one_collection(steps, tmp_path, capsys):
    out = tmp_path / "out"
    root = steps[0].parent
    assert main(["score", str(root / "step*"), "--components", "q,k", "--component-draws",
                 str(DRAWS), "--stats", "spectral", "--draws", str(DRAWS), "--quiet", "--out",
                 str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 checkpoints; median Weibull k" in text and "matrices differ from the null" in text
    with xr.open_dataset(out / "components.nc") as ds:
        ds = ds.load()
    assert ds["value"].dims == ("checkpoint", "layer", "component", "stat")
    assert list(ds["checkpoint"].values) == ["step0", "step1", "step2"]
    assert ds["step"].values.tolist() == [0, 1, 2]
    assert ds.sizes == {"checkpoint": 3, "layer": L, "component": 2, "stat": len(MATRIX_STATS)}
    assert ds.attrs["collection"] == "checkpoint" and ds.attrs["weibull_k0"] > 1.2
    with xr.open_dataset(out / "scores.nc") as heads:
        assert list(heads["checkpoint"].values) == list(ds["checkpoint"].values)
    for (label, e), folder in zip(entries(ds), steps, strict=True):
        alone = score_components(str(folder), components=("q", "k"), draws=DRAWS,
                                 progress=False)
        assert label == folder.name
        # exact: the same call twice in one process: same compiled programs, same inputs
        xr.testing.assert_equal(e.drop_attrs(), alone.drop_attrs())
        assert e.attrs["model"] == alone.attrs["model"] == folder.name
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    for name in ("components.nc", "components.csv", "figures/components_k_trajectory.png",
                 "scores.nc", "figures/trajectory_npr.png"):
        assert name in manifest, name
        assert (out / name).stat().st_size > 0
    csv = (out / "components.csv").read_text().splitlines()
    assert len(csv) == 1 + 3 * L * 2 * len(MATRIX_STATS)
    assert csv[0].startswith("checkpoint,layer,component,stat,") and ",step," in csv[0]
    summary = (out / "summary.txt").read_text()
    assert "Whole matrices" in summary and summary.count("matrices differ from the null") == 3
    assert "across training, per component" in (out / "report.html").read_text()


def test_collection_entries_are_score_components_exactly(steps):
    """Through the Python API, attributes included (``created`` aside); the entries come
    ordered by step whatever the order given."""
    folders = [str(f) for f in steps]
    ds = score_component_collection(folders[::-1], components=("q", "k"), draws=DRAWS,
                                    progress=False)
    assert list(ds["checkpoint"].values) == ["step0", "step1", "step2"]
    for i, f in enumerate(folders):
        _same_score(entry(ds, i), score_components(f, components=("q", "k"), draws=DRAWS,
                                                   progress=False))


def test_entries_of_different_shapes_are_padded(steps, tmp_path):
    """A 3-layer GPT-2 beside a 2-layer one: dimension 'model' (shapes differ), the union of
    layers, the missing layer empty (storage "", NaN values, 0 rows) and both come back
    exactly as scored alone."""
    other = gpt2(tmp_path / "deeper", seed=4, n_layer=L + 1)
    ds = score_component_collection([str(steps[0]), str(other)], components=("q", "k"),
                                    draws=DRAWS, progress=False)
    assert ds.attrs["collection"] == "model" and "step" not in ds.coords
    assert ds["layer"].values.tolist() == list(range(L + 1))
    gap = ds.isel(model=0, layer=L)
    assert (gap["storage"].values == "").all() and (gap["rows"].values == 0).all()
    assert np.isnan(gap["value"].values).all() and not gap["component_flag"].values.any()
    for e, f in ((entry(ds, 0), steps[0]), (entry(ds, "deeper"), other)):
        _same_score(e, score_components(str(f), components=("q", "k"), draws=DRAWS,
                                        progress=False))


def test_report_shape_and_plot(steps):
    from matplotlib.figure import Figure

    from rmtbase.report.component_figures import plot_k_trajectory
    from rmtbase.report.write import report_shape

    single = [score_components(str(f), components="q", draws=DRAWS, progress=False)
              for f in steps]
    coll = combine_components(single, [f.name for f in steps])
    heads = xr.Dataset(coords={"checkpoint": [f.name for f in steps]})
    assert report_shape(heads, coll).components
    with pytest.raises(InputError, match="one model's"):
        report_shape(heads, single[0])
    with pytest.raises(InputError, match="different checkpoints"):
        report_shape(heads.isel(checkpoint=[0, 1]), coll)
    ax = Figure().subplots()
    assert plot_k_trajectory(coll, "q", ax) is ax
    assert plot_k_trajectory(coll, "q", Figure().subplots(), stat="weibull_k_trim100")
    with pytest.raises(InputError, match="takes a collection"):
        plot_k_trajectory(single[0], "q", Figure().subplots())
    named = combine_components(single, ["init", "mid", "final"])  # no step: labels on x
    assert "step" not in named.coords
    ax = plot_k_trajectory(named, "q", Figure().subplots())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["init", "mid", "final"]


def test_cli_checks_every_entry_before_any_work(steps, tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["score", *map(str, steps), "--components", "ffn_gate", "--quiet", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no 'ffn_gate' matrix" in err[0], err
    assert not out.exists()
