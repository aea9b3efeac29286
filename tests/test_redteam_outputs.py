"""Issue 49's red-team defects on outputs: (1) ``rmtbase combine --out`` into an earlier output
replaced it whole with exit 0; (3) an entry of ``OUT.entries`` edited after it was written was
reused by the rerun as fresh numbers."""

from __future__ import annotations

import hashlib
import os

import pytest

from rmtbase.cli import main
from rmtbase.files.output import MANIFEST, OutputFolder


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
