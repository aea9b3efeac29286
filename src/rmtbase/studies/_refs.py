"""The analytic references the studies draw, from :mod:`rmtbase.analytic`.

MP_c: eigenvalues of W Wᵀ/d, W (d_h × d) N(0, 1), c = d_h/d. MP_c ⊠ MP_c: limit of
x = λ / (σ_Q² σ_K² d²) for W_QK = W_Qᵀ W_K, whose entries are variance-gamma with d_h terms,
std √d_h σ² (Gaunt 2014)."""

from __future__ import annotations

import numpy as np


def mp_density(x, c):
    """MP_c density at x (mean-1 normalisation)."""
    from ..analytic import marchenko_pastur as mp

    return np.asarray(mp.density(np.asarray(x, dtype=np.float64), c), dtype=np.float64)


def mp_edges(c):
    """(x−, x+) = ((1 − √c)², (1 + √c)²) of MP_c."""
    from ..analytic import marchenko_pastur as mp

    lo, hi = mp.edges(c)
    return float(lo), float(hi)


def product_density(x, c):
    """MP_c ⊠ MP_c density at x."""
    from ..analytic import product

    return np.asarray(product.density(np.asarray(x, dtype=np.float64), c), dtype=np.float64)


def product_edges(c):
    """Support edges of MP_c ⊠ MP_c."""
    from ..analytic import product

    lo, hi = product.edges(c)
    return float(lo), float(hi)


def product_limits(d, d_h):
    """Large-d limits of NPR (1/(1 + 2c)) and spectral entropy (ln d_h − c + c²/6)."""
    from ..analytic import product

    return {"npr": float(product.npr_limit(d_h / d)),
            "spectral_entropy": float(product.spectral_entropy_limit(d, d_h))}


def vg_pdf(x, d_h, sigma=1.0):
    """Exact element density of W_QK (σ_Q = σ_K = σ) at x."""
    from ..analytic import variance_gamma as vg

    return np.asarray(vg.pdf(np.asarray(x, dtype=np.float64), d_h, sigma**2), dtype=np.float64)


def vg_entropy(d_h, sigma=1.0):
    """Exact differential entropy of an element of W_QK [nats]."""
    from ..analytic import variance_gamma as vg

    return float(vg.entropy(d_h, sigma**2))


def vg_kl(d_h):
    """Exact KL(P_WQK ‖ N(0, var)) in nats, = ½ln(2πe var) − h(P), var = d_h, h from
    :func:`rmtbase.analytic.variance_gamma.entropy`."""
    import math

    return 0.5 * math.log(2 * math.pi * math.e * d_h) - vg_entropy(d_h, 1.0)


def vg_excess_kurtosis(d_h):
    """Excess kurtosis 6/d_h of an element of W_QK."""
    from ..analytic import variance_gamma as vg

    return float(vg.excess_kurtosis(d_h))
