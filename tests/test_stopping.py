"""The stopping rule of the spectral null's extension (rmtbase.scoring.stopping.rule): settled heads
stop the drawing at the first table with the flags of the long extension; an open decision
extends; the error is stated."""

from __future__ import annotations

import numpy as np
import pytest
from _checkpoints import trajectory
from scipy import stats as st

from rmtbase.scoring.heads.stopping_text import open_reasons, tail_counts
from rmtbase.scoring.stopping.rule import (
    STOP_ERROR,
    looks,
    next_size,
    p_interval,
    sizes_after,
    unsettled,
)

KW = dict(stats="spectral", progress=False, spectrum_draws=0)


def test_looks_counts_the_tables_of_the_schedule():
    sizes = [1000, *sizes_after(1000, 100_000)]
    assert sizes == [1000, 1500, 2000, 3000, 4000, 6000, 8000, 10_000, 15_000, 20_000, 30_000,
                     40_000, 60_000, 80_000, 100_000]
    assert looks(1000, 100_000) == len(sizes) == 15
    assert looks(4000, 100_000) == 11  # 4000, 6000, ..., 100000
    assert looks(2500, 100_000) == 13  # a size off the ladder goes to its next rung: 3000
    assert next_size(2500, 100_000) == 3000 and next_size(80_000, 90_000) == 90_000
    # small tables: whole sizes, always above n (1.5 draws is not a size)
    assert [next_size(n, 100) for n in (0, 1, 2, 3, 5, 9)] == [1, 2, 3, 4, 6, 10]
    assert looks(1, 20) == 9  # 1, 2, 3, 4, 6, 8, 10, 15, 20
    assert looks(100_000, 100_000) == 1


def test_p_interval_is_clopper_pearson_doubled():
    ref = np.arange(1000, dtype=float)
    lo, hi = p_interval(np.array([994.5, 2000.0, np.nan]), ref, 0.01)
    # 5 draws at or beyond 994.5 on its nearer side, 0 beyond 2000
    assert lo[0] == pytest.approx(2 * st.beta.ppf(0.005, 5, 996))
    assert hi[0] == pytest.approx(2 * st.beta.ppf(0.995, 6, 995))
    assert lo[1] == 0 and hi[1] == pytest.approx(2 * (1 - 0.005 ** (1 / 1000)))
    assert np.isnan(lo[2]) and np.isnan(hi[2])


def _synthetic(values, n=4000, seed=0):
    """Heads with one spectral statistic (qk.npr, σ-free) against N(0, 1) null draws."""
    rng = np.random.default_rng(seed)
    joint = {"qk.npr": rng.standard_normal(n), "q.rms": np.ones(n), "k.rms": np.ones(n)}
    v = np.asarray(values, dtype=float).reshape(1, -1)
    vals = {"qk.npr": v, "q.rms": np.ones_like(v), "k.rms": np.ones_like(v)}
    return [(None, joint, None)], vals


def test_heads_beyond_every_draw_or_in_the_bulk_are_settled():
    groups, vals = _synthetic([9.0, 10.0, 11.0, 0.1, -0.3, 0.5, 1.0, -1.2])
    open_ = unsettled(groups, vals, ["qk.npr"], alpha=0.05, n_looks=4)
    assert not open_.any()


def test_a_head_at_its_threshold_is_open():
    """One head whose p sits at alpha / heads (what it alone needs): its Clopper-Pearson
    interval straddles the threshold, so more draws could change its flag."""
    m = 8
    z = st.norm.isf(0.05 / m / 2)  # two-sided p = alpha / m
    groups, vals = _synthetic([z] + [0.1 * i for i in range(m - 1)])
    open_ = unsettled(groups, vals, ["qk.npr"], alpha=0.05, n_looks=4)
    assert open_[0, 0] and open_.sum() == 1
    # with a smaller stated error the intervals widen: still open
    assert unsettled(groups, vals, ["qk.npr"], alpha=0.05, n_looks=4,
                     error=STOP_ERROR / 10)[0, 0]


def test_open_heads_are_named_with_the_statistic_that_keeps_them_open():
    """tail_counts counts the draws at or beyond each head on its nearer side (checked by a
    plain comparison loop); open_reasons names each open head's statistic with the fewest."""
    m = 8
    z = st.norm.isf(0.05 / m / 2)
    groups, vals = _synthetic([z, 9.0, -0.3] + [0.1 * i for i in range(m - 3)])
    vals["qk.npr"][0, 2] = np.nan
    counts, total = tail_counts(groups, vals, ["qk.npr"])
    ref = groups[0][1]["qk.npr"]
    for h, v in enumerate(vals["qk.npr"][0]):
        want = ref.size if np.isnan(v) else min(int((ref <= v).sum()), int((ref >= v).sum()))
        assert counts["qk.npr"][0, h] == want and total[0, h] == ref.size
    assert counts["qk.npr"][0, 1] == 0
    open_ = np.zeros((1, m), dtype=bool)
    open_[0, 0] = True
    k0 = int(counts["qk.npr"][0, 0])
    assert 0 < k0 < 20
    assert open_reasons(open_, counts, total) == \
        f"layer 0 head 0: qk.npr {k0} of 4000 draws at or beyond"
    beyond = np.zeros_like(open_)
    beyond[0, 1] = True
    assert open_reasons(beyond, counts, total) == "layer 0 head 1: qk.npr beyond all 4000 draws"
    every = np.ones_like(open_)
    assert open_reasons(every, counts, total, limit=2).endswith(f"; {m - 2} more")


@pytest.fixture(scope="module")
def planted(tmp_path_factory, score_cache):
    return trajectory(tmp_path_factory.mktemp("stop"), strengths=(0.0, 6.0))


@pytest.mark.slow
def test_planted_heads_stop_at_the_first_table_with_the_long_extensions_flags(planted):
    """Every head of the strongly planted checkpoint lies beyond every draw: the rule stops at
    the first table (1000 draws), with the same flags as the extension forced to 5,000."""
    from rmtbase.scoring.score import score_model

    short = score_model(str(planted[1]), draws=1000, **KW)
    long = score_model(str(planted[1]), draws=1000, max_draws=5_000, **KW)
    assert int(short["null_draws"].max()) == 1000
    assert int(long["null_draws"].max()) == 5_000
    assert short["head_flag"].all() and (short["head_flag"] == long["head_flag"]).all()
    assert short.attrs["stop_rule"] == "decision" and short.attrs["stop_error"] == STOP_ERROR
    assert "settled with 1000 spectral null draws" in short.attrs["stopping_note"]
    assert "--max-draws" in short.attrs["stopping_note"]


def test_open_decisions_extend(planted, capsys, monkeypatch, tmp_path):
    """With 300 draws the p floor (2/301) is above alpha/heads: the planted heads' decisions
    are open, and the null is extended until they settle."""
    from rmtbase.scoring.score import score_model

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))  # no larger table cached by others
    ds = score_model(str(planted[1]), draws=300, **dict(KW, progress=True))
    assert int(ds["null_draws"].max()) > 300
    err = capsys.readouterr().err
    assert "decisions are not settled (layer " in err and "; extending the spectral null" in err
    assert ds["head_flag"].all()
    assert "settled with" in ds.attrs["stopping_note"]


@pytest.mark.slow
def test_minilm_settles_at_the_shipped_table_with_the_flags_of_100000_draws():
    """The trained default model: every head beyond every draw, settled at the shipped
    4,000-draw spectral table with the same 72 flags as the extension forced to 100,000."""
    from rmtbase.scoring.score import score_model

    short = score_model(None, progress=False, spectrum_draws=0)
    long = score_model(None, progress=False, spectrum_draws=0, max_draws=100_000)
    assert short.attrs["spectral_null_draws"] == 4000
    assert long.attrs["spectral_null_draws"] == 100_000
    assert int(short["head_flag"].sum()) == 72
    assert (short["head_flag"] == long["head_flag"]).all()
