"""Effective depth: which residual-path product does a weight matrix's element law resemble?

Conjecture (seeds, post 004): trained weights resemble elements of the residual-stream product
at initialisation, M_L = ∏_{l=1}^{L} (I + W_l), W_l i.i.d. N(0, σ²) (σ² = 1/d); the best L is an
*effective depth* (cf. Veit, Wilber & Belongie 2016).

* Null sample for a weight (m, n): the block M_L[:m, :n] of a d × d product, diagonal removed;
  weight and block standardised, z = (x − mean) / std (ddof 0).
* Features f (:data:`FEATURES`): excess kurtosis of z, quantiles of |z| at :data:`QUANTILE_PROBS`.
* Distance: D(L) = sqrt(mean_i ((f_i − μ_i(L)) / s_i(L))²), μ, s the null mean and std (ddof 1)
  at depth L.
* Calibration: each null draw's leave-one-out distance gives the null law of D(L),
  p(L) = (1 + #{null D ≥ D(L)}) / (n + 1). The estimate is the depth of largest p (ties: smaller
  D); ``accepted`` = {L : p(L) > 1 − level}, ``interval`` its hull; empty: ``consistent=False``.

All depths come from one chain per draw (M_L = (I + W_L) M_{L−1}, the law of
:func:`rmtbase.ensembles.residual_product`), rescaled by 1/√(1 + σ²d) per layer for float32 range;
draw i uses ``fold_in(key, i)``."""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from ._compiled import many_calls
from ._matmul import mm
from .errors import InputError

#: Probabilities of the |z| quantile profile.
QUANTILE_PROBS = (0.25, 0.5, 0.75, 0.9, 0.99)
#: Names of the shape features, in order.
FEATURES = ("excess_kurtosis", *(f"abs_q{int(round(100 * p))}" for p in QUANTILE_PROBS))


def shape_features(w) -> np.ndarray:
    """The shape feature vector (module docstring) of a matrix's elements, float64, ``(len(FEATURES),)``."""
    x = np.asarray(w, dtype=np.float64).ravel()
    z = (x - x.mean()) / x.std()
    kurt = np.mean(z**4) - 3.0
    return np.concatenate([[kurt], np.quantile(np.abs(z), QUANTILE_PROBS)])


@dataclass(frozen=True)
class DepthNull:
    """Null shape features of residual products: ``features[depth_index, draw, feature]``."""

    depths: np.ndarray
    features: np.ndarray
    shape: tuple[int, int]
    d: int
    sigma2: float
    draws: int

    def summary(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(μ, s, null distances): μ, s ``(n_depths, n_features)``; distances ``(n_depths, draws)``
        are the leave-one-out distances of each draw to the others."""
        mu = self.features.mean(axis=1)
        s = self.features.std(axis=1, ddof=1)
        n = self.features.shape[1]
        dist = np.sqrt(np.mean(((self.features - mu[:, None]) / s[:, None]) ** 2, axis=-1))
        return mu, s, dist * n / (n - 1)


@dataclass(frozen=True)
class EffectiveDepth:
    """Result of :func:`effective_depth`: ``depth``, ``interval``, ``accepted``, per-depth
    ``distances``/``pvalues``/``null_mean``/``null_std``, and the matrix's ``features``."""

    depth: int
    interval: tuple[int, int] | None
    accepted: np.ndarray
    depths: np.ndarray
    distances: np.ndarray
    pvalues: np.ndarray
    features: np.ndarray
    null_mean: np.ndarray
    null_std: np.ndarray
    level: float
    feature_names: tuple[str, ...] = field(default=FEATURES)

    @property
    def consistent(self) -> bool:
        """True when at least one depth's null is not rejected."""
        return self.accepted.size > 0


def _check_shape(shape, d):
    if len(shape) != 2:
        raise InputError(f"effective_depth needs a 2-D matrix, got shape {tuple(shape)}")
    m, n = (int(s) for s in shape)
    if m * n < 100:
        raise InputError(f"matrix too small for a shape estimate: {m}x{n} < 100 elements")
    d = max(m, n) if d is None else int(d)
    if d < max(m, n):
        raise InputError(f"d={d} must be at least the matrix's larger dimension {max(m, n)}")
    return m, n, d


def _check_depths(depths) -> np.ndarray:
    dep = np.asarray(sorted(set(int(x) for x in depths)), dtype=np.int64)
    if dep.size == 0 or dep[0] < 1:
        raise InputError(f"depths must be positive integers, got {list(depths)!r}")
    return dep


def depth_null(shape, *, d=None, depths=range(1, 49), draws=64, key=None, sigma2=None,
               dtype=jnp.float32) -> DepthNull:
    """Shape features of residual-product blocks of ``shape`` at each of ``depths``; ``key``
    defaults to ``jax.random.key(0)``, ``sigma2`` to 1/d."""
    m, n, d = _check_shape(shape, d)
    dep = _check_depths(depths)
    if int(draws) < 20:
        raise InputError(f"draws must be at least 20 for a calibrated interval, got {draws}")
    sigma2 = 1.0 / d if sigma2 is None else float(sigma2)
    if not sigma2 > 0:
        raise InputError(f"sigma2 must be > 0, got {sigma2}")
    key = jax.random.key(0) if key is None else key
    l_max = int(dep[-1])
    keep = np.flatnonzero(~np.eye(m, n, dtype=bool))
    scale = float(np.sqrt(1.0 + sigma2 * d))
    sd = float(np.sqrt(sigma2))

    def one(k):
        def step(mat, layer):
            w = sd * jax.random.normal(jax.random.fold_in(k, layer), (d, d), dtype=dtype)
            mat = (mat + mm(w, mat)) / scale
            return mat, mat[:m, :n]

        _, blocks = jax.lax.scan(step, jnp.eye(d, dtype=dtype), jnp.arange(1, l_max + 1))
        return blocks  # (l_max, m, n)

    chain = jax.jit(one, compiler_options=many_calls())
    feats = np.empty((dep.size, int(draws), len(FEATURES)))
    for i in range(int(draws)):
        blocks = np.asarray(chain(jax.random.fold_in(key, i)))
        for j, L in enumerate(dep):
            feats[j, i] = shape_features(blocks[L - 1].ravel()[keep])
    return DepthNull(depths=dep, features=feats, shape=(m, n), d=d, sigma2=sigma2,
                     draws=int(draws))


def effective_depth(w, *, d=None, depths=range(1, 49), draws=64, key=None, null=None,
                    level=0.95, sigma2=None) -> EffectiveDepth:
    """Match the element law of 2-D ``w`` to the residual-product depth it most resembles.
    ``null``: a :func:`depth_null` of the same shape, else one is drawn (``d`` defaults to
    ``w``'s larger side); ``level``: confidence of the accepted set."""
    w = np.asarray(w)
    if w.ndim != 2:
        raise InputError(f"effective_depth needs a 2-D matrix, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise InputError("matrix has non-finite entries")
    if not 0 < level < 1:
        raise InputError(f"level must be in (0, 1), got {level}")
    if null is None:
        null = depth_null(w.shape, d=d, depths=depths, draws=draws, key=key, sigma2=sigma2)
    elif tuple(null.shape) != tuple(w.shape):
        raise InputError(f"null was drawn for shape {null.shape}, matrix has shape {w.shape}")
    f = shape_features(w)
    mu, s, null_dist = null.summary()
    dist = np.sqrt(np.mean(((f - mu) / s) ** 2, axis=-1))
    n = null_dist.shape[1]
    pval = (1.0 + np.sum(null_dist >= dist[:, None], axis=1)) / (n + 1.0)
    order = np.lexsort((dist, -pval))
    accepted = null.depths[pval > 1.0 - level]
    interval = (int(accepted.min()), int(accepted.max())) if accepted.size else None
    return EffectiveDepth(depth=int(null.depths[order[0]]), interval=interval, accepted=accepted,
                          depths=null.depths, distances=dist, pvalues=pval, features=f,
                          null_mean=mu, null_std=s, level=float(level))
