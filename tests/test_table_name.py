"""A null table's file name as a record (:mod:`rmtbase.baseline.table_name`): it formats to the
name and parses back (round trip, any fields), reads the names earlier releases wrote exactly
as they were read before (the shipped tables' index, and an independent positional reader of
the earlier names), and refuses any other name with its reason; the cache listing
(:func:`rmtbase.baseline.cache.cached_entries`) leaves such files out, saying why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmtbase.baseline.table_name import NameRefused, TableName

DATA = Path(__file__).resolve().parents[1] / "src" / "rmtbase" / "data"

#: Storage names as the registry may hold them: shipped ones, and a plugin's with the
#: characters a name may have ("-" and "+" among them).
_STORAGE = st.one_of(
    st.sampled_from(["float32", "float16", "bfloat16", "q4_0", "q4_k", "q6_k", "fp8_e4m3",
                     "int4_row"]),
    st.from_regex(r"[a-z0-9][a-z0-9_+-]{0,12}", fullmatch=True))

_RECORDS = st.builds(
    TableName, ensemble=st.sampled_from(["lowrank", "network", "ginibre"]),
    d=st.integers(1, 10**6), d_h=st.integers(1, 10**5),
    stats=st.sampled_from(["all", "spectral", "elementwise"]), draws=st.integers(0, 10**7),
    seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from(["float32", "float64"]),
    storage=_STORAGE.filter(lambda s: not re.search(r"(?:^|-)dv\d+$", s)),
    draws_version=st.integers(1, 5), format=st.integers(1, 3),
    depth=st.one_of(st.none(), st.integers(1, 64)))


@settings(max_examples=300, deadline=None)
@given(_RECORDS)
def test_a_name_parses_back_to_its_record(record):
    name = record.filename()
    assert TableName.parse(name) == record
    assert TableName.parse(name).filename() == name


@pytest.mark.parametrize("name, fields", [
    ("lowrank-d384-dh32-spectral-n4000-seed0-float32-v1.nc",
     dict(d=384, d_h=32, stats="spectral", draws=4000, seed=0, storage="float32")),
    ("lowrank-d576-dh64-spectral-n1000-seed7-float32-q4_1-v1.nc",
     dict(d=576, d_h=64, stats="spectral", draws=1000, seed=7, storage="q4_1")),
    ("lowrank-d768-dh256-all-n10-seed3-float32-q5_0-dv2-v1.nc",
     dict(d=768, d_h=256, stats="all", draws=10, seed=3, storage="q5_0", draws_version=2)),
    ("lowrank-d768-dh256-all-n10-seed0-float32-dv2-v1.nc",  # a version, no storage
     dict(d=768, d_h=256, stats="all", draws=10, seed=0, storage="float32", draws_version=2)),
    ("lowrank-d64-dh16-elementwise-n500-seed4294967295-float64-my-fmt+x-v2.nc",
     dict(d=64, d_h=16, stats="elementwise", draws=500, seed=2**32 - 1, dtype="float64",
          storage="my-fmt+x", format=2)),
    ("network-L3-d64-dh16-all-n500-seed0-float32-v1.nc",
     dict(ensemble="network", depth=3, d=64, d_h=16, stats="all", draws=500, seed=0)),
])
def test_names_with_storage_seed_and_kind_fields(name, fields):
    want = {"ensemble": "lowrank", "dtype": "float32", "storage": "float32",
            "draws_version": 1, "format": 1, "depth": None, **fields}
    got = TableName.parse(name)
    assert {k: getattr(got, k) for k in want} == want
    assert got.filename() == name
    assert got.request == TableName.parse(name.replace(f"-n{got.draws}-", "-n0-"))


@pytest.mark.parametrize("name, reason", [
    ("lowrank-d64-dh16-all-n500-seed0-float32-v1.nc.tmp", "not a null table's name"),
    ("lowrank-d64-dh16-all-nX-seed0-float32-v1.nc", "not a null table's name"),
    ("lowrank-d64-dh16-all-n500-float32-v1.nc", "not a null table's name"),
    ("notes.nc", "not a null table's name"),
    ("lowrank-d064-dh16-all-n500-seed0-float32-v1.nc", "not the spelling rmtbase writes"),
    ("lowrank-d64-dh16-all-n500-seed0-float32-float32-v1.nc", "not the spelling rmtbase writes"),
    ("lowrank-d64-dh16-all-n500-seed0-float32-q4_0-dv1-v1.nc",
     "not the spelling rmtbase writes"),
])
def test_other_names_are_refused_with_the_reason(name, reason):
    with pytest.raises(NameRefused) as info:
        TableName.parse(name)
    assert str(info.value).startswith(f"{name}: {reason}") and "\n" not in str(info.value)


def test_the_shipped_tables_names_read_as_their_index_says():
    """Every shipped table's name parses to the keys its index entry states (the names of
    earlier releases read as they were written)."""
    index = json.loads((DATA / "index.json").read_text())
    entries = index["tables"] if "tables" in index else next(iter(index.values()))
    assert entries
    for e in entries:
        got = TableName.parse(e["file"])
        assert got.filename() == e["file"]
        want = {k: e.get(k, default) for k, default in (
            ("ensemble", None), ("d", None), ("d_h", None), ("stats", None), ("draws", None),
            ("seed", None), ("dtype", None), ("storage", "float32"), ("format", None),
            ("draws_version", 1))}
        assert {k: getattr(got, k) for k in want} == want, e["file"]


def _positional(name: str):
    """The earlier reader of a cache name, by position (an independent reference for the names
    it read; None where it skipped the name)."""
    parts = name[: -len(".nc")].split("-")
    storage = parts[7] if len(parts) in (9, 10) else "float32"
    try:
        version = int(parts[8].removeprefix("dv")) if len(parts) == 10 else 1
        if len(parts) == 10 and not parts[8].startswith("dv"):
            return None
        return {"ensemble": parts[0], "d": int(parts[1][1:]), "d_h": int(parts[2][2:]),
                "stats": parts[3], "draws": int(parts[4][1:]), "seed": int(parts[5][4:]),
                "dtype": parts[6], "storage": storage, "draws_version": version,
                "format": int(parts[-1][1:])}
    except (IndexError, ValueError):
        return None


def test_the_cache_lists_what_the_earlier_reader_listed_and_says_what_it_leaves_out(
        tmp_path, monkeypatch):
    """A cache folder of table names as rmtbase writes them (shipped storages, draws versions)
    and stray files: the listing has every table the positional reader read, with the same
    keys, and names each file it leaves out with its reason."""
    from rmtbase.baseline import cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    written = [cache.table_filename(d, dh, ensemble="lowrank", stats=stats, draws=n, seed=s,
                                    dtype="float32", storage=storage)
               for d, dh, stats, n, s, storage in (
                   (768, 64, "spectral", 2000, 0, "float32"),
                   (576, 64, "spectral", 1000, 5, "q4_1"),
                   (1024, 256, "all", 10, 0, "q5_0"),
                   (1024, 256, "elementwise", 10, 0, "q5_0"),
                   (64, 16, "all", 500, 1, "bfloat16"),
                   (256, 64, "all", 200, 0, "fp8_e4m3"))]
    assert "lowrank-d576-dh64-spectral-n1000-seed5-float32-q4_1-v1.nc" in written
    stray = ["lowrank-d064-dh16-all-n500-seed0-float32-v1.nc",
             "lowrank-d64-dh16-most-n500-seed0-float32-v1.nc",
             "lowrank-d64-dh16-all-n500-seed0-float32-nosuchformat-v1.nc"]
    for name in written + stray:
        (tmp_path / name).write_bytes(b"")
    entries, left_out = cache.cached_entries(tmp_path)
    assert sorted(e["file"].name for e in entries) == sorted(written)
    for e in entries:
        old = _positional(e["file"].name)
        assert old is not None and {k: e[k] for k in old} == old, e["file"].name
    reasons = {p.name: why for p, why in left_out}
    assert set(reasons) == set(stray)
    assert "not the spelling rmtbase writes" in reasons[stray[0]]
    assert "statistics 'most'" in reasons[stray[1]]
    assert "storage 'nosuchformat' is not registered" in reasons[stray[2]]


def test_a_storage_named_like_a_draws_version_is_refused():
    """``-dv<n>`` ends a name with a draws version: a storage spelled so could not be read
    back, and is refused when the record is built."""
    from rmtbase.errors import InputError

    for storage in ("dv2", "my-dv10"):
        with pytest.raises(InputError, match="draws version"):
            TableName("lowrank", 64, 16, "all", 10, 0, "float32", storage=storage)
    assert TableName("lowrank", 64, 16, "all", 10, 0, "float32", storage="dvx").storage == "dvx"
