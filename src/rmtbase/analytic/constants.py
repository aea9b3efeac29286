"""Registry of citable constants, computed with mpmath to 1–1000 significant digits.

``constants(digits=15)`` returns ``{name: {"value": str, "definition": str, "reference": str}}``,
``value`` a fixed-point decimal string of exactly ``digits`` significant digits, correctly
rounded: computed at ``digits + 12`` and ``digits + 30`` working digits, whose roundings must
agree, else a third time at ``digits + 60`` that must agree with the second, else
:class:`~rmtbase.errors.PrecisionError`. Tables are cached in the process and, from
:data:`DISK_CACHE_MIN_DIGITS` digits, on disk (:mod:`._constants_cache`)."""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable

import mpmath as mp

from ..errors import InputError, PrecisionError
from . import _anchor_moments, _constants_cache, gaussian, weibull

__all__ = ["constants", "constant_mp", "NAMES", "GUARDS", "DISK_CACHE_MIN_DIGITS"]

#: Working digits added to the requested digits in the two evaluations (and a third if needed).
GUARDS = (12, 30, 60)
#: Tables of at least this many digits are also cached on disk.
DISK_CACHE_MIN_DIGITS = 100

_PAPER = "Weibull paper, arXiv:2605.18898"
_TRIMS = {"": ("0.1", "0.9"), "_trim90": ("0.05", "0.95"), "_trim100": ("0", "1")}


def _anchor(suffix: str, index: int) -> Callable:
    def compute(dps):
        return weibull.anchor_mp(*_TRIMS[suffix], dps=dps)[index]
    return compute


def _exact(num: int, den: int, dps: int):
    with mp.workdps(dps + 10):
        return mp.mpf(num) / den


def _registry() -> dict[str, tuple[str, str, Callable]]:
    reg: dict[str, tuple[str, str, Callable]] = {}
    for suffix, (a, b) in _TRIMS.items():
        trim = f"F ∈ [{a}, {b}]"
        reg[f"weibull_k0{suffix}"] = (
            f"continuum least-squares Weibull shape of a half-normal, {trim}: Cov(g,Y)/Var(g), "
            "g = ln(√2 erfinv F), Y = ln(−ln(1−F))",
            f"{_PAPER}, App. A.1 eq. (1)", _anchor(suffix, 0))
        reg[f"weibull_lambda0_over_sigma{suffix}"] = (
            f"continuum least-squares Weibull scale over σ of a half-normal, {trim}: exp(ḡ − Ȳ/k0)",
            f"{_PAPER}, App. A.1 eq. (1)", _anchor(suffix, 1))
    reg["weibull_p_star"] = (
        "minimiser of V(p) = p/((1−p) ln²(1−p)): p* = 1 + W₀(−2e^{−2})/2",
        f"{_PAPER}, App. A.2 eq. (3)", lambda dps: weibull.p_star_mp(dps=dps))
    reg["weibull_noise_min"] = (
        "V(p*) = 1/(4 p* (1 − p*))", f"{_PAPER}, App. A.2 eq. (3)",
        lambda dps: weibull.noise_curve_mp(weibull.p_star_mp(dps=dps), dps=dps))
    reg["weibull_noise_ratio_p10"] = (
        "V(0.1)/V(p*), noise of the bottom-10% edge relative to the optimum", f"{_PAPER}, App. A.2",
        lambda dps: weibull.noise_ratio_mp("0.1", dps=dps))
    reg["weibull_closure_mean_ratio"] = (
        "λ0Γ(1+1/k0) / √(2/π): Weibull-anchor mean over the half-normal mean (10–90 % trim)",
        f"{_PAPER}, App. A.1 (Γ closure)", lambda dps: weibull.closure_ratios_mp("0.1", "0.9", dps=dps)[0])
    reg["weibull_closure_sd_ratio"] = (
        "λ0√(Γ(1+2/k0) − Γ²(1+1/k0)) / √(1−2/π): Weibull-anchor sd over the half-normal sd",
        f"{_PAPER}, App. A.1 (Γ closure)", lambda dps: weibull.closure_ratios_mp("0.1", "0.9", dps=dps)[1])
    reg["gaussian_entropy_unit"] = (
        "differential entropy of N(0, 1): ½ ln(2πe) nats", "Shannon (1948); Cover & Thomas Thm 8.4.1",
        lambda dps: gaussian.entropy_mp(1, dps=dps))
    reg["halfnormal_mean_unit"] = ("E|w|/σ = √(2/π), w ~ N(0, σ²)", "half-normal law",
                                   lambda dps: gaussian.halfnormal_mp(1, dps=dps)["mean"])
    reg["halfnormal_sd_unit"] = ("sd|w|/σ = √(1 − 2/π)", "half-normal law",
                                 lambda dps: gaussian.halfnormal_mp(1, dps=dps)["sd"])
    reg["halfnormal_entropy_unit"] = ("entropy of |w|, σ = 1: ½ ln(πe/2) nats", "half-normal law",
                                      lambda dps: gaussian.halfnormal_mp(1, dps=dps)["entropy"])
    reg["fuss_catalan_edge"] = (
        "upper edge 27/4 of MP_1 ⊠ MP_1 (x = λ/(σ_Q²σ_K²d²) at d_h = d)",
        "Penson & Życzkowski (2011)", lambda dps: _exact(27, 4, dps))
    reg["fuss_catalan_xlogx"] = (
        "∫ x ln x dρ for MP_1 ⊠ MP_1 = c − c²/6 at c = 1 = 5/6",
        "rmtbase.analytic.product (d m_s/ds at s = 1 of the Fuss–Narayana moments)",
        lambda dps: _exact(5, 6, dps))
    reg["mp_c1_edge"] = ("upper edge 4 of MP_1 (eigenvalues of XXᵀ/(σ²d), X d × d)",
                         "Marchenko & Pastur (1967)", lambda dps: _exact(4, 1, dps))
    return reg


NAMES: tuple[str, ...] = tuple(_registry())


def constant_mp(name: str, dps: int = 30):
    """One constant as mpf, computed at ``dps`` + guard digits."""
    reg = _registry()
    if name not in reg:
        raise InputError(f"unknown constant {name!r}; known: {', '.join(reg)}")
    return reg[name][2](int(dps))


def _rounded(value, digits: int) -> str:
    with mp.workdps(digits + 20):
        return mp.nstr(+value, digits, strip_zeros=False, min_fixed=-mp.inf,
                       max_fixed=mp.inf).rstrip(".")


def _evaluate(names, dps: int, tick=None) -> dict:
    reg = _registry()
    token = _anchor_moments._TICK.set(tick)
    try:
        return {name: reg[name][2](dps) for name in names}
    finally:
        _anchor_moments._TICK.reset(token)


def _planned(dps_list) -> int:
    """Integrand evaluations of the anchors' quadrature at the given working precisions."""
    panels = set()
    for dps in dps_list:
        for a, b in _TRIMS.values():
            panels |= _anchor_moments.planned_panels(a, b, dps + 10)
    return _anchor_moments.planned_evaluations(panels)


def _verified(digits: int, progress: bool) -> dict[str, str]:
    """Values rounded to ``digits``, each checked by a second evaluation (module docstring)."""
    from ..progress import progress_bar

    names = list(_registry())
    first, second = (digits + g for g in GUARDS[:2])
    bar = progress_bar(_planned((first, second)), desc="rmtbase constants",
                       unit="integrand evaluation", enabled=progress and digits >= 100)
    with bar:
        low = _evaluate(names, first, bar.update)
        high = _evaluate(names, second, bar.update)
    out = {}
    for name in names:
        a, b = _rounded(low[name], digits), _rounded(high[name], digits)
        if a != b:                       # near a rounding boundary: one more, wider evaluation
            c = _rounded(_evaluate([name], digits + GUARDS[2])[name], digits)
            if c != b:
                raise PrecisionError(f"{name} to {digits} digits is not settled: {a!r} at "
                                     f"{first} working digits, {b!r} at {second}, {c!r} at "
                                     f"{digits + GUARDS[2]}")
            b = c
        out[name] = b
    return out


#: Whether the running :func:`constants` call reports progress (read by :func:`_table`).
_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("constants_progress", default=False)


@functools.lru_cache(maxsize=8)
def _table(digits: int) -> tuple:
    values = None
    if digits >= DISK_CACHE_MIN_DIGITS:
        values = _constants_cache.load(digits, NAMES)
    if values is None:
        values = _verified(digits, _PROGRESS.get())
        if digits >= DISK_CACHE_MIN_DIGITS:
            _constants_cache.store(digits, values)
    reg = _registry()
    return tuple((name, values[name], reg[name][0], reg[name][1]) for name in NAMES)


def constants(digits: int = 15, progress: bool = True) -> dict[str, dict[str, str]]:
    """All constants at ``digits`` (1–1000) significant digits, correctly rounded and checked."""
    if isinstance(digits, bool):
        raise InputError(f"digits must be an integer, got {digits!r}")
    try:
        n = int(digits)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"digits must be an integer, got {digits!r}") from None
    if n != digits or not 1 <= n <= 1000:
        raise InputError(f"digits must be an integer in [1, 1000], got {digits!r}")
    token = _PROGRESS.set(bool(progress))
    try:
        rows = _table(n)
    finally:
        _PROGRESS.reset(token)
    return {name: {"value": text, "definition": d, "reference": r} for name, text, d, r in rows}
