"""The profile's Gaussian null is drawn once per key and read back from the user cache."""

from __future__ import annotations

import numpy as np
import pytest

import rmtbase.scoring.profile as profile
from rmtbase.scoring.profile_cache import cached_profile_null, profile_path


def _no_draws(*a, **k):
    raise AssertionError("the profile null was drawn again")


def test_drawn_once_then_read_back_identical(monkeypatch, tmp_path):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    first = cached_profile_null(64, 16, "bfloat16", n=300, seed=3)
    direct = profile.profile_null(64, 16, "bfloat16", n=300, seed=3)
    assert profile_path(64, 16, "bfloat16", 300, 3).is_file()
    monkeypatch.setattr(profile, "profile_null", _no_draws)
    again = cached_profile_null(64, 16, "bfloat16", n=300, seed=3)
    for a in profile.FACTOR_AXES:
        np.testing.assert_array_equal(first[a], direct[a])
        np.testing.assert_array_equal(again[a], first[a])
    with pytest.raises(AssertionError, match="drawn again"):  # another key is another file
        cached_profile_null(64, 16, "float32", n=300, seed=3)


def test_a_broken_or_renamed_file_is_drawn_again(monkeypatch, tmp_path):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    good = cached_profile_null(64, 16, n=300, seed=1)
    path = profile_path(64, 16, "float32", 300, 1)
    path.write_bytes(b"not netcdf")
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        again = cached_profile_null(64, 16, n=300, seed=1)
    np.testing.assert_array_equal(again["alignment"], good["alignment"])
    other = profile_path(64, 16, "float32", 300, 2)
    other.write_bytes(path.read_bytes())  # seed 1's draws under seed 2's name
    with pytest.warns(RuntimeWarning, match="does not hold what its name says"):
        cached_profile_null(64, 16, n=300, seed=2)


def test_shipped_profile_nulls_equal_a_fresh_draw(monkeypatch, tmp_path):
    """The profile nulls shipped for the default model's shape are profile_null's own draws
    (same seed), read without drawing and without writing to the user cache."""
    from rmtbase.scoring.profile_cache import SHIPPED_PROFILES

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    for d, d_h, storage in SHIPPED_PROFILES:
        fresh = profile.profile_null(d, d_h, storage)
        monkeypatch.setattr(profile, "profile_null", _no_draws)
        shipped = cached_profile_null(d, d_h, storage)
        monkeypatch.undo()
        monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
        for a in profile.FACTOR_AXES:
            np.testing.assert_allclose(shipped[a], fresh[a], rtol=0, atol=0)
    assert not (tmp_path / "cache").exists()
