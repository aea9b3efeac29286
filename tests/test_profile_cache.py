"""The profile's Gaussian null is drawn once per key and read back from the user cache."""

from __future__ import annotations

import numpy as np
import pytest

import rmtbase.scoring.profile.factors as profile  # where the null is drawn
from rmtbase.scoring.profile.cache import cached_profile_null, profile_path


def _no_draws(*a, **k):
    raise AssertionError("the profile null was drawn again")


def test_drawn_once_then_read_back_identical(monkeypatch, tmp_path):
    """bfloat16 heads' null is float32's (one file, named float32); a block format is
    another key, so another file."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    first = cached_profile_null(64, 16, "bfloat16", n=300, seed=3)
    direct = profile.profile_null(64, 16, "bfloat16", n=300, seed=3)
    assert profile_path(64, 16, "bfloat16", 300, 3) == profile_path(64, 16, "float32", 300, 3)
    assert profile_path(64, 16, "float32", 300, 3).is_file()
    assert [f.name for f in (tmp_path / "profile").iterdir()] == \
        ["profile-d64-dh16-n300-seed3-float32-v3.nc"]
    monkeypatch.setattr(profile, "profile_null", _no_draws)
    again = cached_profile_null(64, 16, "bfloat16", n=300, seed=3)
    also = cached_profile_null(64, 16, "float32", n=300, seed=3)
    for a in profile.FACTOR_AXES:
        # exact: the cached table/file holds this process's own draws of the same program; read back
        #  losslessly
        np.testing.assert_array_equal(first[a], direct[a])
        # exact: the cached table/file holds this process's own draws of the same program; read back
        #  losslessly
        np.testing.assert_array_equal(again[a], first[a])
        # exact: the cached table/file holds this process's own draws of the same program; read back
        #  losslessly
        np.testing.assert_array_equal(also[a], first[a])
    with pytest.raises(AssertionError, match="drawn again"):  # another key is another file
        cached_profile_null(64, 16, "q8_0", n=300, seed=3)


def test_an_earlier_version_file_is_not_read_as_the_block_draws(monkeypatch, tmp_path):
    """A cache file of earlier draws (format 2: the gathered Bartlett factor; format 1: the
    factor path) stays unread: the name differs."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    path = profile_path(64, 16, "float32", 300, 3)
    assert path.name.endswith("-v3.nc")
    old = path.with_name(path.name.replace("-v3.nc", "-v2.nc"))
    old.parent.mkdir(parents=True)
    old.write_bytes(b"format 2 draws")
    got = cached_profile_null(64, 16, n=300, seed=3)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(got["symmetry"],
                                  profile.profile_null(64, 16, n=300, seed=3)["symmetry"])
    assert old.read_bytes() == b"format 2 draws" and path.is_file()


def test_a_broken_or_renamed_file_is_drawn_again(monkeypatch, tmp_path):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    good = cached_profile_null(64, 16, n=300, seed=1)
    path = profile_path(64, 16, "float32", 300, 1)
    path.write_bytes(b"not netcdf")
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        again = cached_profile_null(64, 16, n=300, seed=1)
    # exact: the same call twice in one process: same compiled programs, same inputs
    np.testing.assert_array_equal(again["alignment"], good["alignment"])
    other = profile_path(64, 16, "float32", 300, 2)
    other.write_bytes(path.read_bytes())  # seed 1's draws under seed 2's name
    with pytest.warns(RuntimeWarning, match="does not hold what its name says"):
        cached_profile_null(64, 16, n=300, seed=2)


def _shipped_shapes():
    """Each shipped shape; slow but the default model's and the LLaMA-3-8B's (a compile of
    the reduced draws per shape)."""
    from rmtbase.scoring.profile.cache import SHIPPED_PROFILES

    quick = {(384, 32), (4096, 128)}
    return [pytest.param(d, d_h, s, marks=() if (d, d_h) in quick else pytest.mark.slow)
            for d, d_h, s in SHIPPED_PROFILES]


@pytest.mark.parametrize("d, d_h, storage", _shipped_shapes())
def test_shipped_profile_nulls_equal_a_fresh_draw(monkeypatch, tmp_path, d, d_h, storage):
    """A shipped profile null is profile_null's own draws (same seed), to float32 rounding
    (drawn on another CPU), read without drawing and without writing to the user cache: all
    first 2,000 for the default model's shape, the first 20 for the others (head j of chunk i
    depends on (seed, i, j) alone)."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    n = 2000 if (d, d_h) == (384, 32) else 20
    fresh = profile.profile_null(d, d_h, storage, n=n)
    monkeypatch.setattr(profile, "profile_null", _no_draws)
    shipped = cached_profile_null(d, d_h, storage)
    # Not exact: the shipped file was drawn on another machine, and XLA's float32 reductions
    # round differently by instruction set (AVX-512 vs AVX2: 1,884 of 2,000 values moved by
    # ≤ 3.4e-8). alignment and symmetry are ratios of sums bounded by their denominators
    # (Cauchy–Schwarz), so their rounding is ulps of 1, not of the value (~1e-2, often near 0:
    # a relative tolerance fails there); input focus is < 1. 8 ulps of that scale is 28x the
    # largest difference seen; a different draw moves values by ~1e-2.
    eps32 = float(np.finfo(np.float32).eps)
    for a in profile.FACTOR_AXES:
        assert shipped[a].shape == (profile.PROFILE_DRAWS,)
        scale = max(1.0, float(np.abs(fresh[a]).max()))
        np.testing.assert_allclose(shipped[a][:n], fresh[a], rtol=0, atol=8 * eps32 * scale,
                                   err_msg=a)
    assert not (tmp_path / "cache").exists()


def test_every_shipped_table_shape_has_its_profile_null_shipped():
    """A first score of a shape whose null tables ship draws no profile null either."""
    from rmtbase.baseline.shipped import shipped_index
    from rmtbase.scoring.profile.cache import SHIPPED_PROFILES, shipped_profile

    shapes = {(e["d"], e["d_h"]) for e in shipped_index() if e["ensemble"] == "lowrank"}
    assert shapes == {(d, d_h) for d, d_h, _ in SHIPPED_PROFILES}
    for d, d_h, storage in SHIPPED_PROFILES:
        name = profile_path(d, d_h, storage, profile.PROFILE_DRAWS, 0).name
        assert shipped_profile(name) is not None, name
