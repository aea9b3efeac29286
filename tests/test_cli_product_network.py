"""CLI: rmtbase product-network (JSON keys and values against closed forms, text mode, one-line
errors)."""

import json
import math
import subprocess
import sys

import pytest

from rmtbase.cli import main

KEYS = {"kind", "depth", "gain", "d", "widths", "moments", "edges", "atom", "lyapunov",
        "expected_trace", "expected_trace_sq", "element_kurtosis"}


def _json(capsys, argv):
    assert main(["product-network", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc.pop("schema") == "rmtbase.product-network/1"  # docs/json.md
    return doc


@pytest.mark.parametrize("depth", [1, 3, 7])
def test_gaussian_json_is_fuss_catalan_and_penson_zyczkowski(depth, capsys):
    g = 1.5
    out = _json(capsys, ["--kind", "ginibre", "--depth", str(depth), "--gain", str(g),
                         "--d", "10"])
    assert set(out) == KEYS
    fc = [math.comb((depth + 1) * k, k) / (depth * k + 1) for k in range(1, 7)]
    assert out["moments"] == pytest.approx([g ** (k * depth) * f for k, f in enumerate(fc, 1)],
                                           rel=1e-14)
    assert out["edges"] == pytest.approx([0.0, g**depth * (depth + 1) ** (depth + 1) / depth**depth],
                                         rel=1e-14)
    assert out["lyapunov"] == pytest.approx({"max": 0.5 * math.log(g),
                                             "mean": 0.5 * (math.log(g) - 1), "min": None})
    assert out["expected_trace"] == pytest.approx(g**depth * 10, rel=1e-14)
    # exact finite d, one layer: s⁴ d²(2d + 1) with s² = G/d (Wishart); deeper: > the limit
    if depth == 1:
        assert out["expected_trace_sq"] == pytest.approx(g * g * (2 * 10 + 1) / 10 * 10, rel=1e-14)
    assert out["expected_trace_sq"] > 10 * out["moments"][1]
    assert out["element_kurtosis"] == pytest.approx(3 * ((12 / 10) ** (depth - 1) - 1), abs=1e-12)


def test_residual_json(capsys):
    g, depth = 0.5, 6
    out = _json(capsys, ["--kind", "residual", "--depth", str(depth), "--gain", str(g)])
    h = 2 * g + g * g
    assert out["moments"][:2] == pytest.approx([(1 + g) ** depth,
                                                (1 + h) ** depth + depth * h * (1 + h) ** (depth - 1)],
                                               rel=1e-14)
    lo, hi = out["edges"]
    assert 0 < lo < out["moments"][0] < hi
    assert out["lyapunov"] == pytest.approx({"max": 0.5 * math.log(1 + g), "mean": 0.0,
                                             "min": 0.5 * math.log(1 - g)})
    assert out["expected_trace"] is None and out["expected_trace_sq"] is None
    assert out["d"] is None and out["atom"] == 0.0


def test_rectangular_widths(capsys):
    out = _json(capsys, ["--kind", "ginibre", "--depth", "2", "--widths", "8", "4", "8"])
    c = 0.5        # W_QK-like bottleneck: moments c^{1−k} Σ N(k, j) c^j, atom 1 − c
    assert out["moments"][:3] == pytest.approx([1, (1 + 2 * c) / c, (1 + 6 * c + 5 * c * c) / c**2])
    assert out["atom"] == 0.5 and out["d"] == 8 and out["lyapunov"] is None
    assert out["expected_trace"] == 8.0


def test_huge_depth_prints_null_beyond_float_range(capsys):
    out = _json(capsys, ["--kind", "residual", "--depth", "2000", "--gain", "0.1"])
    assert out["moments"][0] == pytest.approx(1.1**2000, rel=1e-12)
    assert out["moments"][-1] is None


def test_text_mode(capsys):
    assert main(["product-network", "--kind", "residual", "--depth", "4", "--d", "384"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("residual product network, L=4") and "expected_trace_sq" in text


@pytest.mark.parametrize("argv", [
    ["--kind", "tanh", "--depth", "2"],
    ["--kind", "residual"],
    ["--kind", "residual", "--depth", "0"],
    ["--kind", "residual", "--depth", "two"],
    ["--kind", "residual", "--depth", "2", "--gain", "-1"],
    ["--kind", "residual", "--depth", "2", "--gain", "nan"],
    ["--kind", "residual", "--depth", "2", "--gain", "inf"],
    ["--kind", "residual", "--depth", "2", "--d", "0"],
    ["--kind", "residual", "--depth", "2", "--widths", "3", "3", "3"],
    ["--kind", "ginibre", "--depth", "2", "--widths", "3", "3"],
    ["--kind", "ginibre", "--depth", "1", "--widths", "3", "0"],
    ["--kind", "ginibre", "--depth", "1", "--widths", "3", "4", "--d", "5"],
])
def test_bad_arguments_give_one_line(argv, capsys):
    try:
        code = main(["product-network", *argv])
    except SystemExit as exc:       # argparse errors exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmtbase: error:") and "\n" not in err and "Traceback" not in err


def test_subprocess_error_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "rmtbase", "product-network", "--kind",
                           "residual", "--depth", "3", "--gain", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "rmtbase: error: --gain must be in [1e-30, 1e+30], got 0.0"
