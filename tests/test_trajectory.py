"""Training trajectories: local checkpoints scored into one Dataset with a ``checkpoint``
dimension; monotone where the planted structure makes it so; Dask identical to one process."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr
from _checkpoints import DH, H, L, gpt2, trajectory

from rmtbase.cli import main
from rmtbase.errors import InputError
from rmtbase.scoring.collection.combine import combine, entries, entry, step_of
from rmtbase.scoring.collection.trajectory import make_specs, score_collection

OPTS = dict(draws=300, stats="spectral", max_draws=2000)


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    return trajectory(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def scored(steps, cache):
    return score_collection([str(p) for p in steps], progress=False, **OPTS)


def _layer_mean(ds, stat):
    return ds["value"].sel(stat=stat).mean("head").values  # (checkpoint, layer)


def test_one_dataset_with_a_checkpoint_dimension(scored):
    ds = scored
    assert ds["value"].dims == ("checkpoint", "layer", "head", "stat")
    assert ds["head_flag"].dims == ("checkpoint", "layer", "head")
    assert ds["qk_spectrum"].dims == ("checkpoint", "layer", "head", "rank")
    assert list(ds["checkpoint"].values) == ["step0", "step1", "step2", "step3"]
    assert list(ds["step"].values) == [0, 1, 2, 3]
    assert ds.sizes["layer"] == L and ds.sizes["head"] == H and ds.sizes["rank"] == DH
    assert ds.attrs["collection"] == "checkpoint" and ds.attrs["n_entries"] == 4
    assert set(ds["d"].values) == {64} and set(ds["d_h"].values) == {DH}
    assert bool(ds["head_present"].all())
    # one null for all (step1 extends the spectral null past step0's; step0 is re-scored):
    # the table size is common to the entries, whatever the cache held before
    sizes = {json.loads(str(a))["baseline_draws"] for a in ds["entry_attrs"].values}
    assert len(sizes) == 1 and ds.attrs["baseline_draws"] >= 2000
    # and the joint and profile nulls too (step0 and step1 need 18,000 profile draws, step2 and
    #  step3 stop at 2,000 on their own: they are re-scored from 18,000, not through the cache)
    assert ds.attrs["joint_null_draws"] == ds.attrs["baseline_draws"]
    assert ds.attrs["profile_null_draws"] == "float32: 18000"
    attrs = json.loads(str(ds["entry_attrs"].values[2]))
    assert attrs["model"].endswith("step2") and attrs["d"] == 64


def test_trajectory_is_monotone_where_structure_grows(scored):
    """The planted alignment grows step by step: in every layer the largest normalised
    eigenvalue rises and NPR and spectral entropy fall at every step; the random init scores
    as null and every head is flagged once the alignment is strong."""
    xmax = scored["qk_spectrum"].isel(rank=0).mean("head").values
    npr = _layer_mean(scored, "qk.npr")
    ent = _layer_mean(scored, "qk.spectral_entropy")
    assert (np.diff(xmax, axis=0) > 0).all(), xmax
    assert (np.diff(npr, axis=0) < 0).all(), npr
    assert (np.diff(ent, axis=0) < 0).all(), ent
    flags = scored["head_flag"].sum(["layer", "head"]).values
    assert flags[0] == 0 and flags[-1] == L * H and (np.diff(flags) >= 0).all(), flags
    top = scored["head_top_stat"].isel(checkpoint=-1).values.ravel()
    assert all(t.startswith("qk.") for t in top)  # a query-key structure, not the entry law


def test_an_entry_is_exactly_the_single_model_score(scored, steps, cache):
    """The null shared across checkpoints changes nothing but its sizes: entry i equals
    score_model(step i) started from the collection's null sizes (``null_start``, read from the
    entry's own attrs), whatever the cache holds."""
    from rmtbase.scoring.score import score_model

    e = entry(scored, "step2")
    storage, n = e.attrs["profile_null_draws"].split(": ")
    start = {"table": e.attrs["baseline_draws"], "joint": e.attrs["joint_null_draws"],
             "profile": {storage: int(n)}}
    one = score_model(str(steps[2]), progress=False, null_start=start, **OPTS)
    assert e.attrs.pop("created") and one.attrs.pop("created")
    # exact: the same call twice in one process: same compiled programs, same inputs (the null
    #  reused across checkpoints is the same table)
    xr.testing.assert_identical(e, one)


@pytest.mark.slow
def test_dask_two_workers_identical_to_one_process(scored, steps, cache):
    pytest.importorskip("distributed")
    swept = score_collection([str(p) for p in steps], progress=False, workers=2, **OPTS)
    assert swept.attrs.pop("computed_by") == "4 Dask tasks"
    here = scored.copy()
    assert here.attrs.pop("computed_by") == "one process"
    for ds in (swept, here):
        ds.attrs.pop("created")
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(swept, here)


def test_models_of_different_shapes_are_padded_and_come_back_whole(scored, tmp_path):
    a = entry(scored, 0)
    b = entry(scored, 3).isel(layer=[0], head=[0, 1], rank=slice(0, 8))
    b = b.isel(stat=[i for i, s in enumerate(b["stat"].values) if not s.startswith("k.")])
    b.attrs.update(model="other", d_h=8)
    ds = combine([a, b], ["a", "b"], dim="model")
    assert ds["value"].dims == ("model", "layer", "head", "stat") and "step" not in ds.coords
    assert ds["head_present"].sel(model="b").values.sum() == 2
    assert np.isnan(ds["value"].sel(model="b", layer=1).values).all()
    assert not ds["head_flag"].sel(model="b", layer=1).values.any()
    assert list(ds["d_h"].values) == [DH, 8]
    path = tmp_path / "c.nc"
    ds.to_netcdf(path)
    with xr.open_dataset(path) as back:
        back = back.load()
    for label, want in (("a", a), ("b", b)):
        got = entry(back, label)
        for x in (got, want):
            x.attrs.pop("created", None)
        # exact: a file round trip of these arrays (lossless), or one read of one file
        xr.testing.assert_equal(got, want)
    assert [lab for lab, _ in entries(ds)] == ["a", "b"]
    with pytest.raises(InputError):
        combine([ds], ["x"])


def test_labels_steps_and_specs():
    assert step_of("step1000") == 1000 and step_of("checkpoint-500/") == 500
    assert step_of("final") is None
    specs = make_specs("EleutherAI/pythia-70m", ["step0", "step1000"])
    assert [(s.model, s.revision, s.label) for s in specs] == [
        ("EleutherAI/pythia-70m", "step0", "step0"),
        ("EleutherAI/pythia-70m", "step1000", "step1000")]
    assert [s.label for s in make_specs(["gpt2", "gpt2"])] == ["gpt2#0", "gpt2#1"]
    with pytest.raises(InputError, match="not both"):
        make_specs(["a", "b"], ["r1", "r2"])


def test_colliding_folder_names_get_the_shortest_distinct_path_ends(tmp_path, monkeypatch):
    """Folder names that repeat are told apart by the shortest distinct ends of their paths,
    never by a full path; the same folder twice gets #i; steps are read from those labels."""
    from rmtbase.scoring.collection.combine import distinct_suffixes

    for rel in ("runs/a/checkpoint-100", "runs/b/checkpoint-100", "x/a/checkpoint-100",
                "runs/a/checkpoint-200", "runs/final"):
        (tmp_path / rel).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    labels = [s.label for s in make_specs(["runs/a/checkpoint-100", "runs/b/checkpoint-100/"])]
    assert labels == ["a/checkpoint-100", "b/checkpoint-100"]
    labels = [s.label for s in make_specs([str(tmp_path / "runs/a/checkpoint-100"),
                                           "runs/b/checkpoint-100", "x/a/checkpoint-100",
                                           "runs/a/checkpoint-200", "runs/final"])]
    assert labels == ["runs/a/checkpoint-100", "b/checkpoint-100", "x/a/checkpoint-100",
                      "checkpoint-200", "final"]
    assert [s.label for s in make_specs(["runs/final", "./runs/final"])] == \
        ["final#0", "final#1"]
    assert distinct_suffixes(["/a/ckpt", "/x/a/ckpt"]) == ["a/ckpt", "x/a/ckpt"]
    loaded = SimpleNamespace(config=SimpleNamespace(_name_or_path=str(tmp_path / "runs/final")))
    assert [s.label for s in make_specs([loaded])] == ["final"]
    assert step_of("a/checkpoint-100") == 100 and step_of("b/step7") == 7


def test_collection_report_shows_no_absolute_path(tmp_path, cache, capsys):
    """`rmtbase score runs/a/checkpoint-100 runs/b/checkpoint-100` (given as absolute paths):
    entries are labelled a/checkpoint-100 and b/checkpoint-100, and no text, CSV or HTML file
    of the report (nor the printed lines) holds the folders' absolute paths."""
    a = gpt2(tmp_path / "runs" / "a" / "checkpoint-100", seed=3)
    b = gpt2(tmp_path / "runs" / "b" / "checkpoint-100", seed=4)
    out = tmp_path / "out"
    code = main(["score", str(a), str(b), "--out", str(out), "--quiet", "--draws", "300",
                 "--stats", "spectral", "--max-draws", "2000"])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    with xr.open_dataset(out / "scores.nc") as ds:
        dim = ds.attrs["collection"]
        assert sorted(ds[dim].values.tolist()) == ["a/checkpoint-100", "b/checkpoint-100"]
    texts = {p.name: p.read_text(encoding="utf-8") for p in out.rglob("*")
             if p.suffix in (".csv", ".txt", ".html")}
    assert {"report.html", "heads.csv", "summary.txt"} <= set(texts)
    assert "a/checkpoint-100" in texts["heads.csv"] and "b/checkpoint-100" in texts["summary.txt"]
    for name, text in {**texts, "stdout": printed}.items():
        assert str(tmp_path) not in text, name
        assert str(tmp_path.resolve()) not in text, name


def test_cli_glob_writes_one_dataset_figures_and_html(steps, cache, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["score", str(steps[0].parent / "step*"), "--out", str(out), "--quiet",
                 "--draws", "300", "--stats", "spectral", "--max-draws", "2000"])
    assert code == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "4 checkpoints scored" in text and "step3" in text
    with xr.open_dataset(out / "scores.nc") as ds:
        assert ds.sizes["checkpoint"] == 4 and list(ds["step"].values) == [0, 1, 2, 3]
    names = json.loads((out / "manifest.json").read_text())["files"]
    for f in ("report.html", "heads.csv", "scores.csv", "summary.txt",
              "figures/verdict_grid.png", "figures/trajectory_flags.png",
              *(f"figures/trajectory_{s}.png" for s in
                ("lambda_max", "npr", "spectral_entropy", "condition_number"))):
        assert f in names, f
    heads = (out / "heads.csv").read_text().splitlines()
    assert heads[0].startswith("checkpoint,layer,head") and len(heads) == 1 + 4 * L * H


@pytest.mark.parametrize("argv, word", [
    (["score", "/no/such/dir/step*"], "matches"),
    (["score", "--revision", "a,a", "gpt2"], "twice"),
    (["score", "gpt2", "--workers", "2"], "several"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, argv, word):
    code = main([*argv, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and word in err[0], err


def test_unrelated_models_get_a_model_dimension(tmp_path, cache):
    a = gpt2(tmp_path / "a", seed=3)
    b = gpt2(tmp_path / "b", seed=4, n_layer=3)
    ds = score_collection([str(a), str(b)], progress=False, stats="spectral", draws=300)
    assert ds.attrs["collection"] == "model" and list(ds["model"].values) == ["a", "b"]
    assert list(ds["n_layers"].values) == [L, 3]
    assert ds["head_present"].sel(model="a").sum() == L * H
