"""A new element statistic is one record that owns its estimator.

The toy statistic ``toy_peak`` = max|w| / mean|w| is added as ONE :class:`Statistic` record
whose :class:`Estimator` declares its two per-tile accumulators — max|w| (range pass, combined
by max) and Σ|w| (count pass, combined by sum) — and its finish. The tile engine
(``stats.tiles``) merges them by asking these records, so the statistic comes out of
``tile_stats`` and ``one_tile`` with nothing else edited; and a run that needs it is refused
before any layer is read, because no shipped table holds it.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.errors import InputError
from rmtbase.stats.estimator import Accumulator, Estimator
from rmtbase.stats.statistic import STATISTICS, Statistic, element_names
from rmtbase.stats.tiles import one_tile, tile_stats


def _toy_range(w, storage):
    return {"toy_amax": jnp.max(jnp.abs(w))}


def _toy_count(w, geo, n, storage, side):
    return {"toy_sabs": jnp.sum(jnp.abs(w))}


def _toy_finish(acc, geo, n, trims, storage):
    return {"toy_peak": acc["toy_amax"] / (acc["toy_sabs"] / n)}


TOY_ESTIMATOR = Estimator(
    "toy", statistics=("toy_peak",),
    accumulators=(Accumulator("toy_amax", "max"), Accumulator("toy_sabs", "sum")),
    range=_toy_range, count=_toy_count, finish=_toy_finish)

TOY = Statistic("toy_peak", "element", "max |w| over mean |w|", "1", "max|w| / (sum|w| / N)",
                effect="ratio", estimator=TOY_ESTIMATOR)

WITH_TOY = (*STATISTICS, TOY)


def _matrix():
    """A 240×50 Student-t matrix whose largest |w| lies in the last of 6 row tiles (so a
    merge that added the tiles' maxima, or kept the first, would be wrong)."""
    w = np.random.default_rng(5).standard_t(4, size=(240, 50)).astype(np.float32)
    w[230, 7] = 40.0
    return w


def _tiled(w, statistics, rows=40):
    n_tiles = w.shape[0] // rows
    return tile_stats(lambda t: jnp.asarray(w[t * rows:(t + 1) * rows]), n_tiles, w.size,
                      trims=(0.8,), statistics=statistics)


def test_one_record_is_computed_tile_by_tile():
    """float32 sums of 12,000 |w| (the host sums in float64, one reduction in one_tile):
    relative 1e-5 against the float64 reference."""
    w = _matrix()
    a = np.abs(w.astype(np.float64))
    want = a.max() / a.mean()
    tiled = _tiled(w, WITH_TOY)
    whole = jax.jit(lambda x: one_tile(x, (0.8,), "float32", statistics=WITH_TOY))(
        jnp.asarray(w.reshape(-1)))
    assert float(tiled["toy_peak"]) == pytest.approx(want, rel=1e-5)
    assert float(whole["toy_peak"]) == pytest.approx(want, rel=1e-5)
    # the registry's statistics are unchanged beside it (other compiled programs: float32
    # rounding of the same sums)
    plain = _tiled(w, STATISTICS)
    assert "toy_peak" not in plain
    for k in ("mean", "std", "excess_kurtosis", "entropy", "max_over_q99"):
        assert float(tiled[k]) == pytest.approx(float(plain[k]), rel=1e-6, abs=1e-7), k


def test_the_merge_is_the_records():
    """The same accumulator declared with another combine gives another statistic: the engine
    merges by the record, not by the accumulator's name."""
    w = _matrix()
    summed = dataclasses.replace(TOY_ESTIMATOR, accumulators=(
        Accumulator("toy_amax", "sum"), Accumulator("toy_sabs", "sum")))
    toy_sum = dataclasses.replace(TOY, estimator=summed)
    a = np.abs(w.astype(np.float64))
    tile_max_sum = sum(a[r:r + 40].max() for r in range(0, 240, 40))
    got = float(_tiled(w, (*STATISTICS, toy_sum))["toy_peak"])
    assert got == pytest.approx(tile_max_sum / a.mean(), rel=1e-5)
    assert got > 2 * a.max() / a.mean()


def test_an_undeclared_accumulator_or_estimator_is_refused():
    w = _matrix()
    undeclared = dataclasses.replace(TOY_ESTIMATOR, accumulators=(Accumulator("toy_sabs"),))
    with pytest.raises(InputError, match="toy_amax"):
        _tiled(w, (*STATISTICS, dataclasses.replace(TOY, estimator=undeclared)))
    with pytest.raises(InputError, match="twice"):
        twice = dataclasses.replace(TOY_ESTIMATOR, accumulators=(
            Accumulator("toy_amax", "max"), Accumulator("toy_sabs"), Accumulator("s1")))
        _tiled(w, (*STATISTICS, dataclasses.replace(TOY, estimator=twice)))
    with pytest.raises(InputError, match="does not compute it"):
        Statistic("toy_peak", "element", "x", "1", "x")  # no estimator: the fused one lacks it
    with pytest.raises(InputError, match="sum, min or max"):
        Accumulator("x", "mean")


def test_a_run_that_needs_it_is_refused_before_any_layer(monkeypatch):
    """The toy record in the registry (ELEMENT_STATS re-derived from it): score refuses in one
    line naming the command that rebuilds MiniLM's tables, before any weight is read."""
    import rmtbase.models as models
    import rmtbase.stats as stats
    from rmtbase.errors import TableError
    from rmtbase.scoring.score import score_model

    monkeypatch.setattr(stats, "ELEMENT_STATS", element_names(WITH_TOY))
    read = []
    real = models.load_heads

    def counted(*args, **kwargs):
        for lh in real(*args, **kwargs):
            read.append(int(lh.layer))
            yield lh

    monkeypatch.setattr(models, "load_heads", counted)
    with pytest.raises(TableError) as exc:
        score_model(progress=False, draws=200)
    line = str(exc.value)
    assert "\n" not in line and "qk_toy_peak" in line
    assert "python sims/make_shipped_tables.py --stats all" in line
    assert read == []
