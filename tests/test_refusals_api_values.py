"""Types checked, not coerced, in the null tables' public API as in the scores'
(``null_table(min_draws=2.7)`` drew 2 draws, ``min_draws=True`` served a 1-draw table); one
line, before any draw or cache read."""

from __future__ import annotations

import pytest

from rmtbase.errors import InputError


@pytest.mark.parametrize("kw, match", [
    ({"min_draws": 2.7}, "min_draws must be an integer"),
    ({"min_draws": True}, "min_draws must be an integer"),
    ({"min_draws": "100"}, "min_draws must be an integer"),
    ({"min_draws": 1}, "min_draws must be at least 2"),
    ({"seed": 1.5}, r"seed must be an integer in \[0, 2\*\*32\)"),
    ({"seed": -1}, r"seed must be an integer in \[0, 2\*\*32\)"),
    ({"seed": 2**70}, r"seed must be an integer in \[0, 2\*\*32\)"),
])
@pytest.mark.parametrize("fn", ["null_table", "lookup_table"])
def test_null_table_checks_draws_and_seed_before_any_draw(fn, kw, match, tmp_path, monkeypatch):
    import rmtbase.baseline.cache as cache

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))

    def no_work(*a, **k):
        raise AssertionError("the cache was read before the arguments were checked")

    monkeypatch.setattr(cache, "lookup_key", no_work)
    with pytest.raises(InputError, match=match) as info:
        getattr(cache, fn)(16, 4, stats="spectral", **kw)
    assert "\n" not in str(info.value)


def test_numpy_integers_are_integers(tmp_path, monkeypatch):
    import numpy as np

    from rmtbase.baseline.cache import table_key

    key = table_key(16, 4, min_draws=np.int64(300), seed=np.uint32(3))
    assert (key.min_draws, key.seed) == (300, 3)
    assert type(key.min_draws) is int and type(key.seed) is int


@pytest.mark.parametrize("window, match", [
    (3.7, "window must be an integer"), (True, "window must be an integer"),
    ("8", "window must be an integer"), (2, r"window must be at least 3 \(tokens\)"),
])
def test_probe_model_checks_its_window_before_reading(window, match, monkeypatch):
    """``probe_model(window=3.7)`` ran a 3-token window (``int(window)``), after loading."""
    import rmtbase.probe.run as run

    def no_work(*a, **k):
        raise AssertionError("the text or the model was read before the window was checked")

    monkeypatch.setattr(run, "read_text", no_work)
    monkeypatch.setattr(run, "load_model", no_work)
    with pytest.raises(InputError, match=match):
        run.probe_model("no/such/model", window=window, progress=False)
