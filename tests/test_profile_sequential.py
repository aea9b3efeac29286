"""The profile null drawn sequentially (rmtbase.scoring.profile.stopping): its count bounds
cover the count at the full size, a table is extended by its own continuation (draw i the
same in every length, whatever the cache holds), and every head the rule calls settled has
the decisions it has on all 18,000 draws — on MiniLM's heads (the shipped float32 null) and,
slow, on MiniLM's heads put through Q4_0 (its null drawn through the quantiser)."""

from __future__ import annotations

import numpy as np
import pytest

import rmtbase.scoring.profile.factors as fa
from rmtbase.scoring.profile import stopping as ps
from rmtbase.scoring.profile.cache import cached_profile_null
from rmtbase.stats.storage import FLOAT32


def test_count_bounds_cover_the_count_at_the_full_size():
    """k of the first n draws and K of all N, for a tail probability π: [lo, hi] from k must
    hold K in at least 1 − level of 20,000 replicates (seeded; level 0.05, so the rate's
    binomial se is 0.0015 and a miss rate above 0.05 + 4 se = 0.056 fails), at π from the far
    tail (0.002: counts near 0, where the binomial is most skewed) to the middle (0.3)."""
    rng = np.random.default_rng(7)
    n, big, level, reps = 500, 4500, 0.05, 20_000
    for pi in (0.002, 0.02, 0.3):
        k = rng.binomial(n, pi, reps)
        total = k + rng.binomial(big - n, pi, reps)
        lo, hi = ps.count_bounds(k, k, n, big, level)
        miss = np.mean((total < lo) | (total > hi))
        assert miss <= level + 4 * np.sqrt(level * (1 - level) / reps), (pi, miss)
        assert np.all(lo >= k) and np.all(hi <= k + big - n)  # within what is possible
    lo, hi = ps.count_bounds(np.array([3.0]), np.array([5.0]), 100, 100, level)
    assert (lo[0], hi[0]) == (3.0, 5.0)  # exact: nothing left to draw, the counts are given


def test_a_table_grows_by_its_continuation(monkeypatch, tmp_path):
    """Draw i is the same in every length: 300 read from a cached 800, 800 drawn on from a
    cached 300 (only draws 300.. are drawn), equal to one direct draw of 800 — float32 and a
    block format (Q8_0, its own compiled loop)."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    for storage in ("float32", "q8_0"):
        direct = fa.profile_null(64, 16, storage, n=800, seed=5)
        part = fa.profile_null(64, 16, storage, n=800, seed=5, start=300)
        small = cached_profile_null(64, 16, storage, n=300, seed=5)
        starts = []
        real = fa.profile_null
        def spy(*a, start=0, _starts=starts, _real=real, **k):
            _starts.append(start)
            return _real(*a, start=start, **k)

        monkeypatch.setattr(fa, "profile_null", spy)
        grown = cached_profile_null(64, 16, storage, n=800, seed=5)
        again = cached_profile_null(64, 16, storage, n=300, seed=5)  # now read from the 800
        monkeypatch.setattr(fa, "profile_null", real)
        assert starts == [300], storage
        for a in fa.FACTOR_AXES:
            # exact: the same compiled chunk programs on the same keys in one process; the
            # cache stores these float32 values losslessly
            np.testing.assert_array_equal(grown[a], direct[a], err_msg=a)
            np.testing.assert_array_equal(part[a], direct[a][300:], err_msg=a)  # exact: as above
            np.testing.assert_array_equal(small[a], direct[a][:300], err_msg=a)  # exact: as above
            np.testing.assert_array_equal(again[a], direct[a][:300], err_msg=a)  # exact: as above


def _decisions(values, p_stats, draws: dict, alpha=0.05):
    """(profile flags (layer, head, axis), head flags) at these draws, by the functions a
    score uses (rmtbase.scoring.profile.axes, rmtbase.decision.combined)."""
    from rmtbase.decision.combined import DECISION_AXES, axes_p, combined_p
    from rmtbase.decision.significance import benjamini_hochberg
    from rmtbase.scoring.profile.axes import _against

    prof = np.stack([benjamini_hochberg(_against(values[..., j], draws[a]).p, alpha)[0]
                     for j, a in enumerate(fa.FACTOR_AXES)], -1)
    pick = [fa.FACTOR_AXES.index(a) for a in DECISION_AXES]
    p_a, _ = axes_p(values[..., pick], np.stack([draws[a] for a in DECISION_AXES], -1))
    return prof, benjamini_hochberg(combined_p(p_stats, p_a)[0], alpha)[0]


def _settled_heads_keep_their_decisions(values, null):
    """At each size of the schedule below 18,000: the heads :func:`ps.open_heads` calls settled
    have the decisions of all 18,000; some are settled (else the claim is empty). p_S: none
    (the axes alone), then seeded uniform p (Bonferroni and BH beside the statistics)."""
    rng = np.random.default_rng(3)
    shape = values.shape[:2]
    settled_seen = 0
    for p_stats in (np.full(shape, np.nan), rng.uniform(size=shape)):
        full = _decisions(values, p_stats, null)
        for n in ps.SCHEDULE[:-1]:
            first = {a: v[:n] for a, v in null.items()}
            level = ps.interval_level(shape[0] * shape[1], len(fa.FACTOR_AXES), False,
                                      ps.looks_from(ps.SCHEDULE[0]))
            open_ = ps.open_heads(values, p_stats, {"s": first}, {"s": list(range(shape[0]))},
                                  n_final=ps.SCHEDULE[-1], alpha=0.05, level=level)
            got = _decisions(values, p_stats, first)
            ok = ~open_
            settled_seen += int(ok.sum())
            np.testing.assert_array_equal(got[0][ok], full[0][ok])  # exact: boolean flags
            np.testing.assert_array_equal(got[1][ok], full[1][ok])  # exact: boolean flags
            if not open_.any():  # the rule stops here: every decision that of the 18,000
                np.testing.assert_array_equal(got[0], full[0])  # exact: boolean flags
                np.testing.assert_array_equal(got[1], full[1])  # exact: boolean flags
    assert settled_seen > 0


def _minilm_values(storage=None):
    from rmtbase.models import default_model_path, load_heads

    out = []
    for h in load_heads(default_model_path()):
        wq, wk = np.asarray(h.wq, np.float32), np.asarray(h.wk, np.float32)
        if storage is not None:
            from rmtbase.stats.precision import round_trip

            wq, wk = (np.asarray(round_trip(w, storage)) for w in (wq, wk))
        prof = fa.factor_profile(wq, wk)
        out.append(np.stack([prof[a] for a in fa.FACTOR_AXES], -1))
    return np.stack(out)


def test_settled_heads_keep_their_decisions_on_minilm(monkeypatch, tmp_path):
    """MiniLM's 72 heads against the shipped 18,000-draw float32 null (read, not drawn)."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    _settled_heads_keep_their_decisions(_minilm_values(), cached_profile_null(384, 32))


@pytest.mark.slow
def test_settled_heads_keep_their_decisions_on_minilm_in_q4_0(monkeypatch, tmp_path):
    """MiniLM's heads through the Q4_0 round trip against the Q4_0 null's 18,000 draws
    (through the quantiser: ~10 s of CPU)."""
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    null = fa.profile_null(384, 32, "q4_0", n=ps.SCHEDULE[-1])
    _settled_heads_keep_their_decisions(_minilm_values("q4_0"), null)


def test_the_draws_used_do_not_depend_on_the_cache(monkeypatch, tmp_path):
    """Random 64 × 16 heads: the draws :func:`ps.sequential_nulls` uses, and their number, are
    the same on an empty cache and on one that holds a longer table of the shape; the
    schedule ends at PROFILE_DRAWS."""
    import jax
    import xarray as xr

    assert ps.SCHEDULE[-1] == fa.PROFILE_DRAWS
    wq, wk = (np.asarray(jax.random.normal(k, (3, 4, 16, 64)), np.float32)
              for k in jax.random.split(jax.random.key(1)))
    profiles = [fa.factor_profile(wq[i], wk[i]) for i in range(3)]
    ds = xr.Dataset({"head_p_value": (("layer", "head"), np.full((3, 4), 0.5))})
    got = []
    for cache in ("empty", "full"):
        monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / cache))
        if cache == "full":
            cached_profile_null(64, 16, "float32", n=ps.SCHEDULE[1] + 250, seed=0)
        got.append(ps.sequential_nulls(ds, profiles, ["bfloat16"] * 3, 64, 16, alpha=0.05,
                                       seed=0))
    (a, used_a), (b, used_b) = got
    assert used_a == used_b and set(used_a) == {FLOAT32}  # keyed by the null storage's record
    assert used_a[FLOAT32] in ps.SCHEDULE
    for axis in fa.FACTOR_AXES:
        assert a[FLOAT32][axis].shape == (used_a[FLOAT32],)
        # exact: the same draws (a prefix of the longer table is draw for draw the shorter)
        np.testing.assert_array_equal(a[FLOAT32][axis], b[FLOAT32][axis])
