"""One cache file per null-table request (rmtbase.baseline.cache_rungs) and whose files are read
(rmtbase.files.cache_trust).

Draw i of a table depends on (seed, d, d_h, i) only, so the cache keeps the largest rung of a
request: a grown table is renamed into place and the shorter one removed; a cache holding several
rungs is compacted on first use. Every comparison of values is exact: the files hold one
program's draws, written and read back losslessly. Draws are counted by a spy on null_draws.
"""

from __future__ import annotations

import os
import stat
import warnings

import numpy as np
import pytest

SEED = 11
D, DH = 16, 4


@pytest.fixture(autouse=True)
def _fresh_state(tmp_path, monkeypatch):
    """A fresh process's state and an empty private cache folder."""
    from rmtbase.files.user_cache import forget

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("RMTBASE_CACHE_TRUST", raising=False)
    forget()
    yield
    forget()


@pytest.fixture
def drawn(monkeypatch):
    """The sizes of every null_draws call."""
    from rmtbase.baseline import null

    calls, real = [], null.null_draws

    def spy(key, d, d_h, n_draws, **kw):
        calls.append(int(n_draws))
        return real(key, d, d_h, n_draws, **kw)

    monkeypatch.setattr(null, "null_draws", spy)
    return calls


def _files(tmp_path):
    return sorted(p.name for p in (tmp_path / "cache").iterdir())


def _name(n):
    from rmtbase.baseline.cache import table_filename

    return table_filename(D, DH, ensemble="lowrank", stats="spectral", draws=n, seed=SEED,
                          dtype="float32")


def _table(n):
    from rmtbase.baseline.cache import null_table

    return null_table(D, DH, stats="spectral", min_draws=n, seed=SEED)


def _same(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        # exact: copies of stored values: the same table read from two files
        np.testing.assert_array_equal(a[v].values, b[v].values, err_msg=v)


def test_a_grown_table_replaces_the_shorter_one(tmp_path, drawn):
    """Growing 250 → 500 → 750 leaves one file, the largest, and draws each block once."""
    _table(250)
    _table(500)
    grown = _table(750)
    assert _files(tmp_path) == [_name(750)]
    assert sum(drawn) == 750, drawn
    drawn.clear()
    _same(_table(300), grown.isel(draw=slice(0, 300)))  # read from the one file, truncated
    assert drawn == []


def test_a_reader_of_the_shorter_file_keeps_working_during_the_replacement(tmp_path):
    """A reader that opened the 250-draw file before it was replaced reads all of it after:
    the name is removed, the open file's data stays (rename/unlink semantics)."""
    import netCDF4

    first = _table(250)
    with netCDF4.Dataset(tmp_path / "cache" / _name(250)) as nc:
        _table(500)  # renamed into place, the 250-draw name removed
        assert _files(tmp_path) == [_name(500)]
        held = np.asarray(nc.variables["lambda"][:])
    # exact: copies of stored values: one table file read twice
    np.testing.assert_array_equal(held, first["lambda"].values)


def test_an_existing_cache_with_several_rungs_is_compacted_on_first_use(tmp_path, drawn):
    """Rungs of 250, 500 and 750 draws (as an earlier rmtbase left them) become the 750 one on
    the first lookup; the values served are its first draws."""
    from rmtbase.baseline.table_file import first_draws, write_table

    full = _table(750)
    for n in (250, 500):
        write_table(first_draws(full, n), tmp_path / "cache" / _name(n), replace="any")
    assert len(_files(tmp_path)) == 3
    drawn.clear()
    _same(_table(400), full.isel(draw=slice(0, 400)))
    assert _files(tmp_path) == [_name(750)] and drawn == []


def test_compaction_keeps_the_largest_rung_that_verifies(tmp_path, drawn):
    """A damaged largest rung is reported once and removed; the next largest is kept, the
    shorter ones removed only after it verified, and the request grows from it."""
    from rmtbase.baseline.table_file import first_draws, write_table

    full = _table(750)
    for n in (250, 500):
        write_table(first_draws(full, n), tmp_path / "cache" / _name(n), replace="any")
    big = tmp_path / "cache" / _name(750)
    data = bytearray(big.read_bytes())
    data[len(data) // 2] ^= 0xFF
    big.write_bytes(bytes(data))
    drawn.clear()
    with pytest.warns(RuntimeWarning, match="ignoring cached table") as got:
        again = _table(750)
    assert len([w for w in got if "rmtbase" in str(w.message)]) == 1
    _same(again, full)
    assert sum(drawn) == 250, drawn  # grown from the 500-draw rung, not drawn from 0
    assert _files(tmp_path) == [_name(750)]


def test_a_rung_removed_while_read_is_listed_again_not_reported(tmp_path):
    """compact answers VANISHED (no warning, nothing removed) when the file it was reading
    disappeared: another process kept a larger rung."""
    from rmtbase.baseline.cache_rungs import VANISHED, compact
    from rmtbase.errors import TableError

    gone = tmp_path / "gone.nc"
    other = tmp_path / "other.nc"
    other.write_bytes(b"x")

    def read(entry):
        raise TableError(f"{entry['file']}: no such file")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compact([{"file": gone, "draws": 9}, {"file": other, "draws": 3}],
                       read) is VANISHED
    assert other.exists()


def test_a_file_others_can_write_is_not_read_and_is_replaced_privately(tmp_path, drawn):
    """A group-writable cache file of this user is not read (one warning); the redraw replaces
    it with a file only this user can write, which the next process reads silently."""
    from rmtbase.files.user_cache import forget

    first = _table(250)
    path = tmp_path / "cache" / _name(250)
    assert not path.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH)  # written private
    path.chmod(0o664)
    forget()
    drawn.clear()
    with pytest.warns(RuntimeWarning, match="writable by its group") as got:
        _same(_table(250), first)
    assert len([w for w in got if "rmtbase" in str(w.message)]) == 1
    assert sum(drawn) == 250
    assert not path.stat().st_mode & stat.S_IWGRP
    forget()
    drawn.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(_table(250), first)
    assert drawn == []


def test_another_users_file_is_neither_read_nor_touched(tmp_path, drawn, monkeypatch):
    """A cache file owned by another user (this process's user id made to differ) is not read,
    not removed and not replaced: one warning, the redraw kept in memory for the process."""
    from rmtbase.files.user_cache import forget

    first = _table(250)
    path = tmp_path / "cache" / _name(250)
    before = (path.stat().st_ino, path.read_bytes())
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    forget()
    drawn.clear()
    with pytest.warns(RuntimeWarning, match="owned by user id"):
        _same(_table(250), first)
        _same(_table(250), first)  # the private copy, kept in memory: no second draw or warning
    assert sum(drawn) == 250
    assert _files(tmp_path) == [_name(250)]
    assert (path.stat().st_ino, path.read_bytes()) == before


def test_a_trusted_folder_is_read_whoever_wrote_it(tmp_path, drawn, monkeypatch):
    """RMTBASE_CACHE_TRUST naming the folder: another user's file is read, silently."""
    from rmtbase.files.user_cache import forget

    _table(250)
    path = tmp_path / "cache" / _name(250)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    monkeypatch.setenv("RMTBASE_CACHE_TRUST", os.pathsep.join(["", str(tmp_path / "cache")]))
    forget()
    drawn.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _table(250)
    assert drawn == []
