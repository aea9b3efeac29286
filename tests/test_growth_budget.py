"""The growth budget (rmtbase.scoring.stopping.budget) and the undecided heads it leaves
(rmtbase.decision.undecided): the flags are BH over the upper ends of the p brackets, a budget
that bites stops the drawing and brackets the p of a longer run, and a budget that does not bite
leaves the decisions as they were."""

from __future__ import annotations

import numpy as np
import pytest
from _checkpoints import trajectory

from rmtbase.baseline.draw_cost import growth_seconds, seconds_per_draw
from rmtbase.decision.significance import benjamini_hochberg
from rmtbase.decision.undecided import bracket_flags, undecided_line
from rmtbase.errors import InputError
from rmtbase.scoring.stopping import budget as B
from rmtbase.scoring.stopping.rule import next_size

KW = dict(stats="spectral", progress=False, spectrum_draws=0, draws=300)


def test_budget_is_checked_on_both_sides():
    assert B.check_budget("auto") == "auto" and B.check_budget(None) is None
    assert B.check_budget(0) == 0.0 and B.check_budget(B.MAX_SECONDS) == B.MAX_SECONDS
    for bad in (-1, B.MAX_SECONDS + 1, "lots", True):
        with pytest.raises(InputError, match="growth_budget"):
            B.check_budget(bad)


def test_the_cli_holds_the_library_bounds():
    from rmtbase.cli.score_checks import BUDGET_SECONDS

    assert BUDGET_SECONDS == (B.MIN_SECONDS, B.MAX_SECONDS)


def test_auto_budget_is_twice_the_heads_measuring_at_least_the_floor():
    # 1,024 heads at (4096, 128): 2 × 1024 × the cost of one all-statistics draw
    big = 2 * 1024 * (13.1e-9 * 4096 ** 2 + 3.4e-3 + 1.38e-9 * 128 ** 3)
    assert B.budget_seconds("auto", 4096, 128, "all", 1024) == pytest.approx(big)
    assert B.budget_seconds("auto", 64, 16, "all", 8) == B.FLOOR
    assert B.budget_seconds(None, 64, 16, "all", 8) is None
    assert B.budget_seconds(12.5, 64, 16, "all", 8) == 12.5


def test_a_step_past_the_budget_is_refused_and_not_counted():
    b = B.GrowthBudget(seconds=1000 * seconds_per_draw(640, 64, "all"))
    assert b.afford(640, 64, "all", 1000, 1500)  # 500 draws
    assert not b.afford(640, 64, "all", 1500, 2100)  # 600 more: past 1,000
    assert b.afford(640, 64, "all", 1500, 2000)  # 500 more: exactly the budget
    assert b.spent == pytest.approx(growth_seconds(640, 64, "all", 1000, 2000))
    assert b.refused == [("all", 1500, 2100)] and b.bitten
    free = B.GrowthBudget(seconds=None)
    assert free.afford(4096, 128, "all", 0, 10 ** 6) and not free.bitten
    assert free.line() is None
    assert B.GrowthBudget(seconds=300).line().startswith("rmtbase: growth budget ≈ 5 CPU-min ")


def test_flags_are_bh_on_the_upper_ends_and_the_point_flags_off_the_undecided():
    """BH(p_hi) ⊆ BH(p) ⊆ BH(p_lo) for p_lo ≤ p ≤ p_hi: the flags (BH on the upper ends) are
    the point flags of every head not undecided, for random brackets with ties and NaN."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        p = rng.uniform(0, 0.2, n) ** rng.uniform(0.5, 3)
        lo = p * rng.uniform(0, 1, n) * (rng.uniform(size=n) < 0.7)
        hi = np.minimum(1, p + rng.exponential(0.02, n) * (rng.uniform(size=n) < 0.5))
        p[rng.uniform(size=n) < 0.05] = np.nan
        lo, hi = np.where(np.isnan(p), np.nan, lo), np.where(np.isnan(p), np.nan, hi)
        flag, undecided = bracket_flags(lo, hi, 0.05)
        point = benjamini_hochberg(p, 0.05)[0]
        # exact: booleans (BH flags)
        assert np.array_equal(flag, benjamini_hochberg(hi, 0.05)[0])
        # exact: booleans (BH flags)
        assert np.array_equal(flag, point & ~undecided)
        assert not (flag & undecided).any()
        # exact: booleans (BH flags)
        assert np.array_equal(undecided, benjamini_hochberg(lo, 0.05)[0] & ~flag)


@pytest.fixture(scope="module")
def weak(tmp_path_factory, score_cache):
    """A checkpoint whose 8 heads sit near their BH threshold: 300 spectral draws leave every
    decision open (the stopping rule would draw 30,000)."""
    return trajectory(tmp_path_factory.mktemp("budget"), strengths=(1.0,))[0]


def test_a_budget_that_bites_stops_the_drawing_and_brackets_a_longer_runs_p(weak):
    from rmtbase.scoring.score import score_model

    budget = 0.05  # CPU-s: 300 → 400 → 600 draws fit, 800 does not (model estimates)
    ds = score_model(str(weak), growth_budget=budget, **KW)
    n = 300  # the largest size of the ladder whose growth from 300 fits the budget
    while growth_seconds(64, 16, "spectral", 300, next_size(n, 10 ** 5)) <= budget:
        n = next_size(n, 10 ** 5)
    assert int(ds["null_draws"].max()) == n == 600  # no draw past the budget
    assert ds.attrs["growth_budget"] == budget
    assert ds.attrs["growth_budget_spent"] <= budget
    und = ds["head_undecided"].values
    assert ds.attrs["undecided_heads"] == int(und.sum()) > 0
    assert ds.attrs["undecided_draws"] == "spectral 600"
    assert not (ds["head_flag"].values & und).any()
    lo, hi = ds["head_p_lo"].values, ds["head_p_hi"].values
    assert np.all(np.isfinite(lo[und])) and np.all(np.isnan(lo[~und]))
    line = undecided_line(ds)
    assert line.startswith(f"{int(und.sum())} heads undecided at spectral 600 draws: p in [")
    # a longer run (about 4,000 draws): its p lies in each undecided head's bracket (each
    # bracket fails with probability at most STOP_ERROR = 0.01 in all)
    longer = score_model(str(weak), growth_budget=0.6, **KW)
    assert int(longer["null_draws"].max()) > 2000
    p = longer["head_p_value"].values
    assert np.all((lo[und] <= p[und]) & (p[und] <= hi[und])), (lo, p, hi)


def test_a_budget_that_does_not_bite_leaves_the_decisions_as_they_were(tmp_path, score_cache):
    """The default budget and no budget at all: the same p, q and flags, nothing undecided."""
    from rmtbase.scoring.score import score_model

    strong = trajectory(tmp_path, strengths=(6.0,))[0]
    auto = score_model(str(strong), **KW)
    free = score_model(str(strong), growth_budget=None, **KW)
    assert int(auto["null_draws"].max()) == int(free["null_draws"].max()) > 300
    for v in ("head_p_value", "head_q_value", "head_flag", "null_draws"):
        # exact: same program and inputs: a budget that never bites changes nothing
        assert np.array_equal(auto[v].values, free[v].values), v
    assert "head_undecided" not in auto and auto.attrs["undecided_heads"] == 0
    assert auto.attrs["growth_budget"] == B.FLOOR and free.attrs["growth_budget"] == "none"
    assert undecided_line(auto) is None


def test_a_budget_stops_the_joint_table_too(tmp_path, monkeypatch, module_cache):
    """Every head declared open under a shrunk schedule (1,000 → 1,200): a budget of 0 refuses
    the step, the table is never grown, and the joint rule's bracket is what is reported."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.scoring.score import score_model
    from rmtbase.scoring.stopping import joint as J

    monkeypatch.setattr(J, "SCHEDULE", (1200,))
    monkeypatch.setattr(J, "JOINT_DRAWS", 1200)
    seen = []
    monkeypatch.setattr(J, "grow", lambda ref, n: seen.append(n))
    monkeypatch.setattr(J, "unsettled", lambda lo, hi, alpha: np.ones(np.shape(lo), bool))
    torch.manual_seed(2)
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=32, n_positions=16)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "m")
    ds = score_model(str(tmp_path / "m"), progress=False, spectrum_draws=0, growth_budget=0)
    assert seen == []  # not one draw past the budget
    assert ds.attrs["growth_budget_spent"] == 0
    assert ds.attrs["joint_null_draws"] == 1000
    assert "joint 1000" in ds.attrs["undecided_draws"]
    assert ds.attrs["undecided_heads"] == int(ds["head_undecided"].sum())


@pytest.mark.parametrize("value, says", [
    ("-3", "--growth-budget must be 'auto', 'none' or CPU seconds in [0, 604800], got -3"),
    ("1e9", "--growth-budget must be 'auto', 'none' or CPU seconds in [0, 604800], got 1e+09"),
])
def test_the_cli_refuses_a_budget_out_of_range_in_one_line(value, says, tmp_path, capsys):
    from rmtbase.cli import main

    assert main(["score", str(tmp_path / "absent"), "--growth-budget", value, "--out",
                 str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rmtbase: error: {says}"]
    assert not (tmp_path / "out").exists()
