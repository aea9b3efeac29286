"""The C heap given back after a search or a score (:mod:`rmtbase.files.heap`).

Freed memory inside glibc's heap stays resident until ``malloc_trim``: a search on SmolLM2 kept
about 1.3 GiB of it (``benchmarks/patching.py --memory`` measures the whole search). Here:
the binding releases such memory, and the public functions that do the work call it once they
return or raise."""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest
import xarray as xr

from rmtbase.errors import InputError
from rmtbase.files import heap

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_trim_returns_freed_heap_memory():
    """~290 MiB in 100 kB pieces (under glibc's mmap threshold: inside its heap), every eighth
    kept so the free ones are holes the heap cannot shrink past: resident until the trim,
    which gives back at least half of them."""
    heap.trim()
    pieces = [np.ones(100_000 // 8) for _ in range(3000)]
    allocated = sum(p.nbytes for p in pieces) / 2**20
    kept = pieces[::8]
    del pieces
    before = _rss_mib()
    assert heap.trim() is True
    after = _rss_mib()
    freed = allocated * 7 / 8
    assert before - after > freed / 2, (before, after, freed)
    assert len(kept) == 375


def test_without_malloc_trim_it_does_nothing(monkeypatch):
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.trim() is False


@pytest.fixture
def trims(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "trim", lambda: calls.append(1) or True)
    return calls


def test_find_circuits_trims_once_it_returns(monkeypatch, trims):
    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.head import find as F
    from rmtbase.circuits.head import run as R

    found = xr.Dataset(attrs={"found": 1})
    monkeypatch.setattr(F, "check_composition", lambda comp: None)
    monkeypatch.setattr(R, "run_circuits", lambda model, comp, search, progress: found)
    comp = xr.Dataset(coords={"layer_to": [0, 1], "head_to": [0, 1]})
    assert find_circuits("model", comp) is found
    assert trims == [1]


@pytest.mark.parametrize("call", ["score_model", "composition", "find_circuits"])
def test_the_public_functions_trim_when_they_raise(call, trims):
    import rmtbase
    from rmtbase.circuits import find_circuits

    function = find_circuits if call == "find_circuits" else getattr(rmtbase, call)
    with pytest.raises((InputError, TypeError, ValueError)):
        if call == "find_circuits":
            function("model", xr.Dataset(), k=0)
        else:
            function("model", seed=-1)
    assert trims == [1]
