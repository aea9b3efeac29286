"""`rmtbase sweep` builds what scoring needs: the scorer's cache tables (--into-cache), --storage,
resume after an interrupt; and the one Dask wait (baseline.sweep.completed)."""

import os

import numpy as np
import pytest
import xarray as xr

from rmtbase.baseline.sweep import NO_DASHBOARD
from rmtbase.baseline.tables import DRAW_BLOCK, baseline

distributed = pytest.importorskip("distributed")


# -- the one Dask wait ------------------------------------------------------------------------

class _Future:
    def __init__(self, ready=False):
        self.ready = ready

    def done(self):
        return self.ready


class _Client:
    def __init__(self):
        self.cancelled = []

    def cancel(self, futures, force=False):
        assert force
        self.cancelled.extend(futures)


def test_completed_yields_what_is_done_and_cancels_the_rest_on_any_early_exit():
    from rmtbase.baseline.sweep import completed

    a, b, c = _Future(True), _Future(), _Future(True)
    client = _Client()
    it = completed({a: 0, b: 1, c: 2}, client, poll_s=0.001)
    assert {next(it), next(it)} == {a, c}  # b is not done: the next look would poll
    it.close()  # the caller stops early (break, an error in its loop)
    assert client.cancelled == [b]

    b.ready, client = True, _Client()
    assert list(completed([a, b], client)) == [a, b] and client.cancelled == []

    d, client = _Future(), _Client()

    def boom():
        raise RuntimeError("a task's result failed")

    with pytest.raises(RuntimeError):
        for _ in completed([a, d], client, poll_s=0.001):
            boom()
    assert client.cancelled == [d]


# -- what score looks up ----------------------------------------------------------------------

def test_score_requests_are_the_scorer_tables():
    from rmtbase.baseline.sweep_cache import score_requests

    def reqs(*a):
        return [(r["stats"], r["draws"], r["storage"]) for r in score_requests(*a)]

    # an all-statistics float32 table of >= 1000 draws is its own spectral reference
    assert reqs("all", None, "float32") == [("all", 1000, "float32")]
    assert reqs("all", 300, "float32") == [("all", 300, "float32"), ("spectral", 1000, "float32")]
    # 16-bit storages share the float32 spectral null; block formats do not
    assert reqs("all", None, "bfloat16") == [("all", 1000, "bfloat16"),
                                             ("spectral", 1000, "float32")]
    assert reqs("spectral", 300, "float16") == [("spectral", 300, "float32")]
    assert reqs("all", 2000, "q4_0") == [("all", 2000, "q4_0")]
    assert reqs("elementwise", None, "fp8_e4m3") == [("elementwise", 1000, "fp8_e4m3")]


@pytest.fixture(scope="module")
def client():
    # one thread: two tasks compiling the same draw function at once would compile it twice
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None,
                            scheduler_kwargs=NO_DASHBOARD) as c:
        yield c


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from _checkpoints import gpt2

    return gpt2(tmp_path_factory.mktemp("tiny") / "m", seed=3)  # d = 64, 4 heads: d_h = 16


def _files(folder):
    return {p.relative_to(folder): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def _same_files(warm, cold, pattern="*"):
    """The same files by name, but for the profile null's size: a cold score draws the
    profile null only as far as its stopping rule asks (rmtbase.scoring.profile.stopping, 2,000
    here since the tail-count claim), the sweep all 18,000 (cli/sweep.py), which hold the cold
    score's draws as their first ones (the same draws: the scores are compared after)."""
    import re

    def names(folder):
        return sorted(str(p.relative_to(folder)) for p in folder.rglob(pattern) if p.is_file())

    size = re.compile(r"^(profile/profile-.*-n)(\d+)(-.*)$")
    w, c = names(warm), names(cold)
    assert [size.sub(r"\1*\3", n) for n in w] == [size.sub(r"\1*\3", n) for n in c], (w, c)
    for a, b in zip(w, c, strict=True):
        if size.match(a):
            assert int(size.match(a)[2]) >= int(size.match(b)[2]), (a, b)


def _no_null(monkeypatch):
    """Any null table or profile null drawn from here on raises."""
    import rmtbase.baseline.tables as tables
    import rmtbase.scoring.profile.factors as profile

    def refuse(*a, **k):
        raise AssertionError("a null was generated")

    monkeypatch.setattr(tables, "cell_table", refuse)  # null_table draws through it
    monkeypatch.setattr(profile, "profile_null", refuse)


#: The trajectory tests' configuration (test_entries: the same model shape, spectral, 300
#: draws), so the quick tier compiles it once; max_draws: no extension.
SPECTRAL = dict(stats="spectral", draws=300, max_draws=300, progress=False, spectrum_draws=0)


def _sweep_into(cache, client, monkeypatch):
    from rmtbase.baseline.sweep_cache import sweep_into_cache
    from rmtbase.scoring.profile.cache import cached_profile_null

    monkeypatch.setenv("RMTBASE_CACHE", str(cache))
    got = sweep_into_cache(64, 16, stats="spectral", draws=SPECTRAL["draws"], client=client,
                           blocks_per_task=1, progress=False)
    cached_profile_null(64, 16, "float32")  # what the command adds (cli/sweep.py)
    return got


def test_into_cache_makes_the_next_score_warm(tiny, client, tmp_path, monkeypatch):
    """sweep --into-cache (API, in-process Dask client) for d = 64, d_h = 16, then a score of
    a random model of that shape draws no null (generators patched to raise; the cache folder
    unchanged); the table written is the one null_table would generate (baseline(), bit for
    bit), so the score equals a cold one (compared whole in the slow test below)."""
    from rmtbase.baseline.tables import read_table
    from rmtbase.scoring.score import score_model

    got = _sweep_into(tmp_path / "warm", client, monkeypatch)
    assert [p.name for p in got["written"]] == \
        ["lowrank-d64-dh16-spectral-n300-seed0-float32-v1.nc"]
    before = _files(tmp_path / "warm")
    with monkeypatch.context() as m:
        _no_null(m)
        warm = score_model(str(tiny), **SPECTRAL)
    assert _files(tmp_path / "warm") == before
    assert warm.attrs["baseline_draws"] == SPECTRAL["draws"]
    single = baseline(64, 16, draws=SPECTRAL["draws"], seed=0, stats="spectral", progress=False)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(read_table(got["written"][0]).drop_attrs(deep=False),
                                single.drop_attrs(deep=False))
    # a second sweep finds the table and draws nothing
    again = _sweep_into(tmp_path / "warm", client, monkeypatch)
    assert again["written"] == [] and len(again["found"]) == 1


@pytest.mark.slow
def test_into_cache_score_equals_a_cold_score(tiny, client, tmp_path, monkeypatch):
    from rmtbase.scoring.score import score_model

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cold"))
    cold = score_model(str(tiny), **SPECTRAL)
    _sweep_into(tmp_path / "warm", client, monkeypatch)
    _same_files(tmp_path / "warm", tmp_path / "cold")
    with monkeypatch.context() as m:
        _no_null(m)
        warm = score_model(str(tiny), **SPECTRAL)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_equal(warm.drop_attrs(), cold.drop_attrs())


# -- resume -----------------------------------------------------------------------------------

@pytest.mark.parametrize("storage", ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_interrupted_sweep_resumes_to_the_uninterrupted_table(client, tmp_path, monkeypatch,
                                                              storage):
    """A Ctrl-C (the fault hook's SIGINT) once 1 of 2 blocks is kept: the same call again
    computes only the second, and the table equals the single-process one bit for bit, at
    σ ≠ 1 (σ is applied after the kept σ = 1 blocks) and at a storage (bfloat16, slow tier:
    its own compile). 64 × 16 spectral: the blocks the quick tier has compiled already."""
    from rmtbase.baseline.sweep import sweep

    out = tmp_path / "t.nc"
    opts = dict(draws=2 * DRAW_BLOCK, seed=5, stats="spectral", storage=storage,
                sigma_q=0.5, sigma_k=2.0)
    monkeypatch.setenv("RMTBASE_FAULT", "block:1:INT")
    with pytest.raises(KeyboardInterrupt):
        sweep(64, 16, client=client, out=out, progress=False, **opts)
    assert not out.exists()
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".t.nc.partial-")]
    assert len(kept) == 1 and len(list(kept[0].glob("*.npz"))) == 1
    monkeypatch.delenv("RMTBASE_FAULT")
    ds = sweep(64, 16, client=client, out=out, progress=False, **opts)
    assert "1 of them from the blocks an interrupted run kept" in ds.attrs["history"]
    assert not any(p.name.startswith(".t.nc.partial-") for p in tmp_path.iterdir())
    single = baseline(64, 16, progress=False, **opts)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(ds.drop_attrs(deep=False), single.drop_attrs(deep=False))
    from rmtbase.baseline.tables import read_table

    # exact: a file round trip of these arrays (lossless), or one read of one file
    np.testing.assert_array_equal(read_table(out)["npr"].values, single["npr"].values)
    assert single.attrs["storage_dtype"] == ds.attrs["storage_dtype"] == storage


@pytest.mark.slow
def test_interrupted_into_cache_resumes(client, tmp_path, monkeypatch):
    """--into-cache keeps blocks beside each cache target: interrupted after 1 of 2 blocks,
    the same call writes the table null_table would generate, and removes the kept blocks."""
    from rmtbase.baseline.sweep_cache import sweep_into_cache
    from rmtbase.baseline.tables import read_table

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    opts = dict(stats="spectral", draws=2 * DRAW_BLOCK, seed=2, client=client, progress=False)
    monkeypatch.setenv("RMTBASE_FAULT", "block:1:INT")
    with pytest.raises(KeyboardInterrupt):
        sweep_into_cache(16, 4, **opts)
    assert not list(tmp_path.glob("*.nc")) and len(list(tmp_path.glob(".*partial*/*.npz"))) == 1
    monkeypatch.delenv("RMTBASE_FAULT")
    (path,) = sweep_into_cache(16, 4, **opts)["written"]
    assert not list(tmp_path.glob(".*partial*"))
    single = baseline(16, 4, draws=2 * DRAW_BLOCK, seed=2, stats="spectral", progress=False)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(read_table(path).drop_attrs(deep=False),
                                single.drop_attrs(deep=False))


# -- the command ------------------------------------------------------------------------------

def test_cli_refuses_what_does_not_apply(capsys):
    from rmtbase.cli import main

    for extra, needle in ((["--into-cache", "--sigma", "2"], "--sigma do not apply"),
                          (["--out", "x.nc", "--storage", "float16", "q4_0"], "one value"),
                          (["--into-cache", "--dtype", "float64"], "--dtype do not apply")):
        assert main(["sweep", "--d", "8", "--dh", "4", "--workers", "1", *extra]) == 2
        assert needle in capsys.readouterr().err


@pytest.mark.slow
def test_cli_into_cache_with_two_workers_bf16_all_statistics(tiny, tmp_path, monkeypatch,
                                                             capsys):
    """The command on a loopback cluster, all statistics at bfloat16: the bf16 joint table,
    the shared float32 spectral reference and the bf16 profile null; a bf16 copy of the
    random model then scores with no null drawn, equal to a cold score."""
    import torch
    import transformers as tf

    from rmtbase.cli import main
    from rmtbase.scoring.score import score_model

    bf16 = tmp_path / "bf16"
    tf.GPT2LMHeadModel.from_pretrained(tiny).to(torch.bfloat16).save_pretrained(bf16)
    opts = dict(stats="all", draws=300, max_draws=1000, progress=False, spectrum_draws=0)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cold"))
    cold = score_model(str(bf16), **opts)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "warm"))
    assert main(["sweep", "--d", "64", "--dh", "16", "--storage", "bfloat16", "--into-cache",
                 "--draws", "300", "--workers", "2", "--no-progress"]) == 0, \
        capsys.readouterr().err
    _same_files(tmp_path / "warm", tmp_path / "cold", pattern="*.nc")
    with monkeypatch.context() as m:
        _no_null(m)
        warm = score_model(str(bf16), **opts)
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_equal(warm.drop_attrs(), cold.drop_attrs())
    assert os.environ["RMTBASE_CACHE"] == str(tmp_path / "warm")
