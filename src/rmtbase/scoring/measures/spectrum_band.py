"""The null band of the spectrum figure: quantiles of the sorted self-normalised null spectrum
(:func:`null_spectrum_band`; shipped for the seed shapes, else drawn)."""

from __future__ import annotations

import numpy as np

#: Quantiles of the sorted normalised null spectrum stored for the spectrum figure.
SPECTRUM_QUANTILES = (0.025, 0.5, 0.975)


def null_spectrum_band(d: int, d_h: int, n_draws: int = 200, *, seed: int = 0,
                       share_table: bool = True) -> np.ndarray:
    """Quantiles :data:`SPECTRUM_QUANTILES` of the sorted null spectrum, (quantiles, d_h).

    x_k = λ_k / (rms_Q² rms_K² d²) per draw, key ``fold_in(key(seed), 0x5EC7)``; shipped shapes'
    bands ship. ``share_table``: reuse the spectral table's program, else
    :func:`rmtbase.baseline.null.lambda_draws`; the band is the same either way."""
    from ...baseline.shipped import shipped_band

    band = shipped_band(d, d_h, n_draws, seed, SPECTRUM_QUANTILES)
    return _drawn_spectrum_band(d, d_h, n_draws, seed, share_table) if band is None else band


def _drawn_spectrum_band(d: int, d_h: int, n_draws: int, seed: int,
                         share_table: bool = True) -> np.ndarray:
    """:func:`null_spectrum_band` from its draws (what the shipped bands were made with)."""
    import jax

    from ...baseline.null import lambda_draws

    key = jax.random.fold_in(jax.random.key(seed), 0x5EC7)
    # λ as the spectral tables draw it (return_lambda): the same compiled program as the
    # shape's spectral table (share_table), where return_spectrum (λ/d² on the device) was a
    # second one; or without the statistics where no such table shares it
    nd = lambda_draws(key, d, d_h, n_draws, statistics=share_table)
    rms2 = np.asarray(nd["q.rms"], np.float64) ** 2 * np.asarray(nd["k.rms"], np.float64) ** 2
    x = np.asarray(nd["qk.lambda"], dtype=np.float64) / (float(d) ** 2 * rms2[:, None])
    return np.quantile(x, SPECTRUM_QUANTILES, axis=0)


__all__ = ["SPECTRUM_QUANTILES", "null_spectrum_band"]
