"""Closed forms and special-function integrals (float64 numpy/scipy and mpmath, no JAX).

Submodules (imported on first attribute access, so ``import rmtbase.analytic`` is cheap):

- :mod:`~rmtbase.analytic.marchenko_pastur` — MP_c law (Marchenko & Pastur 1967)
- :mod:`~rmtbase.analytic.product` — MP_c ⊠ MP_c, the limit of λ/(σ_Q²σ_K²d²), and exact
  finite-(d, d_h) moments of Σλ
- :mod:`~rmtbase.analytic.variance_gamma` — exact law of one W_QK entry (Gaunt 2014)
- :mod:`~rmtbase.analytic.weibull` — half-normal Weibull anchor (arXiv:2605.18898, App. A)
- :mod:`~rmtbase.analytic.gaussian` — Gaussian / half-normal references, quarter circle
- :mod:`~rmtbase.analytic.constants` — citable constants at any number of digits
- :mod:`~rmtbase.analytic.product_network` — limit laws of deep Ginibre and residual products
  (Fuss–Catalan / Penson–Życzkowski, free powers), Lyapunov limits
- :mod:`~rmtbase.analytic.network_finite` — exact finite-d traces and element kurtosis of them
- :mod:`~rmtbase.analytic.composition_moments` — null moments of head–head composition scores
  and of the QK overlap (Weingarten, Wishart)

Every quantity has a vectorised float64 function and an mpmath function named ``*_mp`` that
takes ``dps=`` (default: the current ``mp.dps``) and returns mpf.
"""

from __future__ import annotations

import importlib

_SUBMODULES = ("marchenko_pastur", "product", "variance_gamma", "weibull", "gaussian", "constants",
               "product_network", "network_finite", "composition_moments")
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
