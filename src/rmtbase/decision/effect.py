"""How far a head is from random, on a scale that does not saturate: ``distance``, ``head_effect``.

For a self-normalised value v and self-normalised null draws X_1…X_N,
distance_s = (g(v) − mean g(X)) / sd g(X) (ddof 1, finite draws), g from :data:`TRANSFORM`.
``head_effect`` is the max |distance| over the head's decision family, ``head_top_stat`` its
statistic; descriptive. :func:`natural_effect` gives ``effect_size`` in the statistic's units."""

from __future__ import annotations

import numpy as np

from ..stats.statistic import transforms

#: Variance-stabilising transform per bare statistic name ("log", "log3" = log(x + 3),
#: "identity"), derived from the records' ``effect``/``offset`` (:mod:`rmtbase.stats.
#: statistic`); statistics not listed use the identity.
TRANSFORM = transforms()


def transform_of(name: str) -> str:
    """The transform (:data:`TRANSFORM`) of ``<matrix>.<stat>`` or a bare statistic name (a
    statistic registered beyond them: its record's)."""
    from ..stats.statistic import REGISTRY

    bare = name.split(".", 1)[-1]
    if bare in TRANSFORM:
        return TRANSFORM[bare]
    record = REGISTRY.get(bare)
    return "identity" if record is None else record.transform


def transformed(name: str, x) -> np.ndarray:
    """g(x) for statistic ``name``; values outside g's domain give −inf/NaN (not finite)."""
    x = np.asarray(x, dtype=np.float64)
    how = transform_of(name)
    with np.errstate(divide="ignore", invalid="ignore"):
        if how == "log":
            return np.log(x)
        if how == "log3":
            return np.log(x + 3.0)
    return x


def null_moments(name: str, draws) -> tuple[float, float]:
    """(mean, sd with ddof 1) of g over the finite transformed null draws (NaN if < 2)."""
    g = transformed(name, draws)
    g = g[np.isfinite(g)]
    if g.size < 2:
        return np.nan, np.nan
    return float(g.mean()), float(g.std(ddof=1))


def distance(name: str, value, mean: float, sd: float) -> np.ndarray:
    """Signed distance of self-normalised ``value`` from the null in sd of g (module
    docstring); NaN where the null has no spread, ±inf where g(value) is infinite."""
    g = transformed(name, value)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 0, (g - mean) / sd, np.nan)


def head_effect(dist, names, family) -> tuple[np.ndarray, np.ndarray]:
    """(head_effect, head_top_stat) from ``dist`` (..., stat) over statistic ``names``: the
    largest finite |distance| over the family and its statistic ("" where none is finite)."""
    dist = np.asarray(dist, dtype=np.float64)
    fam = [names.index(n) for n in family]
    shape = dist.shape[:-1]
    if not fam:
        return np.full(shape, np.nan), np.full(shape, "", dtype=object)
    a = np.abs(dist[..., fam])
    ok = np.isfinite(a)
    best = np.argmax(np.where(ok, a, -1.0), axis=-1)
    eff = np.take_along_axis(np.where(ok, a, np.nan), best[..., None], axis=-1)[..., 0]
    top = np.where(ok.any(axis=-1), np.array(family, dtype=object)[best], "")
    return eff, top


#: The null's central band of :func:`natural_effect` (2.5 % and 97.5 % quantiles).
BAND = (0.025, 0.975)


def effect_kind(name: str) -> tuple[str, float]:
    """("ratio", offset) or ("shift", 0.0) of ``<matrix>.<stat>``: a statistic whose transform
    is a log (:data:`TRANSFORM`) is scale-like and compared as a ratio of (value + offset), the
    excess kurtosis as a ratio of β₂ = excess + 3; every other statistic is location-like and
    compared as a shift."""
    how = transform_of(name)
    if how == "log":
        return "ratio", 0.0
    if how == "log3":
        return "ratio", 3.0
    return "shift", 0.0


def natural_effect(name: str, value, draws) -> tuple[np.ndarray, float, float]:
    """Effect of self-normalised ``value`` in the statistic's own units, and the null's band.

    With m the median and (a, b) the :data:`BAND` quantiles of the finite ``draws``: ratio (offset
    c, :func:`effect_kind`) (value + c)/(m + c), band ((a + c)/(m + c), (b + c)/(m + c)); shift
    value − m, band (a − m, b − m). NaN where no draw is finite or m + c ≤ 0."""
    x = np.asarray(draws, dtype=np.float64)
    x = x[np.isfinite(x)]
    v = np.asarray(value, dtype=np.float64)
    if x.size == 0:
        return np.full(v.shape, np.nan), np.nan, np.nan
    m, a, b = np.quantile(x, (0.5, *BAND))
    kind, c = effect_kind(name)
    if kind == "shift":
        return v - m, float(a - m), float(b - m)
    ref = m + c
    if not ref > 0:
        return np.full(v.shape, np.nan), np.nan, np.nan
    return (v + c) / ref, float((a + c) / ref), float((b + c) / ref)


__all__ = ["BAND", "TRANSFORM", "distance", "effect_kind", "head_effect", "natural_effect",
           "null_moments", "transform_of", "transformed"]
