"""Every cache kind trusts its files alike (rmtbase.files.cache_trust): the heads' σ = 1 tables,
the profile and composition nulls, the whole-matrix nulls, a collection's entries and the analytic
constants. A file owned
by another user, or one its group or other users can write, is not read: the value is drawn (or
scored) again, and another user's file is left as it was.

The file is made foreign for real: chown to another user id (the tests run as root where they
can) or chmod g+w / o+w. The draws are counted by a spy on each kind's drawing function."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

OTHER_UID = 4242


@pytest.fixture(autouse=True)
def _fresh_state(tmp_path, monkeypatch):
    from rmtbase.files.user_cache import forget

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("RMTBASE_CACHE_TRUST", raising=False)
    forget()
    yield
    forget()


def _spy(monkeypatch, module, name: str) -> list:
    """Count the calls of ``module.name`` (each appends 1), the function itself still run."""
    calls, real = [], getattr(module, name)

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(module, name, spy)
    return calls


def _make_foreign(path, how: str) -> str:
    """Make ``path`` another user's (``owner``, root only: else skip) or writable by its group
    or others; the words of the warning that says so."""
    if how == "owner":
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        os.chown(path, OTHER_UID, -1)
        return "owned by user id"
    path.chmod(path.stat().st_mode | (stat.S_IWGRP if how == "group" else stat.S_IWOTH))
    return "writable by its group" if how == "group" else "writable by other users"


def _heads(monkeypatch):
    from rmtbase.baseline import null
    from rmtbase.baseline.cache import null_table

    calls, real = [], null.null_draws

    def spy(key, d, d_h, n_draws, **kw):
        calls.append(int(n_draws))
        return real(key, d, d_h, n_draws, **kw)

    monkeypatch.setattr(null, "null_draws", spy)

    def run():
        return np.asarray(null_table(16, 4, stats="spectral", min_draws=20, seed=3)
                          ["spectral_entropy"].values)
    return run, calls


def _profile(monkeypatch):
    from rmtbase.scoring.profile import factors
    from rmtbase.scoring.profile.cache import cached_profile_null

    calls = _spy(monkeypatch, factors, "profile_null")

    def run():
        got = cached_profile_null(16, 4, n=30, seed=3)
        return np.concatenate([got[k] for k in sorted(got)])
    return run, calls


def _composition(monkeypatch):
    from rmtbase.scoring.composition.cache import cached_null

    calls = []

    def draw():
        calls.append(1)
        return np.arange(8, dtype=np.float64)

    def run():
        return cached_null("composition", 16, 4, 8, 3, "float32", draw)
    return run, calls


def _matrix(monkeypatch):
    from rmtbase.baseline import matrix_null

    calls = _spy(monkeypatch, matrix_null, "matrix_null_draws")

    def run():
        return np.asarray(matrix_null.matrix_null_table(8, 4, draws=3, seed=3)["rms"].values)
    return run, calls


def _heavy_tail(monkeypatch):
    from rmtbase.baseline import heavy_tail_null

    calls = _spy(monkeypatch, heavy_tail_null, "heavy_tail_null_draws")

    def run():
        return np.asarray(heavy_tail_null.heavy_tail_null_table(24, 24, draws=3, seed=3)
                          ["lambda"].values)
    return run, calls


KINDS = {"heads": _heads, "profile": _profile, "composition": _composition, "matrix": _matrix,
         "heavy_tail": _heavy_tail}


def _only_file(tmp_path):
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()
             and p.suffix == ".nc"]
    assert len(files) == 1, files
    return files[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("how", ["group", "other", "owner"])
def test_a_foreign_cache_file_is_not_read(kind, how, tmp_path, monkeypatch):
    """A cache file of each kind, made group-writable, world-writable or another user's, is not
    read: one warning naming why, the value drawn again (and equal: the same draws)."""
    from rmtbase.files.user_cache import forget

    run, calls = KINDS[kind](monkeypatch)
    first = run()
    path = _only_file(tmp_path)
    calls.clear()
    forget()
    run()  # this user's private file: read, nothing drawn
    assert calls == []
    match = _make_foreign(path, how)
    before = (path.stat().st_uid, path.read_bytes())
    forget()
    with pytest.warns(RuntimeWarning, match=match):
        again = run()
    assert calls, f"the {kind} cache file was read although {match}"
    # exact: the same draws (seeded, same program) drawn again
    np.testing.assert_array_equal(again, first)
    if how == "owner":  # another user's file: neither removed nor replaced
        assert (path.stat().st_uid, path.read_bytes()) == before


@pytest.mark.parametrize("how", ["group", "other", "owner"])
def test_a_foreign_entry_is_scored_again(how, tmp_path):
    """A collection's entry file another user wrote or could rewrite is not reused."""
    import xarray as xr

    from rmtbase.scoring.collection.entries import check, entry_path, save

    folder = tmp_path / "entries"
    folder.mkdir()
    ds = xr.Dataset({"head_flag": (("layer", "head"), np.array([[True, False]]))})
    save(folder, "m", "k", ds)
    assert check(folder, "m", "k") == (check(folder, "m", "k")[0], None)
    assert check(folder, "m", "k")[0] is not None
    path = entry_path(folder, "m")
    _make_foreign(path, how)
    got, why = check(folder, "m", "k")
    assert got is None
    assert "not trusted" in why


@pytest.mark.parametrize("how", ["group", "other", "owner"])
def test_a_foreign_constants_table_is_not_read(how, tmp_path):
    """The cached table of analytic constants, likewise: not read (one warning), and another
    user's left as it is by the next store."""
    from rmtbase.analytic import _constants_cache as cc

    cc.store(5, {"a": "1.2345"})
    assert cc.load(5, ["a"]) == {"a": "1.2345"}
    path = cc.path(5)
    _make_foreign(path, how)
    before = path.read_bytes()
    with pytest.warns(RuntimeWarning, match="not using cached constants table"):
        assert cc.load(5, ["a"]) is None
    if how == "owner":
        cc.store(5, {"a": "1.2346"})
        assert path.read_bytes() == before and path.stat().st_uid == OTHER_UID


@pytest.mark.parametrize("kind", sorted(KINDS) + ["entries", "constants"])
def test_a_file_written_under_a_permissive_umask_is_trusted_next_time(kind, tmp_path,
                                                                       monkeypatch):
    """Under umask 002 (group write granted by default) every kind writes its cache file
    without group or other write, so this user's next run reads it silently."""
    import warnings

    import xarray as xr

    from rmtbase.analytic import _constants_cache as cc
    from rmtbase.files.user_cache import forget
    from rmtbase.scoring.collection.entries import check, entry_path, save

    old = os.umask(0o002)
    try:
        if kind == "entries":
            folder = tmp_path / "entries"
            folder.mkdir()
            save(folder, "m", "k", xr.Dataset({"head_flag": (("layer", "head"),
                                                            np.array([[True, False]]))}))
            path = entry_path(folder, "m")
        elif kind == "constants":
            cc.store(5, {"a": "1.2345"})
            path = cc.path(5)
        else:
            run, calls = KINDS[kind](monkeypatch)
            run()
            path = _only_file(tmp_path)
        assert not path.stat().st_mode & (stat.S_IWGRP | stat.S_IWOTH), oct(path.stat().st_mode)
        forget()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            if kind == "entries":
                assert check(folder, "m", "k")[1] is None
            elif kind == "constants":
                assert cc.load(5, ["a"]) == {"a": "1.2345"}
            else:
                calls.clear()
                run()
                assert calls == []
    finally:
        os.umask(old)
