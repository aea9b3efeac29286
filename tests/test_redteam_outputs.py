"""The red team's defects on outputs: (1) ``rmtbase combine --out`` into an earlier output
replaced it whole with exit 0; (3) an entry of ``OUT.entries`` edited after it was written was
reused by the rerun as fresh numbers."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
import xarray as xr
from _checkpoints import trajectory

import rmtbase.scoring.collection.runs as runs
from rmtbase.cli import main
from rmtbase.files.output import MANIFEST, OutputFolder
from rmtbase.scoring.collection.entries import entry_path
from rmtbase.scoring.collection.trajectory import score_collection

OPTS = dict(draws=300, stats="spectral")
CONTENT_ATTR = "entry_sha256"  # the entry's content hash (rmtbase.scoring.collection.entries.CONTENT_ATTR)


def _tree(path) -> dict:
    """{relative path: SHA-256} of every file under ``path``."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _earlier_score(path):
    """An earlier ``rmtbase score`` output (its manifest names the kind)."""
    with OutputFolder(path, kind="rmtbase score") as o:
        o.write_text("summary.txt", "an earlier score\n")
        o.write_text("scores.csv", "layer,head\n0,0\n")
    return _tree(path)


@pytest.mark.parametrize("kind", ["rmtbase score", "rmtbase compare"])
def test_combine_refuses_an_earlier_output_without_overwrite(tmp_path, capsys, kind):
    """Defect 1: combine into an earlier output is refused in one line, exit 2, before any
    entry is read (the entries named here do not even exist), and the folder is unchanged."""
    out = tmp_path / "Y"
    with OutputFolder(out, kind=kind) as o:
        o.write_text("summary.txt", "an earlier output\n")
    before = _tree(out)
    capsys.readouterr()
    rc = main(["combine", str(tmp_path / "nowhere-a"), str(tmp_path / "nowhere-b"),
               "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("rmtbase: error: "), err
    if kind == "rmtbase score":
        assert "--overwrite" in err
    else:  # a folder combine does not write is never replaced, --overwrite or not
        assert "never replaces a folder it did not write" in err
        assert main(["combine", "a", "b", "--overwrite", "--out", str(out)]) == 2
    assert _tree(out) == before


def test_combine_overwrite_passes_the_check_and_a_foreign_folder_stays_refused(tmp_path,
                                                                               capsys):
    out = tmp_path / "Y"
    before = _earlier_score(out)
    # with --overwrite the output check passes and the run goes on to read the entries
    assert main(["combine", str(tmp_path / "nowhere"), "--overwrite", "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert _tree(out) == before
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    assert main(["combine", "a", "b", "--overwrite", "--out", str(foreign)]) == 2
    assert "never replaces a folder it did not write" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "mine\n"
    assert not (foreign / MANIFEST).exists()


# --- defect 3: an entry changed after it was written is scored again, never reused ------------

@pytest.fixture(scope="module")
def steps(tmp_path_factory, score_cache):
    return [str(p) for p in trajectory(tmp_path_factory.mktemp("redteam-entries"))[:2]]


def _counting(monkeypatch):
    calls = []
    real = runs.score_one

    def one(model, revision, options, x64):
        calls.append(os.path.basename(str(model)))
        return real(model, revision, options, x64)

    monkeypatch.setattr(runs, "score_one", one)
    return calls


def _rewrite(path, edit):
    """Load the entry file ``path``, apply ``edit`` to it and write it back in place (what a
    hand edit or a stray script does: attributes, entry_key included, kept)."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds = edit(ds)
    os.remove(path)
    ds.to_netcdf(path)


def _tamper(ds):
    ds["head_p_value"] = 1.0 - ds["head_p_value"]
    ds["head_flag"] = ~ds["head_flag"]
    return ds


def _unhashed(ds):
    ds.attrs.pop(CONTENT_ATTR)
    return ds


@pytest.mark.parametrize("edit,why", [(_tamper, "changed after it was written"),
                                      (_unhashed, "cannot be verified")])
def test_changed_or_unverifiable_entry_is_scored_again(steps, tmp_path, monkeypatch, capsys,
                                                       edit, why):
    store = tmp_path / "run.entries"
    first = score_collection(steps, entries=store, progress=False, **OPTS)
    path = entry_path(store, "step0")
    with xr.open_dataset(path) as ds:
        assert len(str(ds.attrs[CONTENT_ATTR])) == 64  # written with its hash
    _rewrite(path, edit)
    capsys.readouterr()
    calls = _counting(monkeypatch)
    again = score_collection(steps, entries=store, progress=False, **OPTS)
    err = capsys.readouterr().err
    # step0 scored again, step1 reused; step0 may be scored a second time from step1's null
    # sizes (the collection's one-null-per-shape rule, null_start: 590dfe7)
    assert calls[0] == "step0" and "step1" not in calls and calls.count("step0") <= 2, calls
    warn = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "step0" in warn[0] and why in warn[0], err
    fresh = score_collection(steps, entries=tmp_path / "fresh.entries", progress=False, **OPTS)
    for v in ("head_p_value", "head_flag", "value"):  # the true numbers, not the edited ones
        # exact: the same call twice in one process: same compiled programs, same inputs
        np.testing.assert_array_equal(again[v].values, fresh[v].values, err_msg=v)
    if edit is _tamper:
        assert not np.array_equal(again["head_flag"].values, _tamper(first)["head_flag"].values)
    # the rescored entry was written again with its hash: a third run reuses both, silently
    calls.clear()
    score_collection(steps, entries=store, progress=False, **OPTS)
    assert calls == [] and "warning" not in capsys.readouterr().err


def test_combine_refuses_a_changed_entry(steps, tmp_path, capsys):
    store = tmp_path / "run.entries"
    score_collection(steps, entries=store, progress=False, **OPTS)
    _rewrite(entry_path(store, "step1"), _tamper)
    capsys.readouterr()
    assert main(["combine", str(store), "--no-figures", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "step1.nc changed after it was written" in err, err
    assert not (tmp_path / "c").exists()
