"""Self-normalised statistics: a statistic with ``STAT_INFO[stat]["sigma_power"]`` p ≠ 0 is divided
by scale^p (rms_Q^p, rms_K^p or (rms_Q rms_K)^p; ``w.*`` by its rms), or shifted by −p ln(scale)
for ``scaling="log"``, for head and draw alike. Under W = σ G its law is then free of σ, so the
σ = 1 null draws give it exactly. Null mean and std are reported in raw units."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, ModelError


def _matrix_scale(name: str, rms_q, rms_k):
    matrix = name.split(".", 1)[0]
    if matrix in ("q", "w"):  # w.*: a whole matrix (rmtbase.scoring.matrices.components), its rms as rms_q
        return np.asarray(rms_q, dtype=np.float64)
    if matrix == "k":
        return np.asarray(rms_k, dtype=np.float64)
    if matrix == "qk":
        return np.asarray(rms_q, dtype=np.float64) * np.asarray(rms_k, dtype=np.float64)
    raise InputError(f"statistic {name!r} is not of the form q.*, k.*, qk.* or w.*")


def scaling(name: str) -> tuple[float, str]:
    """(sigma_power, scaling) of ``<matrix>.<stat>`` from STAT_INFO."""
    from ..stats import STAT_INFO

    bare = name.split(".", 1)[1] if "." in name else name
    if bare not in STAT_INFO:
        raise InputError(f"unknown statistic {name!r}")
    info = STAT_INFO[bare]
    return float(info.get("sigma_power", 0)), str(info.get("scaling", "power"))


def normalise(name: str, value, rms_q, rms_k) -> np.ndarray:
    """Self-normalised form of statistic ``name``: value / scale^p, or value − p ln scale."""
    p, how = scaling(name)
    value = np.asarray(value, dtype=np.float64)
    if p == 0:
        return value
    scale = _matrix_scale(name, rms_q, rms_k)
    if how == "log":
        return value - p * np.log(scale)
    return value / scale**p


def _to_raw(name: str, x, rms_q, rms_k, *, spread: bool = False) -> np.ndarray:
    """A self-normalised location (or, with ``spread``, a spread) back in raw units."""
    p, how = scaling(name)
    x = np.asarray(x, dtype=np.float64)
    if p == 0:
        return x + 0 * np.asarray(rms_q)
    scale = _matrix_scale(name, rms_q, rms_k)
    if how == "log":
        return x + (0 * scale if spread else p * np.log(scale))
    return x * scale**p


def _check_rms(rms_q, rms_k):
    for r in (rms_q, rms_k):
        if np.any(~np.isfinite(r)) or np.any(r <= 0):
            raise ModelError("a head has zero or non-finite W_Q/W_K entries; cannot score it")
