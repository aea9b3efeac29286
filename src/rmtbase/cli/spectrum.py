"""``rmtbase spectrum --d D --dh DH [--sigma S | --sigma-q SQ --sigma-k SK] [--json]``.

For one head shape (c = d_h/d): the MP_c ⊠ MP_c limit of x = λ/(σ_Q²σ_K²d²) (edges, moments, NPR
and spectral-entropy limits), the MP_c edges at scale 1 (the naive single-Wishart bound) and the
exact finite-(d, d_h) E Σλ, E Σλ², Var Σλ in raw λ units (:mod:`rmtbase.analytic.product`)."""

from __future__ import annotations

import argparse

from ._common import emit, reference_parser, resolve_sigmas

#: Working digits of the mpmath computations behind the printed floats.
DPS = 30


def add_parser(sub) -> argparse.ArgumentParser:
    return reference_parser(
        sub, "spectrum", "analytic spectrum references (MP_c ⊠ MP_c, exact Σλ moments)",
        "Analytic references for the spectrum of W_QK = W_Q^T W_K with W_Q, W_K of shape "
        "(d_h, d) and i.i.d. Gaussian entries.",
        [("--d", "model width d"), ("--dh", "head dimension d_h (≤ d)")])


def spectrum_summary(d: int, d_h: int, sigma_q: float = 1.0, sigma_k: float = 1.0) -> dict:
    """The ``rmtbase spectrum`` numbers as a dict of floats (mpmath path, DPS digits)."""
    import mpmath as mp

    from ..analytic import marchenko_pastur as mpl
    from ..analytic import product
    from ..errors import check_dims

    d, d_h = check_dims(d, d_h)
    with mp.workdps(DPS):
        c = mp.mpf(d_h) / d
        sq, sk = mp.mpf(sigma_q), mp.mpf(sigma_k)
        lo, hi = product.edges_mp(c, dps=DPS)
        mlo, mhi = mpl.edges_mp(c, dps=DPS)
        moments = product.moments_mp(c, 6, dps=DPS)
        out = {
            "d": d, "d_h": d_h, "sigma_q": float(sigma_q), "sigma_k": float(sigma_k),
            "c": float(c),
            "edges_x": [float(lo), float(hi)],
            "mp_edges_x": [float(mlo), float(mhi)],
            "moments_x": [float(m) for m in moments],
            "npr_limit": float(1 / (1 + 2 * c)),
            "spectral_entropy_limit": float(product.spectral_entropy_limit_mp(d, d_h, dps=DPS)),
            "expected_sum_lambda": float(product.expected_sum_lambda(d, d_h, sq, sk)),
            "expected_sum_lambda2": float(product.expected_sum_lambda2(d, d_h, sq, sk)),
            "var_sum_lambda": float(product.var_sum_lambda(d, d_h, sq, sk)),
        }
    return out


def run(args: argparse.Namespace) -> int:
    sq, sk = resolve_sigmas(args)
    out = spectrum_summary(args.d, args.dh, sq, sk)
    emit(out, args.json, command="spectrum", title=f"MP_c ⊠ MP_c references, d={args.d}, d_h={args.dh}, "
                               f"sigma_q={sq:g}, sigma_k={sk:g} (x = λ/(σ_Q²σ_K²d²))")
    return 0
