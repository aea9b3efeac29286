"""No p or q is 0, and an axis's p is of the same standing as the head's.

On SmolLM2 the composition tail (the Beta law's survival function) underflowed to exactly 0.0
for 2,204 pairs, and the report printed ``p 0``, ``q 0``; a profile axis's p was add-one and
stopped at 1/(1 + 18,000) = 5.6·10⁻⁵ beside a head p of 10⁻¹⁵ from the same axes' GPD tails.
"""

from __future__ import annotations

import numpy as np

from rmtbase.decision.tails import P_MIN


def _null_scores(n: int, seed: int) -> np.ndarray:
    """Sorted composition scores s of the exact reduced null at (64, 8) (float64)."""
    import jax

    from rmtbase.baseline.composition_null import null_squares

    s2 = np.asarray(null_squares(jax.random.key(seed), 64, 8, 8, n), np.float64)
    return np.sort(np.sqrt(s2))


def test_composition_p_and_q_are_never_zero_far_beyond_the_draws():
    """Scores up to 1 (the largest a score can be; s ≈ 0.17 is the null's median at 64 × 8)
    against 2,000 null draws: every p beyond the draws is ≥ P_MIN and below the add-one p that
    10 draws beyond would give (the tail model's own conservative GPD, not an add-one floor),
    every q ≥ p > 0, and the p-values stay ordered with the score (non-increasing). Before:
    the Beta survival function gave exactly 0 at s = 1."""
    from rmtbase.scoring.composition.dataset import assemble

    null = _null_scores(2000, 7)
    n_l, n_h = 3, 4
    rng = np.random.default_rng(56)
    comp = np.full((3, n_l, n_h, n_l, n_h), np.nan)
    for a in range(n_l):
        for b in range(a + 1, n_l):
            comp[:, a, :, b, :] = rng.uniform(null[-1], 1.0, (3, n_h, n_h))
    comp[0, 0, 0, 1, 0] = 1.0
    norms = {"qk": np.ones((n_l, n_h)), "ov": np.ones((n_l, n_h))}
    ds = assemble(comp, np.zeros((n_l, n_h, n_h)), norms, null,
                  attrs={"d": 64, "d_h": 8, "draws": 2000})
    ok = np.isfinite(comp)
    pt = ds["composition_p_tail"].values[ok]
    q = ds["composition_q"].values[ok]
    assert pt.size == 3 * 3 * n_h * n_h
    assert np.all(pt >= P_MIN) and np.all(pt < 11 / 2001), (pt.min(), pt.max())
    assert np.all(q >= pt) and np.all(q > 0)
    order = np.argsort(comp[ok])
    assert np.all(np.diff(pt[order]) <= 0)


def test_a_p_at_the_floor_prints_as_a_bound_not_zero():
    """The report's two renderings of a p: the summary's fmt_p prints the floor as "<1e-16",
    the HTML tables print the number (never "0" for a p ≥ P_MIN)."""
    import pandas as pd

    from rmtbase.report.html import table_html
    from rmtbase.report.tables import fmt_p

    assert fmt_p(P_MIN) == "<1e-16"
    assert fmt_p(3e-7) == "3e-07"
    html = table_html(pd.DataFrame({"p": [P_MIN, 1e-300], "q": [2 * P_MIN, 0.5]}))
    cells = [c for c in html.split("<td")[1:]]
    assert all(">0<" not in c for c in cells), html
    assert ">1e-16<" in html


def test_an_axis_far_beyond_its_draws_has_a_tail_p_that_bounds_the_head_p():
    """A profile axis far beyond its 2,000 null draws: its p (profile.add_profile's _against)
    is below the add-one floor 1/(1 + N) = 5·10⁻⁴ (a GPD tail, as in the head decision) and
    ≥ P_MIN, and the axes' combined p_A (rmtbase.decision.combined.axes_p) is never below the
    smallest axis p: no axis at an add-one floor beside a head p far smaller."""
    from rmtbase.decision.combined import axes_p
    from rmtbase.scoring.profile.axes import _against

    rng = np.random.default_rng(3)
    draws = rng.standard_normal((2000, 4))
    heads = np.array([[12.0, 0.1, -0.2, 0.3], [0.0, 0.0, 0.0, 0.0], [-9.0, 8.0, 0.5, 0.0]])
    p_axis = np.stack([_against(heads[:, a], draws[:, a]).p for a in range(4)], -1)
    assert p_axis[0, 0] < 1.0 / 2001 and p_axis[0, 0] >= P_MIN
    assert p_axis[2, 0] < 1.0 / 2001 and p_axis[2, 1] < 1.0 / 2001
    p_a, _ = axes_p(heads, draws)
    assert np.all(p_a >= p_axis.min(axis=1)), (p_a, p_axis.min(axis=1))
    # the central head: add-one p of its own, not tail-extrapolated
    assert np.all(p_axis[1] > 0.5)
