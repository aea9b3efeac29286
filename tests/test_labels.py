"""Two runs of one model are labelled by their folders in ``compare`` and ``combine`` (not
``tiny-gpt2#0``, ``tiny-gpt2#1``): :func:`rmtbase.scoring.collection.combine.folder_labels`.

One score of a tiny random GPT-2 is written to folder ``a`` and copied to ``b`` (the same
model scored twice: the labels' source is all that matters here).
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import xarray as xr

from rmtbase.cli import main


def test_folder_labels():
    from rmtbase.scoring.collection.combine import folder_labels

    # distinct labels are kept as they are
    assert folder_labels(["gpt2", "bert"], ["x/a", "y/a"]) == ["gpt2", "bert"]
    # a shared label: the folder's name, or the shortest distinct end of its path
    assert folder_labels(["m", "m"], ["runs/a", "runs/b"]) == ["a", "b"]
    assert folder_labels(["m", "m", "n"], ["r/a/out", "r/b/out", "r/c/out"]) == \
        ["a/out", "b/out", "n"]
    # an entry of a folder holding several: <folder>:<label>
    assert folder_labels(["s1", "s2", "s1"], ["x/p", "x/p", "x/q"]) == ["p:s1", "s2", "q"]
    # the same folder twice: still told apart
    assert folder_labels(["m", "m"], ["a", "a"]) == ["a:m#0", "a:m#1"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, score_cache):
    from _checkpoints import gpt2

    root = tmp_path_factory.mktemp("runs")
    model = gpt2(root / "tiny-gpt2", seed=0)
    assert main(["score", str(model), "--stats", "spectral", "--no-figures", "--quiet",
                 "--out", str(root / "a")]) == 0
    shutil.copytree(root / "a", root / "b")
    return root


def test_compare_labels_runs_by_folder(two_runs, tmp_path, capsys):
    root = two_runs
    assert main(["compare", str(root / "a"), str(root / "b"), "--no-figures",
                 "--out", str(tmp_path / "c")]) == 0, capsys.readouterr().err
    flags = pd.read_csv(tmp_path / "c" / "flags.csv")
    assert list(flags["model"]) == ["a", "b"]
    heads = pd.read_csv(tmp_path / "c" / "heads.csv")
    assert set(heads["model"]) == {"a", "b"}


def test_combine_labels_runs_by_folder(two_runs, tmp_path, capsys):
    root = two_runs
    assert main(["combine", str(root / "a"), str(root / "b"), "--no-figures",
                 "--out", str(tmp_path / "all")]) == 0, capsys.readouterr().err
    with xr.open_dataset(tmp_path / "all" / "scores.nc") as ds:
        dim = next(d for d in ("checkpoint", "model") if d in ds.dims)
        assert [str(v) for v in ds[dim].values] == ["a", "b"]
