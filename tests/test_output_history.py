"""An output's attributes never depend on when its cache files were made.

A score's ``baseline_*`` attributes copy its null tables' attributes; those that say when and by
which release a file was made (rmtbase.scoring.nulls.layer_null.MAKING_ATTRS) are left out, so a
cold run (tables drawn now) and a warm one (tables read from files made at another time, by
another release) give the same file, ``created`` (the run's own time) aside.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """A tiny random GPT-2 (2 layers, 4 heads, d = 32, d_h = 8) saved to a folder."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=64, n_positions=32,
                                  bos_token_id=0, eos_token_id=0)
    path = tmp_path_factory.mktemp("history") / "tiny-gpt2"
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)
    return path


def _age_cache(folder) -> int:
    """Give every cached table another making time and release (attributes outside the
    checksum, as a file made long ago by another release has); the number of files."""
    import netCDF4

    files = sorted(folder.glob("lowrank-*.nc"))
    for p in files:
        with netCDF4.Dataset(p, "a") as nc:
            nc.setncattr("creation_time", "2001-01-01T00:00:00+00:00")
            nc.setncattr("history", "2001-01-01T00:00:00+00:00 rmtbase 0.0.1 drew this table")
            nc.setncattr("rmtbase_version", "0.0.1")
    return len(files)


def test_baseline_attrs_leave_out_when_a_table_was_made():
    """Two nulls whose tables differ only in when and by which release they were made give the
    same ``baseline_*`` attributes; what the draws are (seed, draws) is kept."""
    from types import SimpleNamespace

    import xarray as xr

    from rmtbase.scoring.nulls.layer_null import MAKING_ATTRS, baseline_attrs

    def null(when, version, rows):
        attrs = {"seed": 0, "draws": 250, "creation_time": when, "rmtbase_version": version,
                 "history": f"{when} rmtbase {version} drew this table", "created": when}
        return SimpleNamespace(table=xr.Dataset(attrs=attrs), rows=rows)

    old = baseline_attrs([null("2001-01-01", "0.0.1", [0]), null("2001-01-02", "0.0.1", [1])],
                         [0, 1])
    new = baseline_attrs([null("2030-01-01", "9.9", [0]), null("2030-01-01", "9.9", [1])],
                         [0, 1])
    assert old == new == {"baseline_seed": 0, "baseline_draws": 250}
    assert MAKING_ATTRS >= {"creation_time", "history", "rmtbase_version", "created"}


@pytest.mark.slow  # two scores of a tiny GPT-2, all statistics: ~30 CPU-s
def test_cold_and_warm_scores_are_the_same_file(gpt2, tmp_path, monkeypatch):
    from rmtbase.files.user_cache import forget
    from rmtbase.scoring.score import score_model

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    forget()
    opts = dict(progress=False, spectrum_draws=0, draws=250)
    cold = score_model(gpt2, **opts)
    assert _age_cache(tmp_path / "cache") > 0
    forget()
    warm = score_model(gpt2, **opts)
    for ds in (cold, warm):
        ds.attrs.pop("created")
    assert not [k for k in cold.attrs if k.startswith("baseline_") and
                k.removeprefix("baseline_") in ("creation_time", "history", "rmtbase_version")]
    # exact: the same draws, read back losslessly, through the same programs
    cold.to_netcdf(tmp_path / "cold.nc")
    warm.to_netcdf(tmp_path / "warm.nc")
    assert (tmp_path / "cold.nc").read_bytes() == (tmp_path / "warm.nc").read_bytes()
