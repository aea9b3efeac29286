"""The per-draw cost model said before a null table grows (rmtbase.baseline.draw_cost).

The constants are calibrated by benchmarks/big_shapes.py --calibrate (no timing here); these
tests check the model's form against the work a draw does, computed independently: an element
draw's cost scales with the d × d entries of W_QK, a spectral draw's with d_h³ and not with d.
"""

from __future__ import annotations

import pytest

from rmtbase.baseline import draw_cost as C


def test_element_cost_scales_with_the_entries_of_w_qk():
    """Element-statistics tables: d² entries of W_QK plus a fixed part; d_h enters only through
    an all-statistics table's spectrum."""
    e = C.seconds_per_draw(4096, 128, "elementwise")
    assert e == pytest.approx(C.ELEMENT_NS * 1e-9 * 4096 ** 2 + C.TABLE_MS * 1e-3, rel=1e-12)
    assert C.seconds_per_draw(2048, 128, "elementwise") - C.TABLE_MS * 1e-3 == pytest.approx(
        (e - C.TABLE_MS * 1e-3) / 4, rel=1e-12)
    assert C.seconds_per_draw(4096, 64, "elementwise") == e


def test_spectral_cost_depends_on_d_h_only():
    s = C.seconds_per_draw(4096, 128, "spectral")
    assert s == C.seconds_per_draw(768, 128, "spectral")
    assert s == pytest.approx(C.SPECTRAL_NS * 1e-9 * 128 ** 3 + C.SPECTRAL_MS * 1e-3, rel=1e-12)
    assert C.seconds_per_draw(4096, 128, "all") == pytest.approx(
        C.seconds_per_draw(4096, 128, "elementwise") + C.ALL_SPECTRAL_NS * 1e-9 * 128 ** 3,
        rel=1e-12)


@pytest.mark.parametrize(("d", "d_h", "ms"), [(640, 64, 9.1), (1024, 64, 17.5), (2048, 128, 67.4),
                                              (640, 256, 31.9)])
def test_the_model_is_within_its_stated_factor_of_the_calibration(d, d_h, ms):
    """The fit against the measured all-statistics costs its docstring lists (a change of the
    constants that breaks its own calibration fails here): within 15 %."""
    assert C.seconds_per_draw(d, d_h, "all") * 1e3 == pytest.approx(ms, rel=0.15)


def test_the_growth_line_states_the_range_and_the_cost():
    """(4096, 128) bfloat16, all statistics, 2,000 → 18,000: 16,000 draws at the model's cost."""
    line = C.growth_line(4096, 128, "all", "bfloat16", 2000, 18000)
    want = 16000 * C.seconds_per_draw(4096, 128, "all") / 60
    assert line.startswith("rmtbase: growing the (4096,128) bfloat16 all-statistics null table "
                           "from 2,000 to ≤ 18,000 draws: ")
    assert f"≈ {want:.0f} CPU-min at most" in line
    assert C.growth_seconds(4096, 128, "all", 18000, 2000) == 0.0


@pytest.mark.parametrize(("seconds", "text"), [(0.2, "≈ 1 CPU-s"), (89, "≈ 89 CPU-s"),
                                               (90, "≈ 2 CPU-min"), (5399, "≈ 90 CPU-min"),
                                               (5400, "≈ 1.5 CPU-h")])
def test_cpu_time_units(seconds, text):
    assert C.cpu_time(seconds) == text


def test_the_generating_line_says_the_step_cost(tmp_path, monkeypatch, capsys):
    """null_table with progress says the draws it generates and their estimated cost."""
    from rmtbase.baseline.cache import null_table
    from rmtbase.files.user_cache import forget

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))
    forget()
    null_table(16, 4, stats="spectral", min_draws=250, seed=3, progress=True)
    err = capsys.readouterr().err
    assert ("generating the null table d=16, d_h=4, spectral statistics, float32 storage, "
            "250 draws (≈ 1 CPU-s estimated; cached in") in err, err
    forget()


def test_the_spectral_growth_plan_is_said_once_before_the_first_extension(monkeypatch, capsys):
    """extend_spectral says the plan line (range and estimated cost) before a reference's first
    extension only; each look still says its own step. The decision machinery is replaced by
    a rule that keeps every head open (what is tested is what is said, not when to grow)."""
    from types import SimpleNamespace

    import numpy as np

    from rmtbase.scoring.heads import spectral_extension as X
    from rmtbase.scoring.heads import stopping_text

    class Ref:
        rows = slice(None)
        cells = SimpleNamespace(d=4096, d_h=128)
        storage = "bfloat16"
        spectral_ref = {"q.rms": np.zeros(4000)}

        def can_extend(self):
            return True

        def extend(self, names, n):
            self.spectral_ref = {"q.rms": np.zeros(n)}
            return n

    monkeypatch.setattr(X, "unsettled", lambda *a, **k: np.ones((1, 2), dtype=bool))
    monkeypatch.setattr(X, "reference_groups", lambda refs: [])
    monkeypatch.setattr(stopping_text, "tail_counts", lambda *a: None)
    how = SimpleNamespace(max_draws=None, alpha=0.05, unreliable=(), progress=True)
    ref, said = Ref(), set()
    capsys.readouterr()
    for _ in range(2):
        assert X.extend_spectral([ref], ["qk.npr"], {}, None, how, 100_000, 15, said) == (
            True, False)
    err = capsys.readouterr().err
    plan = C.growth_line(4096, 128, "spectral", "float32", 4000, 100_000)
    assert err.count("rmtbase: growing the") == 1 and plan in err, err
    assert err.index(plan) < err.index("extending the spectral null to 6000")
    assert "extending the spectral null to 8000" in err
