"""WeightWatcher's Marchenko–Pastur fit and randomised-spectrum distance, per matrix (numpy).

Per-matrix functions, not registry records: the MP fit is a grid search with a Nelder–Mead
polish and the distance needs the matrix's entries, neither a batched function of λ alone.

MP fit (WeightWatcher 0.7.7 ``mp_fit`` with ``rescale=True``, ``fit_density_with_range``,
``resid_mp``): λ = s²(W) as :mod:`.heavy_tail`, M = min(m, n), Q = max(m, n)/M; x = λ M / Σλ (mean
1). The fitted values are y = x (y = √x when Q = 1, the quarter-circle law), their density a
linear-kernel KDE of bandwidth 0.1 on 1000 points of [0, max y + 0.5], kept where it exceeds 0.01.
σ minimises Σ (ρ_MP(y; Q, σ) − KDE(y))² (a residual of 1000 at every point when the MP edges b_±
miss the KDE's peak or range) by ``scipy.optimize.brute``'s steps over σ ∈ [0.05 s₀, 2 s₀) in
steps of 0.01 s₀, s₀ = √(x_max)/(1 + Q^{−1/2}), polished by ``fmin`` (:func:`fmin_1d`).
Then λ₊ = σ²(1 + Q^{−1/2})²,
num_spikes = #{x > λ₊ + √(Q^{−1/2} λ₊^{2/3} M^{−2/3})} (a Tracy–Widom margin),
mp_softrank = λ₊ / x_max (Martin & Mahoney 2021, JMLR 22(165), Sec. 5).

rand_distance (``apply_random_esd``): the entries of W permuted at random, λ_r = s²(W_perm)
ascending; the Jensen–Shannon distance √(½ KL(p‖m) + ½ KL(q‖m)) (natural log) between the
*sorted vectors* p = λ/Σλ and q = λ_r/Σλ_r, m = (λ + λ_r)/Σ(λ + λ_r), index by index, as WW's
``jensen_shannon_distance`` reads them. WW draws the permutation from numpy's global state; here
it is fixed by a JAX key (:func:`permutation`)."""

from __future__ import annotations

import warnings

import numpy as np

MP_KEYS = ("sigma_mp", "bulk_max", "num_spikes", "mp_softrank")
_GRID, _BW, _THRESH = 1000, 0.1, 0.01


def _kde_linear(y, grid, bw=_BW):
    """Linear-kernel density (1/(n bw)) Σ max(0, 1 − |g − y_i|/bw) at ``grid``."""
    y = np.asarray(y, dtype=np.float64).ravel()
    step = max(1, 2**22 // max(1, y.size))
    out = np.concatenate([
        np.sum(np.maximum(0.0, 1.0 - np.abs(grid[g:g + step, None] - y[None, :]) / bw), axis=1)
        for g in range(0, grid.size, step)])
    return out / (y.size * bw)


def _residual(sigma, xde, yde, xpeak, q):
    sigma = np.asarray(sigma, dtype=np.float64).ravel()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if q == 1:
            ymp = np.nan_to_num((1 / (np.pi * sigma * sigma)) * np.sqrt(4 - xde ** 2))
            return float(np.sum((ymp - yde) ** 2))
        b = (sigma * (1 + np.sqrt(1 / q))) ** 2
        a = (sigma * (1 - np.sqrt(1 / q))) ** 2
        if b < xpeak or b > xde.max() or a > xpeak:
            return 1000.0 ** 2 * xde.size
        ymp = np.nan_to_num((1 / (2 * np.pi * sigma * sigma * xde * (1 / q)))
                            * np.sqrt((b - xde) * (xde - a)))
    return float(np.sum((ymp - yde) ** 2))


def _residuals(sigmas, xde, yde, xpeak, q):
    """:func:`_residual` at every σ of ``sigmas`` at once (the brute-force grid)."""
    s = np.asarray(sigmas, dtype=np.float64)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if q == 1:
            ymp = np.nan_to_num((1 / (np.pi * s * s)) * np.sqrt(4 - xde ** 2))
            return np.sum((ymp - yde) ** 2, axis=1)
        b = (s * (1 + np.sqrt(1 / q))) ** 2
        a = (s * (1 - np.sqrt(1 / q))) ** 2
        ymp = np.nan_to_num((1 / (2 * np.pi * s * s * xde * (1 / q)))
                            * np.sqrt((b - xde) * (xde - a)))
    out = np.sum((ymp - yde) ** 2, axis=1)
    bad = ((b < xpeak) | (b > xde.max()) | (a > xpeak))[:, 0]
    return np.where(bad, 1000.0 ** 2 * xde.size, out)


def fmin_1d(f, x0: float, tol: float = 1e-4, maxiter: int = 200) -> float:
    """``scipy.optimize.fmin(f, x0)[0]`` for one variable, step for step (its simplex
    ``x0, 1.05 x0``, coefficients 1, 2, ½, ½, stop rule, call limit and stable sort), without
    scipy.optimize's half-second import."""
    calls = [0]

    def g(x):
        if calls[0] >= maxiter:
            raise StopIteration
        calls[0] += 1
        return float(f(x))

    x0 = np.float64(x0)
    sim = [x0, x0 * 1.05 if x0 != 0 else np.float64(0.00025)]
    fs = [np.inf, np.inf]
    try:
        for k in range(2):
            fs[k] = g(sim[k])
    except StopIteration:
        pass
    _sort(sim, fs)
    iterations = 1
    while calls[0] < maxiter and iterations < maxiter:
        try:
            if abs(sim[1] - sim[0]) <= tol and abs(fs[0] - fs[1]) <= tol:
                break
            _nm_step(g, sim, fs)
            iterations += 1
        except StopIteration:
            pass
        _sort(sim, fs)
    return float(sim[0])


def _sort(sim, fs) -> None:
    """numpy's stable argsort of two values (NaN last), applied in place."""
    if fs[1] < fs[0] or (np.isnan(fs[0]) and not np.isnan(fs[1])):
        sim.reverse()
        fs.reverse()


def _nm_step(g, sim, fs) -> None:
    """One scipy Nelder–Mead iteration at N = 1 on ``sim = [best, worst]``, in place."""
    xbar = sim[0] / 1
    xr = 2 * xbar - sim[1]
    fxr = g(xr)
    if fxr < fs[0]:
        xe = 3 * xbar - 2 * sim[1]
        fxe = g(xe)
        sim[1], fs[1] = (xe, fxe) if fxe < fxr else (xr, fxr)
        return
    if fxr < fs[1]:
        xc = 1.5 * xbar - 0.5 * sim[1]
        fxc = g(xc)
        if fxc <= fxr:
            sim[1], fs[1] = xc, fxc
            return
    else:
        xcc = 0.5 * xbar + 0.5 * sim[1]
        fxcc = g(xcc)
        if fxcc < fs[1]:
            sim[1], fs[1] = xcc, fxcc
            return
    sim[1] = sim[0] + 0.5 * (sim[1] - sim[0])
    fs[1] = g(sim[1])


def mp_fit(lam, m: int, n: int) -> dict:
    """WeightWatcher's MP fit (module docstring) of the spectrum ``lam`` (M values, any order) of
    an (m, n) matrix: ``{sigma_mp, bulk_max, num_spikes, mp_softrank}``; sigma_mp on the mean-1
    scale of x, bulk_max = λ₊ Σλ/M in λ's units (as WW reports them)."""
    lam = np.sort(np.asarray(lam, dtype=np.float64))
    big, small = max(m, n), min(m, n)
    q = big / small
    x = lam * (lam.size / np.sum(lam))
    xmax = float(np.max(x))
    s0 = np.sqrt(xmax / (1 + 1 / np.sqrt(q)) ** 2)
    y = np.sqrt(x) if q == 1 else x
    xde = np.linspace(0, np.max(y) + 0.5, _GRID)
    yde = _kde_linear(y, xde)
    xpeak = xde[np.argmax(yde)]
    keep = yde > _THRESH
    xde, yde = xde[keep], yde[keep]
    # scipy.optimize.brute's steps, its grid evaluated at once: np.mgrid, first argmin, fmin
    grid = np.mgrid[slice(0.05 * s0, 2.0 * s0, 0.01 * s0)]
    start = grid[np.argmin(_residuals(grid, xde, yde, xpeak, q))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sigma = fmin_1d(lambda s: _residual(s, xde, yde, xpeak, q), start)
    bulk_max = (sigma * (1 + 1 / np.sqrt(q))) ** 2
    tw = 1 / np.sqrt(q) * bulk_max ** (2 / 3) * small ** (-2 / 3)
    return {"sigma_mp": sigma, "bulk_max": bulk_max * np.sum(lam) / lam.size,
            "num_spikes": float(np.sum(x > bulk_max + np.sqrt(tw))),
            "mp_softrank": bulk_max / xmax}


def js_distance(lam, lam_rand) -> float:
    """WW's Jensen–Shannon distance of two sorted spectra read as probability vectors."""
    p = np.sort(np.asarray(lam, dtype=np.float64))
    r = np.sort(np.asarray(lam_rand, dtype=np.float64))
    m = p + r
    p, r, m = p / p.sum(), r / r.sum(), m / m.sum()

    def kl(a, b):
        ok = a > 0
        return float(np.sum(a[ok] * np.log(a[ok] / b[ok])))

    return float(np.sqrt(0.5 * kl(p, m) + 0.5 * kl(r, m)))


def permutation(key, size: int) -> np.ndarray:
    """A permutation of ``range(size)`` fixed by the JAX ``key`` (or its ``key_data``, uint32):
    ``np.random.default_rng(seed).permutation(size)`` with the key's data as the PCG64 seed
    (``jax.random.permutation`` costs ~1 s at 6·10⁵ entries on one CPU core). Computed as the
    same generator's shuffle of an int32 ``arange``: numpy's 1-d shuffle draws the same bounded
    integers whatever the item size, so the permutation is that one, in a third less time."""
    import jax

    data = key if isinstance(key, np.ndarray) else jax.random.key_data(key)
    seed = np.asarray(data, dtype=np.uint32).ravel().tolist()
    out = np.arange(int(size), dtype=np.int32 if size <= np.iinfo(np.int32).max else np.int64)
    np.random.default_rng(seed).shuffle(out)
    return out


def rand_distance(w, key, lam=None) -> float:
    """WW's ``rand_distance`` of the matrix ``w`` (m, n), its entries permuted by
    :func:`permutation` of ``key``; ``lam``: w's spectrum if already computed."""
    from .heavy_tail import matrix_spectrum

    w = np.asarray(w, dtype=np.float64)
    shuffled = w.reshape(-1)[permutation(key, w.size)].reshape(w.shape)
    return js_distance(matrix_spectrum(w) if lam is None else lam, matrix_spectrum(shuffled))


def spectrum_table(lam, m: int, n: int) -> dict:
    """Every metric but rand_distance of spectra ``lam`` ``(k, M)`` of (m, n) matrices, batched
    (:func:`rmtbase.stats.heavy_tail.spectrum_metrics`) and per spectrum (:func:`mp_fit`):
    ``{name: (k,)}`` with ``mp_softrank``, ``num_spikes``, ``bulk_max`` and ``sum_lambda``."""
    import jax
    import jax.numpy as jnp

    from .heavy_tail import spectrum_metrics

    lam = np.atleast_2d(np.asarray(lam, dtype=np.float64))
    with jax.enable_x64(True):
        got = {k: np.asarray(v, dtype=np.float64)
               for k, v in spectrum_metrics(jnp.asarray(lam)).items()}
    mp = [mp_fit(row, m, n) for row in lam]
    for k in ("mp_softrank", "num_spikes", "bulk_max"):
        got[k] = np.asarray([r[k] for r in mp], dtype=np.float64)
    got["sum_lambda"] = lam.sum(axis=1)
    return got


__all__ = ["MP_KEYS", "js_distance", "mp_fit", "permutation", "rand_distance",
           "spectrum_table"]
