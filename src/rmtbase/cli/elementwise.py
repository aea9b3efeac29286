"""``rmtbase elementwise --dh DH [--sigma S | --sigma-q SQ --sigma-k SK] [--json]``: the exact
law of one W_QK entry, a sum of d_h products of independent normals (symmetric variance-gamma,
:mod:`rmtbase.analytic.variance_gamma`; s = σ_Q σ_K, σ the entries' std): variance, excess
kurtosis, differential entropy, KL divergence to the equal-variance Gaussian (mpmath)."""

from __future__ import annotations

import argparse

from ._common import emit, reference_parser, resolve_sigmas

#: Requested digits of the mpmath computations (the functions add guard digits).
DPS = 16


def add_parser(sub) -> argparse.ArgumentParser:
    return reference_parser(
        sub, "elementwise", "exact element law of W_QK (variance-gamma)",
        "Variance, excess kurtosis, entropy and KL-to-Gaussian of one entry of W_QK = W_Q^T W_K "
        "(W_Q, W_K of shape (d_h, d), i.i.d. Gaussian entries).",
        [("--dh", "head dimension d_h (≥ 1)")])


def elementwise_summary(d_h: int, sigma_q: float = 1.0, sigma_k: float = 1.0) -> dict:
    """The ``rmtbase elementwise`` numbers as a dict of floats (mpmath path)."""
    import mpmath as mp

    from ..analytic import variance_gamma as vg
    from ..errors import InputError

    if int(d_h) != d_h or d_h < 1:
        raise InputError(f"d_h must be a positive integer, got {d_h!r}")
    with mp.workdps(DPS + 10):
        s = mp.mpf(sigma_q) * mp.mpf(sigma_k)
        return {
            "d_h": int(d_h), "sigma_q": float(sigma_q), "sigma_k": float(sigma_k),
            "variance": float(d_h * s * s),
            "excess_kurtosis": float(mp.mpf(6) / d_h),
            "entropy": float(vg.entropy_mp(d_h, s, dps=DPS)),
            "kl_to_gaussian": float(vg.kl_to_gaussian_mp(d_h, dps=DPS)),
        }


def run(args: argparse.Namespace) -> int:
    sq, sk = resolve_sigmas(args)
    out = elementwise_summary(args.dh, sq, sk)
    emit(out, args.json, command="elementwise", title=f"W_QK entry law, d_h={args.dh}, sigma_q={sq:g}, sigma_k={sk:g}")
    return 0
