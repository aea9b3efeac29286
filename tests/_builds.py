"""Comparing two builds of one result: every value and attribute but when and by what it was
made (``creation_time``, ``created``, ``history``, ``computed_by`` and their ``baseline_``
copies), which two correct builds may differ in (a second boundary between them)."""

from __future__ import annotations

#: Attributes that say when or by which run a result was made, not what it holds.
MAKING = frozenset({"creation_time", "created", "history", "computed_by"})


def _making(key) -> bool:
    return str(key).removeprefix("baseline_") in MAKING


def without_making(ds):
    """A copy of Dataset ``ds`` without the :data:`MAKING` attributes (its own and its
    variables')."""
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if not _making(k)}
    for v in ds.variables.values():
        v.attrs = {k: x for k, x in v.attrs.items() if not _making(k)}
    return ds


def assert_same_build(a, b) -> None:
    """``a`` and ``b`` identical but for the :data:`MAKING` attributes."""
    import xarray as xr

    # exact: callers compare two builds of one program on the same inputs
    xr.testing.assert_identical(without_making(a), without_making(b))
