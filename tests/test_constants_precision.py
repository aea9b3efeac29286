"""The constants registry at high precision.

200 digits of every constant against a route that shares no algorithm with rmtbase.analytic:
the Weibull anchor's moments as plain tanh-sinh quadratures in x = |w|/σ (mpmath's own erf/erfc,
no series, no E₁, no Gauss–Legendre, no ln x substitution, no erfcx steps), p* from Newton's
method on its defining equation, the Gaussian references with Python's decimal module (π by
Machin's formula), the rationals with Python's fractions. 1000 digits (slow) against Python's decimal module where the
constant is elementary, and against the 200-digit table for the anchor.
"""

import json
import re
import subprocess
import sys
from decimal import Decimal, getcontext
from fractions import Fraction

import mpmath as mp
import pytest

from rmtbase.analytic import _constants_cache
from rmtbase.analytic.constants import NAMES, constants
from rmtbase.cli import main

TRIMS = {"": ("0.1", "0.9"), "_trim90": ("0.05", "0.95"), "_trim100": ("0", "1")}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path))


def _significant(text):
    return len(re.sub(r"[^0-9]", "", text).lstrip("0"))


def _anchor_by_quadrature(a, b):
    """(k0, λ0/σ) from the four moments as tanh-sinh integrals in x (current precision)."""
    a, b = mp.mpf(a), mp.mpf(b)
    lo = mp.mpf(0) if a == 0 else mp.sqrt(2) * mp.erfinv(a)
    cut = mp.sqrt(2 * (mp.mp.dps + 10) * mp.log(10))       # φ(cut) < 10^-(dps+10)
    hi = cut if b == 1 else mp.sqrt(2) * mp.erfinv(b)
    pts = [lo] + [mp.mpf(t) for t in (1, 4, 12) if lo < t < hi] + [hi]
    cache = {}

    def parts(x):
        if x not in cache:
            z = x / mp.sqrt(2)
            w = -mp.log(mp.erfc(z))
            cache[x] = (mp.log(x), mp.log(w), mp.sqrt(2 / mp.pi) * mp.exp(-x * x / 2))
        return cache[x]

    def mean(h):
        return mp.quad(lambda x: h(*parts(x)), pts) / (b - a)

    g = mean(lambda lg, yy, f: lg * f)
    y = mean(lambda lg, yy, f: yy * f)
    var = mean(lambda lg, yy, f: (lg - g) ** 2 * f)
    cov = mean(lambda lg, yy, f: (lg - g) * (yy - y) * f)
    k0 = cov / var
    return k0, mp.exp(g - y / k0)


def _independent(dps):
    """Every constant by an independent route at ``dps`` digits."""
    out = {}
    with mp.workdps(dps):
        for suffix, (a, b) in TRIMS.items():
            k0, lam = _anchor_by_quadrature(a, b)
            out[f"weibull_k0{suffix}"], out[f"weibull_lambda0_over_sigma{suffix}"] = k0, lam
            if suffix == "":
                k_mid, l_mid = k0, lam
        p = mp.findroot(lambda t: -mp.log1p(-t) - 2 * t, mp.mpf("0.8"))
        v = lambda t: t / ((1 - t) * mp.log1p(-t) ** 2)  # noqa: E731
        out["weibull_p_star"], out["weibull_noise_min"] = p, v(p)
        out["weibull_noise_ratio_p10"] = v(mp.mpf("0.1")) / v(p)
        elementary = {k: mp.mpf(str(v)) for k, v in _decimal_references(dps).items()}
        out.update(elementary)
        mean = elementary["halfnormal_mean_unit"]
        g1, g2 = mp.gamma(1 + 1 / k_mid), mp.gamma(1 + 2 / k_mid)
        out["weibull_closure_mean_ratio"] = l_mid * g1 / mean
        out["weibull_closure_sd_ratio"] = l_mid * mp.sqrt(g2 - g1 * g1) / mp.sqrt(1 - mean**2)
    for name, frac in (("fuss_catalan_edge", Fraction(27, 4)), ("fuss_catalan_xlogx", Fraction(5, 6)),
                       ("mp_c1_edge", Fraction(4))):
        out[name] = frac
    return out


def _decimal_references(dps):
    """The Gaussian and half-normal references with Python's decimal module (not mpmath)."""
    getcontext().prec = dps
    pi = _decimal_pi()
    return {"gaussian_entropy_unit": ((2 * pi).ln() + 1) / 2,
            "halfnormal_entropy_unit": ((pi / 2).ln() + 1) / 2,
            "halfnormal_mean_unit": (2 / pi).sqrt(),
            "halfnormal_sd_unit": (1 - 2 / pi).sqrt()}


def _check(table, ref, digits):
    for name in NAMES:
        text = table[name]["value"]
        assert _significant(text) == digits, (name, text)
        if isinstance(ref[name], Fraction):           # exact: the correctly rounded decimal
            getcontext().prec = digits
            frac = ref[name]
            assert Decimal(text) == +(Decimal(frac.numerator) / Decimal(frac.denominator)), name
            continue
        with mp.workdps(digits + 20):
            value, exact = mp.mpf(text), ref[name]
            half_ulp = mp.mpf(10) ** (mp.floor(mp.log10(abs(value))) - digits + 1) / 2
            assert abs(value - exact) <= half_ulp * (1 + mp.mpf(10) ** -8), name


@pytest.mark.slow
def test_200_digits_of_every_constant_against_independent_routes():
    _check(constants(200), _independent(215), 200)


def test_cli_130_digits_exits_0_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "rmtbase", "constants", "--digits", "130", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    table = json.loads(proc.stdout)
    assert table.pop("schema") == "rmtbase.constants/1"  # docs/json.md
    assert set(table) == set(NAMES)
    assert table["weibull_k0"]["value"].startswith("1.205434319017451087023958476584467586909")
    assert all(_significant(row["value"]) == 130 for row in table.values())


@pytest.mark.parametrize("digits", ["0", "1001", "-5", "20.5"])
def test_digits_outside_range_one_line_exit_2(digits, capsys):
    try:
        code = main(["constants", "--digits", digits])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rmtbase: error:") and "\n" not in err and "Traceback" not in err


def test_disk_cache_is_used_and_validated(tmp_path):
    from rmtbase.analytic import constants as mod

    first = constants(100, progress=False)
    path = _constants_cache.path(100)
    assert path.parent == tmp_path / "constants" and path.is_file()
    data = json.loads(path.read_text())
    assert data["values"]["weibull_k0"] == first["weibull_k0"]["value"]
    # a tampered file (wrong digit count) is ignored and rewritten; a valid one is used as is
    data["values"]["weibull_k0"] = "1.5"
    path.write_text(json.dumps(data))
    assert _constants_cache.load(100, NAMES) is None
    data["values"]["weibull_k0"] = "9" * 100
    path.write_text(json.dumps(data))
    mod._table.cache_clear()
    assert constants(100)["weibull_k0"]["value"] == "9" * 100
    mod._table.cache_clear()


@pytest.mark.slow
def test_1000_digits():
    table = constants(1000)
    assert all(_significant(row["value"]) == 1000 for row in table.values())
    ref = _decimal_references(1030)
    p = Decimal("0.8")                                  # Newton on −ln(1 − p) = 2p
    for _ in range(60):
        p -= (-(1 - p).ln() - 2 * p) / (1 / (1 - p) - 2)
    v = lambda t: t / ((1 - t) * (1 - t).ln() ** 2)  # noqa: E731
    ref.update(weibull_p_star=p, weibull_noise_min=v(p), weibull_noise_ratio_p10=v(Decimal("0.1")) / v(p))
    for name, exact in ref.items():
        value = Decimal(table[name]["value"])
        half_ulp = Decimal(10) ** (value.adjusted() - 999) / 2
        assert abs(value - exact) <= half_ulp * Decimal("1.00000001"), name
    # the anchor (whose independent route is the 200-digit test): the 1000 digits round to the
    # 200-digit values
    short = constants(200)
    for name in NAMES:
        with mp.workdps(1020):
            assert _rounded200(table[name]["value"]) == short[name]["value"], name


def _rounded200(text):
    return mp.nstr(mp.mpf(text), 200, strip_zeros=False, min_fixed=-mp.inf, max_fixed=mp.inf).rstrip(".")


def _decimal_pi():
    """π by Machin's formula in the current decimal context."""
    def arctan_inv(n):
        x, total, k, sign = Decimal(1) / n, Decimal(0), 1, 1
        power, n2 = x, n * n
        while power != 0:
            total += sign * power / k
            power /= n2
            k, sign = k + 2, -sign
        return total
    return 4 * (4 * arctan_inv(5) - arctan_inv(239))
