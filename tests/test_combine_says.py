"""``rmtbase combine`` says what it leaves out and ``--unverified`` does what its help says.

A collection holds the heads' scores only: the composition.nc and circuits.nc of the score
folders it combines were dropped without a word; now one line names them, before the work.
``--unverified`` takes content that holds no hash (it cannot be checked); content that does
not match its hash, or a scores.nc beside a manifest.json that no longer lists it (an edited
manifest), is refused either way: before, the edited flags of such a folder were combined
with only a warning.
"""

from __future__ import annotations

import json
import shutil

import pytest

from rmtbase.cli import main


@pytest.fixture(scope="module")
def folders(tmp_path_factory, score_cache):
    from _checkpoints import gpt2

    root = tmp_path_factory.mktemp("combine")
    model = gpt2(root / "g")
    assert main(["score", str(model), "--stats", "spectral", "--no-figures", "--quiet",
                 "--out", str(root / "a")]) == 0
    return root


def _pair(root, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(root / "a", a)
    shutil.copytree(root / "a", b)
    return a, b


def test_combine_names_the_files_it_leaves_out(folders, tmp_path, capsys):
    import xarray as xr

    a, b = _pair(folders, tmp_path)
    xr.Dataset({"x": ("i", [1.0])}).to_netcdf(b / "composition.nc")
    xr.Dataset({"x": ("i", [1.0])}).to_netcdf(a / "circuits.nc")
    capsys.readouterr()
    assert main(["combine", str(a), str(b), "--no-figures", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "left out" in line]
    assert said == [f"rmtbase: combine: the collection holds the heads' scores only; left out: "
                    f"{a / 'circuits.nc'}, {b / 'composition.nc'}"], err
    assert not (tmp_path / "c" / "composition.nc").exists()


def test_unverified_refuses_an_edited_manifest(folders, tmp_path, capsys):
    """b's scores.nc edited and its line removed from b's manifest.json: no hash left to
    check it by, yet it is not content "with no hash": refused with --unverified too."""
    import xarray as xr

    a, b = _pair(folders, tmp_path)
    with xr.open_dataset(b / "scores.nc") as ds:
        ds = ds.load()
    ds["head_flag"][:] = 1
    (b / "scores.nc").unlink()
    ds.to_netcdf(b / "scores.nc")
    doc = json.loads((b / "manifest.json").read_text())
    del doc["files"]["scores.nc"]
    (b / "manifest.json").write_text(json.dumps(doc))
    capsys.readouterr()
    for extra in ([], ["--unverified"]):
        code = main(["combine", str(a), str(b), *extra, "--no-figures",
                     "--out", str(tmp_path / "c")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert "manifest.json does not list scores.nc" in err[0]
    assert not (tmp_path / "c").exists()
