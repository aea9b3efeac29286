"""Inside a Dask task, a missing null table and the profile null are drawn by the task's whole
cluster (:mod:`rmtbase.baseline.task_cluster`), bit for bit what the task would have drawn alone;
outside a task nothing changes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import xarray as xr

distributed = pytest.importorskip("distributed")

from rmtbase.baseline.cache import null_table  # noqa: E402
from rmtbase.baseline.sweep import NO_DASHBOARD  # noqa: E402
from rmtbase.baseline.tables import baseline  # noqa: E402
from rmtbase.baseline.task_cluster import in_dask_task, task_client  # noqa: E402
from rmtbase.scoring.profile.axes import profile_null  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """Two in-process workers of one thread each (the threads share this process's JAX
    setting, float64 enabled by conftest)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None, scheduler_kwargs=NO_DASHBOARD,
                                  silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _names(stream) -> list[str]:
    """The task keys' names (a key is a string or a tuple whose first item is its name)."""
    return [str(t["key"][0] if isinstance(t["key"], tuple) else t["key"]) for t in stream.data]


def test_outside_a_task_nothing_is_spread():
    assert not in_dask_task()
    with task_client() as c:
        assert c is None


def test_inside_a_task_there_is_a_client(client):
    def probe():
        with task_client() as c:
            return in_dask_task(), c is not None

    assert client.submit(probe, pure=False).result() == (True, True)


@pytest.mark.slow  # 9 s; the quick tier keeps the profile null's test of the same mechanism
def test_a_table_generated_in_a_task_is_drawn_by_the_cluster_bit_for_bit(client, module_cache):
    """500 draws = 2 blocks of 250: two block tasks besides the calling one, and the table the
    task caches is the one-process table, every variable and value."""
    with distributed.get_task_stream(client) as stream:
        got = client.submit(null_table, 48, 8, stats="all", min_draws=500, seed=5,
                            pure=False).result()
    assert sum("job_blocks" in n for n in _names(stream)) == 2
    assert got.attrs["history"].startswith("drawn by a Dask task of rmtbase score as 2 tasks")
    cached = list(module_cache.glob("lowrank-d48-dh8-all-n500-seed5-*.nc"))
    assert len(cached) == 1
    alone = baseline(48, 8, draws=500, seed=5, stats="all", progress=False)
    for ds in (got, alone):
        ds.attrs.pop("history", None)
        ds.attrs.pop("created", None)
    assert set(got.data_vars) == set(alone.data_vars)
    for v in alone.data_vars:
        # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
        #  instead of this process
        np.testing.assert_array_equal(got[v].values, alone[v].values, err_msg=v)
    again = null_table(48, 8, stats="all", min_draws=500, seed=5)  # read back from the cache
    for v in alone.data_vars:
        # exact: the cached table/file holds this process's own draws of the same program; read back
        #  losslessly
        np.testing.assert_array_equal(again[v].values, alone[v].values, err_msg=v)


@pytest.mark.parametrize("storage", ["float32", "q8_0"])
def test_the_profile_null_in_a_task_is_the_same_draws(client, storage):
    """600 heads = chunks of 250, 250, 100: three chunk tasks, the one-process draws (float32:
    the reduced draws; q8_0: factors through the round trip)."""
    with distributed.get_task_stream(client) as stream:
        got = client.submit(profile_null, 64, 8, storage, n=600, seed=2, pure=False).result()
    assert sum("_profile_chunk" in n for n in _names(stream)) == 3
    alone = profile_null(64, 8, storage, n=600, seed=2)
    assert set(got) == set(alone)
    for a in alone:
        assert got[a].shape == (600,)
        # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
        #  instead of this process
        np.testing.assert_array_equal(got[a], alone[a], err_msg=a)


@pytest.mark.slow
def test_a_collection_of_a_new_shape_on_two_workers_equals_one_process(tmp_path, monkeypatch):
    """``score A B --workers 2`` on an empty cache: the first entry's tables and profile null
    are drawn by both workers (the cached table says so) and the collection is the one-process
    collection scored on another empty cache, value for value."""
    from _checkpoints import trajectory

    from rmtbase.scoring.collection.trajectory import score_collection

    steps = [str(p) for p in trajectory(tmp_path / "ckpt", strengths=(0.0, 3.0))]
    opts = dict(draws=300, stats="all", max_draws=1000, progress=False)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "alone"))
    here = score_collection(steps, **opts)
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "spread"))
    swept = score_collection(steps, workers=2, **opts)
    tables = [p for p in (tmp_path / "spread").glob("lowrank-*.nc")]
    assert tables
    for p in tables:
        with xr.open_dataset(p) as ds:
            assert ds.attrs["history"].startswith("drawn by a Dask task of rmtbase score"), p.name
    assert (swept.attrs.pop("computed_by"), here.attrs.pop("computed_by")) == \
        ("2 Dask tasks", "one process")
    import json

    where = ("created", "baseline_creation_time", "baseline_history")  # provenance only
    attrs = []
    for ds in (swept, here):
        for a in where:
            ds.attrs.pop(a, None)
        attrs.append([{k: v for k, v in json.loads(str(e)).items() if k not in where}
                      for e in ds["entry_attrs"].values])
    assert attrs[0] == attrs[1]
    # exact: the same compiled programs (fixed batch width) and keys, in a Dask task on this CPU
    #  instead of this process
    xr.testing.assert_identical(swept.drop_vars("entry_attrs"), here.drop_vars("entry_attrs"))
