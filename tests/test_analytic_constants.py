"""The constants registry at 30 and 50 digits against independent mpmath computations."""

import re

import mpmath as mp
import pytest
from test_analytic_weibull_gaussian import _anchor_f_space

from rmtbase.analytic.constants import NAMES, constant_mp, constants
from rmtbase.errors import InputError


def _significant_digits(text):
    digits = re.sub(r"[^0-9]", "", text).lstrip("0")
    return len(digits)


def _independent(name, dps):
    """Each value by a route that shares no code with rmtbase.analytic."""
    with mp.workdps(dps):
        if name.startswith("weibull_k0") or name.startswith("weibull_lambda0"):
            trim = {"": ("0.1", "0.9"), "_trim90": ("0.05", "0.95")}.get(
                name.replace("weibull_k0", "").replace("weibull_lambda0_over_sigma", ""))
            if trim is None:   # the 100 % trim: exact moments are tested in the Weibull tests
                return None
            k0, lam0 = _anchor_f_space(*trim, dps)
            return k0 if name.startswith("weibull_k0") else lam0
        if name == "weibull_p_star":
            return mp.findroot(lambda p: -mp.log1p(-p) - 2 * p, mp.mpf("0.8"))
        if name == "weibull_noise_ratio_p10":
            p = mp.findroot(lambda t: -mp.log1p(-t) - 2 * t, mp.mpf("0.8"))
            v = lambda t: t / ((1 - t) * mp.log(1 - t) ** 2)  # noqa: E731
            return v(mp.mpf("0.1")) / v(p)
        if name == "gaussian_entropy_unit":
            return -mp.quad(lambda x: mp.npdf(x) * mp.log(mp.npdf(x)), [-mp.inf, 0, mp.inf])
        if name == "halfnormal_mean_unit":
            return mp.quad(lambda x: 2 * x * mp.npdf(x), [0, mp.inf])
        if name == "halfnormal_sd_unit":
            m = mp.quad(lambda x: 2 * x * mp.npdf(x), [0, mp.inf])
            return mp.sqrt(1 - m * m)        # E|w|² = 1
        if name == "fuss_catalan_edge":
            return mp.mpf(27) / 4
    return None


@pytest.mark.parametrize("digits", [30, 50])
def test_constants_against_independent_computations(digits):
    table = constants(digits)
    assert set(table) == set(NAMES)
    checked = 0
    for name, row in table.items():
        assert _significant_digits(row["value"]) == digits, (name, row["value"])
        assert row["definition"] and row["reference"]
        ref = _independent(name, digits + 15)
        if ref is None:
            continue
        with mp.workdps(digits + 15):
            value = mp.mpf(row["value"])
            half_ulp = mp.mpf(10) ** (mp.floor(mp.log10(abs(ref))) - digits + 1) / 2
            assert abs(value - ref) <= half_ulp * (1 + mp.mpf(10) ** -5), name
        checked += 1
    assert checked >= 9


def test_paper_values_and_rounding():
    t = constants(4)
    assert t["weibull_k0"]["value"] == "1.205"
    assert t["weibull_lambda0_over_sigma"]["value"] == "0.8875"
    assert t["weibull_p_star"]["value"] == "0.7968"
    assert t["fuss_catalan_edge"]["value"] == "6.750"
    assert constants(1)["fuss_catalan_edge"]["value"] == "7"
    assert float(constant_mp("weibull_k0_trim100", dps=20)) == pytest.approx(1.1510665907182549, rel=1e-15)


def test_bad_requests():
    with pytest.raises(InputError):
        constants(0)
    with pytest.raises(InputError):
        constant_mp("no_such_constant")
