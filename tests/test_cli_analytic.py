"""CLI: rmtbase constants / spectrum / elementwise (JSON contents, text mode, one-line errors)."""

import json
import math
import subprocess
import sys

import pytest

from rmtbase.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_constants_json_and_text(capsys):
    out = _json(capsys, ["constants", "--digits", "20", "--json"])
    assert out["weibull_k0"]["value"].startswith("1.2054343190174510870")
    assert set(out["weibull_p_star"]) == {"value", "definition", "reference"}
    assert main(["constants", "--digits", "6"]) == 0
    text = capsys.readouterr().out
    assert "weibull_lambda0_over_sigma" in text and "0.887487" in text


def test_spectrum_json_against_independent_values(capsys):
    d, d_h, sq, sk = 768, 64, 0.02, 0.05
    out = _json(capsys, ["spectrum", "--d", str(d), "--dh", str(d_h), "--sigma-q", str(sq),
                         "--sigma-k", str(sk), "--json"])
    c = d_h / d
    assert out["c"] == c
    assert out["npr_limit"] == pytest.approx(1 / (1 + 2 * c), rel=1e-15)
    # moments: m2 = 1 + 2c, m3 = 1 + 6c + 5c² (free cumulants of MP_c ⊠ MP_c; Fuss–Narayana k = 3)
    assert out["moments_x"][:3] == pytest.approx([1, 1 + 2 * c, 1 + 6 * c + 5 * c * c], rel=1e-15)
    assert out["mp_edges_x"] == pytest.approx([(1 - math.sqrt(c)) ** 2, (1 + math.sqrt(c)) ** 2], rel=1e-15)
    lo, hi = out["edges_x"]
    assert lo < out["mp_edges_x"][0] and hi > out["mp_edges_x"][1]    # wider than a single MP
    s2 = (sq * sk) ** 2
    assert out["expected_sum_lambda"] == pytest.approx(d_h * d * d * s2, rel=1e-14)
    n, p = d, d_h
    assert out["expected_sum_lambda2"] == pytest.approx(
        s2 * s2 * n * n * p * ((n + 1) * (n + p + 1) + n * p + 2), rel=1e-14)
    assert out["var_sum_lambda"] == pytest.approx(s2 * s2 * 2 * n * n * p * (2 * n + p + 1), rel=1e-14)
    assert out["spectral_entropy_limit"] == pytest.approx(math.log(d_h) - c + c * c / 6, rel=1e-15)


def test_spectrum_full_rank_edge(capsys):
    out = _json(capsys, ["spectrum", "--d", "16", "--dh", "16", "--json"])
    assert out["edges_x"] == [0.0, 6.75]


def test_elementwise_json(capsys):
    out = _json(capsys, ["elementwise", "--dh", "2", "--sigma", "0.5", "--json"])
    s = 0.25
    assert out["variance"] == pytest.approx(2 * s * s, rel=1e-15)
    assert out["excess_kurtosis"] == 3.0
    assert out["entropy"] == pytest.approx(1 + math.log(2 * s), rel=1e-14)          # Laplace
    kl = 0.5 * math.log(2 * math.pi * math.e * 2 * s * s) - 1 - math.log(2 * s)
    assert out["kl_to_gaussian"] == pytest.approx(kl, rel=1e-13)
    out = _json(capsys, ["elementwise", "--dh", "64", "--json"])
    assert out["kl_to_gaussian"] == pytest.approx(0.0001683542583293344, rel=1e-12)


@pytest.mark.parametrize("argv", [
    ["spectrum", "--d", "64", "--dh", "128"],
    ["spectrum", "--d", "64", "--dh", "0"],
    ["spectrum", "--d", "64", "--dh", "8", "--sigma", "-1"],
    ["spectrum", "--d", "64", "--dh", "8", "--sigma", "nan"],
    ["spectrum", "--d", "sixty", "--dh", "8"],
    ["spectrum", "--d", "64", "--dh", "8", "--sigma", "1", "--sigma-q", "2"],
    ["elementwise", "--dh", "0"],
    ["elementwise", "--dh", "4", "--sigma-q", "0"],
    ["constants", "--digits", "0"],
])
def test_bad_arguments_give_one_line(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:       # argparse type errors exit from the parser
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmtbase: error:") and "\n" not in err and "Traceback" not in err


def test_subprocess_error_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "rmtbase", "spectrum", "--d", "8", "--dh", "9"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "rmtbase: error: d_h must not exceed d, got d=8, d_h=9"
