"""A whole-matrix null's cached file is what its content says, not what its name says: a heavy-tail
(or matrix) null renamed from 20 draws to ``-n40-`` is one warning naming it, drawn again and
replaced atomically, never read as 40 draws; a stray name of the cache's pattern (``-nX-``) is
ignored with one warning naming it, and the run goes on.

Cost: heavy-tail nulls of 24 × 20 matrices (20 to 40 draws), a matrix null of 40 draws."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rmtbase.baseline.heavy_tail_null import heavy_tail_null_table, table_filename


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    from rmtbase.files.user_cache import forget

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    forget()
    yield
    forget()


def _cache(tmp_path):
    return tmp_path / "cache"


@pytest.mark.parametrize("asked", [20, 40])
def test_a_renamed_heavy_tail_table_is_drawn_again(tmp_path, asked):
    """20 draws renamed ``-n40-``: asked for 40 (or 20) draws, the file is reported by name,
    the draws are drawn again (the first 20 equal the original's: draw i is the same in a longer
    table) and the file left under the name holds what its name says."""
    first = heavy_tail_null_table(24, 20, draws=20)
    real = _cache(tmp_path) / table_filename(24, 20, 20, 0, "float32")
    fake = _cache(tmp_path) / table_filename(24, 20, 40, 0, "float32")
    real.rename(fake)
    with pytest.warns(RuntimeWarning) as got:
        again = heavy_tail_null_table(24, 20, draws=asked)
    (line,) = [str(w.message) for w in got]
    assert str(fake) in line and "holds 20 draws" in line and "name says 40" in line, line
    assert again.sizes["draw"] == asked == again.attrs["draws"]  # exact: integers
    # exact: the same programs on the same keys
    assert np.array_equal(again["lambda"].values[:20], first["lambda"].values)
    left = sorted(p.name for p in _cache(tmp_path).glob("heavytail-*"))
    assert left == [table_filename(24, 20, asked, 0, "float32")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the replaced file is trusted as it is
        assert heavy_tail_null_table(24, 20, draws=asked).sizes["draw"] == asked


def test_a_renamed_matrix_null_is_drawn_again(tmp_path):
    from rmtbase.baseline.matrix_null import matrix_null_table

    matrix_null_table(24, 32, draws=20)
    (real,) = _cache(tmp_path).glob("matrix-*-n20-*")
    fake = real.with_name(real.name.replace("-n20-", "-n40-"))
    real.rename(fake)
    with pytest.warns(RuntimeWarning, match="holds 20 draws .* name says 40"):
        got = matrix_null_table(24, 32, draws=40)
    assert got.sizes["draw"] == 40 == got.attrs["draws"]  # exact: integers


def test_a_stray_name_is_ignored_with_one_warning(tmp_path):
    """``heavytail-…-nX-…`` (and an empty ``-n-``) in the cache: each one warning naming the file,
    left where it is; the table is drawn and cached as usual."""
    cache = _cache(tmp_path)
    cache.mkdir()
    name = table_filename(24, 20, 7, 0, "float32")
    stray = [cache / name.replace("-n7-", "-nX-"), cache / name.replace("-n7-", "-n-")]
    for p in stray:
        p.write_text("not a table")
    with pytest.warns(RuntimeWarning) as got:
        ds = heavy_tail_null_table(24, 20, draws=3)
    lines = [str(w.message) for w in got]
    assert len(lines) == 2 and all("does not say how many draws" in x for x in lines), lines
    assert {p.name for p in stray} == {p.name for p in stray if any(str(p) in x for x in lines)}
    assert ds.sizes["draw"] == 3 and all(p.exists() for p in stray)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once a process
        heavy_tail_null_table(24, 20, draws=3)
