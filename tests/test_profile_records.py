"""The profile's Gaussian null keyed by storage records: ``null_storage``
answers a record (float storages float32's, ``FLOAT32``) for a name or a record alike; the
profile path groups and keys its draws by record and uses the name only where one is written
(cache file names, ``profile_null_draws``) or read (the start sizes a collection takes from an
entry's ``profile_null_draws``). The draws here are stand-ins (no JAX): what is tested is which
null each layer is read against and at what size, not the draws."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

import rmtbase.scoring.heads.pipeline as pipeline
import rmtbase.scoring.profile.cache as pc
from rmtbase.errors import InputError
from rmtbase.scoring.heads.reference import GAUSSIAN_AXES, NullStart
from rmtbase.scoring.profile import factors as fa
from rmtbase.scoring.profile import stopping as ps
from rmtbase.scoring.profile.axes import add_profile
from rmtbase.stats.storage import FLOAT32, records, storage_record

#: per layer its null storage: three float layers (one float32 null) and a Q8_0 one
LAYERS = ("bfloat16", "q8_0", "float32", "float16")


def test_null_storage_answers_a_record_for_a_name_or_a_record():
    """Every registered storage: the same record from its name and from its record, float32's
    for the float family, its own otherwise; the cache file and format the same either way."""
    for r in records():
        got = fa.null_storage(r)
        assert got is fa.null_storage(r.name) and got is fa.null_storage(r.name.upper())
        assert got is (FLOAT32 if r.is_float else r), r.name
        assert pc.profile_path(64, 16, r, 300, 3) == pc.profile_path(64, 16, r.name, 300, 3)
        assert pc.profile_format(r) == pc.profile_format(r.name) == (
            pc.PROFILE_FORMAT if r.is_float else pc.STORED_FORMAT)
    # the file names spell the null storage's name (as before records: files stay valid)
    assert pc.profile_path(64, 16, storage_record("bfloat16"), 300, 3).name == \
        "profile-d64-dh16-n300-seed3-float32-v3.nc"
    assert pc.profile_path(64, 16, "q8_0", 300, 3).name == "profile-d64-dh16-n300-seed3-q8_0-v6.nc"
    with pytest.raises(InputError, match="storage must be one of"):
        fa.null_storage("float31")


def _stand_in(calls: list):
    """A ``cached_profile_null`` that records (storage, n) and answers seeded N(0, 1)."""
    def draw(d, d_h, storage, n=None, seed=0, progress=False):
        calls.append((storage, n))
        rng = np.random.default_rng(0)
        return {a: rng.standard_normal(n) for a in fa.FACTOR_AXES}
    return draw


def _heads(n_layers: int = len(LAYERS), n_heads: int = 4):
    rng = np.random.default_rng(1)
    profiles = [{a: rng.standard_normal(n_heads) for a in fa.FACTOR_AXES}
                for _ in range(n_layers)]
    ds = xr.Dataset({"head_p_value": (("layer", "head"), np.full((n_layers, n_heads), 0.5)),
                     "sigma_q": (("layer", "head"), np.ones((n_layers, n_heads))),
                     "sigma_k": (("layer", "head"), np.ones((n_layers, n_heads)))})
    return ds, profiles


def test_sequential_nulls_keys_by_record_and_reads_start_by_name(monkeypatch):
    """Layers' records (or their names): one float32 null for the three float layers, one
    Q8_0; the nulls and sizes keyed by those records, in the layers' order; a start size given
    by name (as an entry's ``profile_null_draws`` spells it) is where float32 starts — keyed by
    record it would be missed silently and float32 would start at the schedule's first."""
    q8 = storage_record("q8_0")
    got = []
    for layers in ([storage_record(s) for s in LAYERS], list(LAYERS)):
        calls: list = []
        monkeypatch.setattr(pc, "cached_profile_null", _stand_in(calls))
        ds, profiles = _heads()
        nulls, used = ps.sequential_nulls(ds, profiles, layers, 64, 16, alpha=0.05, seed=0,
                                          start={"float32": ps.SCHEDULE[1]})
        assert list(nulls) == list(used) == [FLOAT32, q8]
        assert calls[0][0] is FLOAT32 and calls[1][0] is q8  # records handed to the cache
        assert [n for _, n in calls[:2]] == [ps.SCHEDULE[1], ps.SCHEDULE[0]]  # 64 x 16: none ship
        assert used[FLOAT32] >= ps.SCHEDULE[1] and used[q8] >= ps.SCHEDULE[0]
        got.append((calls, used))
    assert got[0] == got[1]  # names and records: the same draws asked for, the same sizes


def test_the_score_reads_each_layer_against_its_records_null(monkeypatch):
    """pipeline._add_profile -> add_profile -> the head decision: each layer's factor axes
    against its null storage's draws (rows [0, 2, 3] float32's, [1] Q8_0's), and the
    ``profile_null_draws`` attr spelled by name."""
    calls: list = []
    monkeypatch.setattr(pc, "cached_profile_null", _stand_in(calls))
    seen = {}
    monkeypatch.setattr(pipeline, "add_axes_decision",
                        lambda ds, axis_nulls, alpha: seen.setdefault("nulls", axis_nulls))
    ds, profiles = _heads()
    read = SimpleNamespace(profiles=profiles, null_records=[storage_record(s) for s in LAYERS])
    ref = SimpleNamespace(profile_null=lambda: GAUSSIAN_AXES)
    opts = SimpleNamespace(alpha=0.05, seed=0, null_start=NullStart(), axes=())
    pipeline._add_profile(ds, read, [ref], opts, 64, 16, progress=False)
    rows = [r for r, _ in seen["nulls"]]
    assert rows == [[0, 2, 3], [1]]
    sizes = dict(p.split(": ") for p in ds.attrs["profile_null_draws"].split(", "))
    assert list(sizes) == ["float32", "q8_0"]
    for (_, draws), name in zip(seen["nulls"], sizes, strict=True):
        assert all(len(draws[a]) == int(sizes[name]) for a in fa.FACTOR_AXES)
    # add_profile alone: its answer keyed by the null storages' records
    again = add_profile(ds.copy(), read, 64, 16, alpha=0.05, seed=0)
    assert list(again) == [FLOAT32, storage_record("q8_0")]
