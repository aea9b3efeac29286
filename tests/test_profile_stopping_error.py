"""The profile null's stopping rule keeps its stated error (rmtbase.scoring.profile.stopping):
one interval event per head and axis, and a simulated rate of decisions at the stop that
differ from those on all the draws within ε."""

from __future__ import annotations

import numpy as np

from rmtbase.scoring.profile import stopping as ps
from rmtbase.scoring.profile.factors import FACTOR_AXES

A = len(FACTOR_AXES)


def _problem(rng, layers=2, heads=6, n=4000):
    """Null draws of the four axes (a continuous law, numpy's normals: an independent
    computation), heads from the null law, and in half the problems one head's axis (or its
    unaligned value) placed where its two-sided p (≈ 0.0007–0.01) is near BH's first
    thresholds over 12 heads (0.05/12 = 0.004), where a decision can be open."""
    draws = {a: rng.standard_normal(n) for a in FACTOR_AXES}
    values = rng.standard_normal((layers, heads, A))
    unaligned = rng.standard_normal((layers, heads))
    if rng.uniform() < 0.5:
        far = rng.uniform(2.6, 3.4) * rng.choice([-1.0, 1.0])
        where = (rng.integers(layers), rng.integers(heads))
        if rng.uniform() < 0.8:
            values[where + (rng.integers(A),)] = far
        else:
            unaligned[where] = far
    return draws, values, unaligned


def _decisions(values, unaligned, draws, alpha=0.05):
    """Profile flags (layer, head, axis), head flags (p_A alone) and unaligned flags at these
    draws, by the functions a score uses."""
    from rmtbase.decision.combined import DECISION_AXES, axes_p, combined_p
    from rmtbase.decision.significance import benjamini_hochberg
    from rmtbase.scoring.profile.axes import _against

    prof = np.stack([benjamini_hochberg(_against(values[..., j], draws[a]).p, alpha)[0]
                     for j, a in enumerate(FACTOR_AXES)], -1)
    pick = [FACTOR_AXES.index(a) for a in DECISION_AXES]
    p_a, _ = axes_p(values[..., pick], np.stack([draws[a] for a in DECISION_AXES], -1))
    head = benjamini_hochberg(combined_p(np.full(p_a.shape, np.nan), p_a)[0], alpha)[0]
    un = benjamini_hochberg(_against(unaligned, draws["symmetry"]).p, alpha)[0]
    return prof, head, un


def test_a_profile_flag_and_p_a_read_one_interval_per_axis(monkeypatch):
    """interval_level divides ε by heads · (axes + 2) · looks: that holds only while the
    profile flag's bracket of an axis and p_A's bracket of the same axis are one event (the
    same draws, values, N and level: the same numbers). Counted here on the calls
    open_heads makes: 2·axes + 1 brackets, axes + 1 distinct (the unaligned one its own)."""
    rng = np.random.default_rng(11)
    draws, values, unaligned = _problem(rng, n=1000)
    calls, real = [], ps.tail_p_bounds

    def spy(model, v, n_final, level):
        out = real(model, v, n_final, level)
        calls.append((model.x.tobytes(), np.asarray(v, np.float64).tobytes(), n_final, level,
                      out[0].tobytes(), out[1].tobytes()))
        return out

    monkeypatch.setattr(ps, "tail_p_bounds", spy)
    level = ps.interval_level(values.shape[0] * values.shape[1], A, True, 3)
    ps.open_heads(values, np.full(values.shape[:2], np.nan), {"s": draws},
                  {"s": list(range(values.shape[0]))}, n_final=4000, alpha=0.05, level=level,
                  unaligned=unaligned)
    assert len(calls) == 2 * A + 1
    inputs = {c[:4] for c in calls}
    assert len(inputs) == A + 1  # each axis's bracket asked twice with the same inputs
    assert len({c for c in calls}) == A + 1  # ... and the same numbers both times
    from rmtbase.scoring.stopping.rule import STOP_ERROR

    assert level == STOP_ERROR / (12 * (A + 2) * 3)


def test_decisions_at_the_stop_are_those_of_all_the_draws_by_simulation():
    """60 seeded problems (12 heads, 4 axes and the unaligned flag, N = 4,000 draws, schedule
    500 → 1,000 → 2,000 → 4,000; the stop decided by ps.settle itself): the rate at which some
    decision at the stop differs from the decision on all 4,000 is at most ε = 0.1 (asserted
    with 3 binomial se of slack: ≤ 0.1 + 3·0.039). Not vacuous: the rule stops before 4,000
    in a fifth of the problems or more, and stopping at 500 whatever the heads (no rule)
    gives differing decisions in some, so the simulation sees a rule that stops too soon."""
    schedule, eps, reps = (500, 1000, 2000, 4000), 0.1, 60
    rng = np.random.default_rng(59)
    wrong = {"rule": 0, "no rule": 0}
    stops = []
    for _ in range(reps):
        draws, values, unaligned = _problem(rng)
        full = _decisions(values, unaligned, draws)
        groups = {"s": list(range(values.shape[0]))}

        def draw(s, n, _d=draws):
            return {a: v[:n] for a, v in _d.items()}

        heads = ps.Heads(values, np.full(values.shape[:2], np.nan), groups, unaligned)
        nulls, size = ps.settle(heads, draw, {"s": schedule[0]}, alpha=0.05, schedule=schedule,
                                error=eps)
        stops.append(size["s"])
        for how, at in (("rule", nulls["s"]), ("no rule", draw("s", schedule[0]))):
            got = _decisions(values, unaligned, at)
            wrong[how] += int(any(not np.array_equal(g, f) for g, f in zip(got, full, strict=True)))
    stops = np.array(stops)
    print(f"differing decisions: {wrong}; stops {np.unique(stops, return_counts=True)}")
    assert wrong["rule"] / reps <= eps + 3 * np.sqrt(eps * (1 - eps) / reps)
    assert np.mean(stops < schedule[-1]) >= 0.2
    assert wrong["no rule"] > 0


def test_looks_count_the_sizes_where_intervals_are_made():
    """From 2,000 on the schedule makes intervals at every size but the last (where the p
    are exact); a start between sizes makes one at the start; a start at the end none (one
    counted, the least the level divides by). Never later than a fixed rule
    (2,000, 6,000, 18,000 at ε / (heads · (2·axes + 2) · 3)): its sizes are all in the
    schedule and the level is at least its level, so at each of them the open heads are a
    subset of its open heads (narrower intervals; BH monotone)."""
    from rmtbase.scoring.stopping.rule import STOP_ERROR

    assert ps.looks_from(ps.SCHEDULE[0]) == len(ps.SCHEDULE) - 1
    assert ps.looks_from(ps.SCHEDULE[1] + 250) == len(ps.SCHEDULE) - 2
    assert ps.looks_from(ps.SCHEDULE[-1]) == 1
    assert ps.SCHEDULE == tuple(sorted(ps.SCHEDULE)) and all(n % 250 == 0 for n in ps.SCHEDULE)
    assert {2000, 6000, 18000} <= set(ps.SCHEDULE) and ps.SCHEDULE[0] == 2000
    for heads in (1, 72, 270):
        before = STOP_ERROR / (heads * (2 * A + 2) * 3)
        for unaligned in (True, False):
            now = ps.interval_level(heads, A, unaligned, ps.looks_from(ps.SCHEDULE[0]))
            assert now >= before * (1 - 1e-12), (heads, unaligned)
