"""Every study runs in quick mode into tmp_path and writes its figures and data; the registry
and CLI list them; the Weibull verdict helpers reproduce independent numbers."""

import importlib.util
import math
from pathlib import Path

import mpmath as mp
import pytest

from rmtbase import studies
from rmtbase.cli import main
from rmtbase.errors import InputError


def _check_outputs(result, out):
    assert result["figures"] and result["data"]
    for p in result["figures"] + result["data"]:
        p = Path(p)
        assert p.is_file() and p.stat().st_size > 0 and out in p.parents
    for p in result["figures"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["random_baselines", "product_spectrum", "residual_paths", "minilm"])
def test_study_quick(name, tmp_path):
    result = studies.run(name, tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)


def test_product_networks_quick(tmp_path):
    """The study's CSVs carry the exact curves of rmtbase.analytic.network_finite; at L = 1 the
    entries are Gaussian (marginal kurtosis 0) and the Monte Carlo agrees within 4 SE."""
    import csv

    from rmtbase.analytic import network_finite as nf

    result = studies.run("product_networks", tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)
    folder = tmp_path / "product_networks"
    names = {Path(p).name for p in result["figures"]}
    assert names == {"spectra.png", "moments_vs_depth.png", "kurtosis_vs_depth.png",
                     "residual_stream.png", "lyapunov.png"}
    with open(folder / "kurtosis_vs_depth.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        exact = nf.kurtosis_curve(r["kind"], int(r["d"]), [int(r["depth"])])[0]
        assert float(r["analytic_marginal"]) == pytest.approx(exact, rel=1e-12, abs=1e-15)
        if r["depth"] == "1":
            assert abs(float(r["mc_pooled"])) < 4 * float(r["mc_pooled_se"])
    with open(folder / "residual_stream.csv", encoding="utf-8") as fh:
        stream = list(csv.DictReader(fh))
    assert float(stream[-1]["analytic"]) == pytest.approx(
        float(nf.stream_kurtosis("residual", int(stream[-1]["d"]), int(stream[-1]["depth"]), 1)))


def test_weibull_anchor_quick(tmp_path):
    if importlib.util.find_spec("rmtbase.analytic.weibull") is None:
        pytest.skip("rmtbase.analytic.weibull not in this checkout yet")
    result = studies.run("weibull_anchor", tmp_path, quick=True, seed=0)
    _check_outputs(result, tmp_path)
    md = (tmp_path / "weibull_anchor" / "weibull_verdicts.md").read_text()
    assert "| claim |" in md and "6.5" in md
    assert abs(result["summary"]["k0"] - 1.2054343) < 1e-6


def test_registry_and_cli(capsys):
    assert studies.names() == list(studies.STUDIES)
    assert main(["study", "--list"]) == 0
    assert capsys.readouterr().out.split() == studies.names()
    with pytest.raises(InputError):
        studies.get("nope")
    assert main(["study", "nope", "--out", "x"]) == 2


def _anchor_mp(a, b):
    """Seed 002 eq. (1) by mpmath quadrature, independent of the study's Gauss–Legendre code."""
    mp.mp.dps = 20
    g = lambda F: mp.log(mp.sqrt(2) * mp.erfinv(F))  # noqa: E731
    y = lambda F: mp.log(-mp.log(1 - F))  # noqa: E731
    L = b - a
    E = lambda f: mp.quad(f, [a, (a + b) / 2, b]) / L  # noqa: E731
    mg, my = E(g), E(y)
    k = E(lambda F: (g(F) - mg) * (y(F) - my)) / E(lambda F: (g(F) - mg) ** 2)
    return float(k), float(mp.exp(mg - my / k))


@pytest.mark.parametrize("a,b", [(0.1, 0.9), (0.05, 0.95), (0.0, 1.0)])
def test_mixture_anchor_single_component_matches_mpmath(a, b):
    from rmtbase.studies.weibull_anchor import mixture_anchor

    k, lam = mixture_anchor([1.0], [1.0], a, b)
    k_ref, lam_ref = _anchor_mp(mp.mpf(a), mp.mpf(b))
    assert k == pytest.approx(k_ref, abs=2e-7)
    assert lam == pytest.approx(lam_ref, abs=2e-7)


def test_mixture_anchor_is_scale_free_and_weights_matter():
    from rmtbase.studies.weibull_anchor import mixture_anchor

    k1, l1 = mixture_anchor([4, 5], [6 / math.sqrt(10), 1.0])
    k2, l2 = mixture_anchor([4, 5], [12 / math.sqrt(10), 2.0])
    assert k1 == pytest.approx(k2, rel=1e-9) and l2 == pytest.approx(2 * l1, rel=1e-9)
    assert k1 < 1.2054 - 0.03  # a scale mixture lowers k


def test_noise_curve_minimum_and_ratio():
    from rmtbase.studies.weibull_anchor import noise_curve

    mp.mp.dps = 30
    V = lambda p: p / ((1 - p) * mp.log(1 - p) ** 2)  # noqa: E731
    p_star = mp.re(mp.findroot(lambda p: mp.diff(V, p), mp.mpf("0.8")))
    assert float(noise_curve(0.1) / noise_curve(float(p_star))) == pytest.approx(
        float(V(mp.mpf("0.1")) / V(p_star)), rel=1e-12)
    assert float(p_star) == pytest.approx(0.7968121300, abs=1e-9)


def test_verdict_arithmetic_rows_hold():
    from rmtbase.studies import _weibull_verdicts as v

    rows = {r["id"]: r for r in v._arithmetic_rows()}
    assert rows["pythia_scaling"]["holds"] == "yes"
    assert rows["table5_ratios"]["holds"] == "yes"
    md = v.markdown(list(rows.values()), quick=True)
    assert md.count("\n|") == len(rows) + 2
