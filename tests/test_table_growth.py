"""A null table grown from the draws already held (rmtbase.baseline.table_growth).

The joint null table of a score grows through rmtbase.scoring.stopping.joint.SCHEDULE, and a
grown table continues the draws already held (in a writable cache, a read-only one kept in
memory, or a shipped table) instead of drawing from draw 0. Each test counts the draws actually
computed (a spy on rmtbase.baseline.null.null_draws) and checks the grown table against a fresh
one of the same size, exactly: draw i depends on (seed, d, d_h, i) only and each block of 250
draws is drawn by itself, so the two are one program's bits (a shipped table's draws, made on
another machine, agree to float32 rounding).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

SEED = 7


@pytest.fixture(autouse=True)
def _fresh_state():
    """What a fresh process holds: nothing kept in memory, nothing reported yet."""
    from rmtbase.files.user_cache import forget

    forget()
    yield
    forget()


@pytest.fixture
def drawn(monkeypatch):
    """The sizes ``n_draws`` of every null_draws call, as ``(d, stats, n)``."""
    from rmtbase.baseline import null

    calls, real = [], null.null_draws

    def spy(key, d, d_h, n_draws, **kw):
        calls.append((int(d), kw.get("stats", "all"), int(n_draws)))
        return real(key, d, d_h, n_draws, **kw)

    monkeypatch.setattr(null, "null_draws", spy)
    return calls


@pytest.fixture
def unwritable(tmp_path, monkeypatch):
    """A cache folder that cannot be made (a file stands where its parent should be)."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "file" / "cache"))
    return tmp_path / "file" / "cache"


def _fresh(tmp_path, monkeypatch, n, d=16, d_h=4, stats="all"):
    """The table a fresh, writable cache draws at ``n`` draws."""
    from rmtbase.baseline.cache import null_table
    from rmtbase.files.user_cache import forget

    forget()
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / f"fresh-{n}"))
    return null_table(d, d_h, stats=stats, min_draws=n, seed=SEED)


def _assert_same_table(got, want):
    """Every value and attribute of ``want`` (creation_time aside), exactly."""
    assert list(got.data_vars) == list(want.data_vars)
    for v in want.data_vars:
        # exact: each 250-draw block is the same compiled program on the same key, fresh or grown
        np.testing.assert_array_equal(got[v].values, want[v].values)  # NaN == NaN here
        assert got[v].dtype == want[v].dtype and got[v].attrs == want[v].attrs, v
    skip = {"creation_time"}
    assert {k: v for k, v in got.attrs.items() if k not in skip} == \
        {k: v for k, v in want.attrs.items() if k not in skip}


@pytest.mark.parametrize("cache, stats", [  # the spectral table in the quick tier (~1 s a case)
    ("writable", "spectral"), ("unwritable", "spectral"),
    pytest.param("unwritable", "all", marks=pytest.mark.slow),  # ~10-20 s more each
    pytest.param("writable", "all", marks=pytest.mark.slow)])
def test_each_growth_step_draws_only_the_draws_it_adds(cache, stats, drawn, tmp_path,
                                                       monkeypatch, request):
    """250, 750, 1,500 draws in turn: 1,500 computed (before: 2,500), the cache said once
    where it cannot be written, and each table is a fresh one's. ``all``: the joint table of
    a score; ``spectral``: the spectral reference the stopping rule extends."""
    from rmtbase.baseline.cache import null_table

    if cache == "unwritable":
        request.getfixturevalue("unwritable")
    else:
        monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = [null_table(16, 4, stats=stats, min_draws=n, seed=SEED) for n in (250, 750, 1500)]
    assert sum(n for _, _, n in drawn) == 1500, drawn
    said = [str(w.message) for w in record if "cache" in str(w.message).lower()]
    assert len(said) == (cache == "unwritable"), said
    _assert_same_table(got[2], _fresh(tmp_path, monkeypatch, 1500, stats=stats))
    _assert_same_table(got[1], _fresh(tmp_path, monkeypatch, 750, stats=stats))


def test_a_held_table_of_part_of_a_block_grows_from_its_whole_blocks(drawn, tmp_path,
                                                                     monkeypatch):
    """600 draws held (two blocks of 250 and 100 draws of the third): 1,000 draws redraw the
    third block whole and draw the fourth (500 computed, not 1,000), the values a fresh run's."""
    from rmtbase.baseline.cache import null_table

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    null_table(16, 4, stats="spectral", min_draws=600, seed=SEED)
    drawn.clear()
    got = null_table(16, 4, stats="spectral", min_draws=1000, seed=SEED)
    assert sum(n for _, _, n in drawn) == 500, drawn
    _assert_same_table(got, _fresh(tmp_path, monkeypatch, 1000, stats="spectral"))


def test_the_grown_file_is_the_cache_file_of_a_fresh_run(tmp_path, monkeypatch):
    """The grown table as written (and read back through its checksum) holds a fresh
    file's values; a later, smaller request reads it truncated."""
    from rmtbase.baseline.cache import cache_target, null_table
    from rmtbase.baseline.table_file import read_table

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    null_table(16, 4, stats="spectral", min_draws=250, seed=SEED)
    null_table(16, 4, stats="spectral", min_draws=750, seed=SEED)
    grown = read_table(cache_target(16, 4, stats="spectral", draws=750, seed=SEED),
                       checksum=True)
    fresh = _fresh(tmp_path, monkeypatch, 750, stats="spectral")
    _assert_same_table(grown, read_table(cache_target(16, 4, stats="spectral", draws=750,
                                                      seed=SEED), checksum=True))
    _assert_same_table(grown, fresh)


def test_a_table_drawn_by_another_program_is_not_continued(drawn, unwritable, monkeypatch):
    """A held table whose attributes name another JAX is not this program's draws: the larger
    table is drawn from draw 0."""
    from rmtbase.baseline.cache import null_table
    from rmtbase.files.user_cache import remembered

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        null_table(16, 4, stats="spectral", min_draws=250, seed=SEED)
        (entry,) = remembered("table")
        entry["table"].attrs["jax_version"] = "0.0.1"
        drawn.clear()
        null_table(16, 4, stats="spectral", min_draws=500, seed=SEED)
    assert sum(n for _, _, n in drawn) == 500, drawn


def test_an_unwritable_cache_keeps_one_table_per_request(unwritable, monkeypatch):
    """The grown table replaces the one it grew from in memory (not one copy per step)."""
    from rmtbase.baseline.cache import null_table
    from rmtbase.files.user_cache import remembered

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (250, 500, 750):
            null_table(16, 4, stats="spectral", min_draws=n, seed=SEED)
    assert [e["draws"] for e in remembered("table")] == [750]


@pytest.mark.slow  # two scores of a 2-layer GPT-2 with composition-free defaults: ~1-2 min
@pytest.mark.parametrize("cache", ["writable", "unwritable"])
def test_a_score_grows_its_joint_table_without_redrawing(cache, drawn, tmp_path, monkeypatch,
                                                         request):
    """The score's growth rule (rmtbase.scoring.stopping.joint_growth.grow_joint) with the schedule
    shrunk (1,250, 2,000; the first table has 1,000) and every head declared unsettled: the
    joint table's draws computed are 2,000 (before: 1,000 + 1,250 + 2,000 = 4,250), with a
    writable cache and an unwritable one alike, and the heads' p are exactly those of the same
    run drawing each step's table from draw 0."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.baseline import table_growth
    from rmtbase.files.user_cache import forget
    from rmtbase.scoring.score import score_model
    from rmtbase.scoring.stopping import joint as J

    if cache == "unwritable":
        request.getfixturevalue("unwritable")
    else:
        monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(J, "SCHEDULE", (1250, 2000))
    monkeypatch.setattr(J, "JOINT_DRAWS", 2000)
    monkeypatch.setattr(J, "unsettled", lambda lo, hi, alpha: np.ones(np.shape(lo), bool))
    torch.manual_seed(3)
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=32, n_positions=16)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "m")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = score_model(str(tmp_path / "m"), progress=False, spectrum_draws=0)
    assert np.all(ds["head_calibration_draws"].values == 2000)
    joint = [n for d, stats, n in drawn if d == 64 and stats == "all"]
    assert sum(joint) == 2000, drawn
    if cache == "unwritable":
        return
    forget()
    drawn.clear()
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "fresh"))
    monkeypatch.setattr(table_growth, "held_table", lambda key, entries: None)  # each step from draw 0
    want = score_model(str(tmp_path / "m"), progress=False, spectrum_draws=0)
    assert sum(n for d, stats, n in drawn if d == 64 and stats == "all") == 4250
    for v in ("head_p_value", "head_calibration_draws"):
        # exact: identical tables (above) through one process's programs
        np.testing.assert_array_equal(ds[v].values, want[v].values)


def test_a_cold_cache_grows_from_the_shipped_table(drawn, tmp_path, monkeypatch):
    """A request past a shipped table's draws (the spectral table at (512, 64): 4,000 draws,
    seed 0) continues it: its draw 0 drawn again (the check that its draws are this program's),
then 250 draws for 4,250, not 4,250; its first 4,000 draws are the
    shipped file's exactly, the rest a fresh run's exactly, and the shipped draws are that fresh
    run's first draws (to float32 rounding: the file was drawn on another CPU)."""
    from importlib import resources

    from rmtbase.baseline import cache
    from rmtbase.baseline.table_file import read_table

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    got = cache.null_table(512, 64, stats="spectral", min_draws=4250, seed=0)
    assert [n for _, _, n in drawn] == [1, 250], drawn  # draw 0 checked, then block 16
    ref = resources.files("rmtbase").joinpath(
        "data", "lowrank-d512-dh64-spectral-n4000-seed0-float32-v1.nc")
    with resources.as_file(ref) as path:
        shipped = read_table(path)
    monkeypatch.setattr(cache, "shipped_index", lambda: [])  # a fresh run from draw 0
    monkeypatch.setattr(cache, "_shipped_entries", lambda key: [])
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "fresh"))
    fresh = cache.null_table(512, 64, stats="spectral", min_draws=4250, seed=0)
    assert sum(n for _, _, n in drawn) == 1 + 250 + 4250, drawn
    assert list(got.data_vars) == list(fresh.data_vars) == list(shipped.data_vars)
    head, tail = dict(draw=slice(0, 4000)), dict(draw=slice(4000, None))
    for v in fresh.data_vars:
        # exact: the head is a copy of the shipped file's stored values
        np.testing.assert_array_equal(got[v].isel(head).values, shipped[v].values)
        # exact: the tail and the fresh table's are one program's draws (blocks of 250)
        np.testing.assert_array_equal(got[v].isel(tail).values, fresh[v].isel(tail).values)
        np.testing.assert_allclose(got[v].isel(head).values, fresh[v].isel(head).values,
                                   rtol=1e-4, atol=1e-6)
