"""Study ``weibull_anchor``: the Weibull paper's (seed 002, arXiv:2605.18898) checkable claims.

The half-normal anchor (k0, λ0/σ) at 80, 90 and 100 % trims from the continuum
(:mod:`rmtbase.analytic.weibull`) and from simulated 64 × 768 and 512 × 2048 Gaussian matrices;
the noise curve V(p) = p / ((1 − p) ln²(1 − p)), its minimiser p* and a Monte Carlo check; the
anchor of a half-normal mixture (:func:`mixture_anchor`); the verdict table
(``weibull_verdicts.md`` / ``.csv``); ``weibull_fits.png``, ``weibull_noise_curve.png``."""

from __future__ import annotations

import math

import numpy as np

from . import _output as io

#: Trims: name -> (a, b) interval of F kept by the fit.
TRIMS = {"80": (0.10, 0.90), "90": (0.05, 0.95), "100": (0.0, 1.0)}
#: The trim fraction passed to element_stats for each trim name.
TRIM_FRACTION = {"80": 0.8, "90": 0.9, "100": 1.0}


# --- thin adapters to the library's analytic module ------------------------------------------

def _anchor(a: float, b: float) -> tuple[float, float]:
    """(k0, λ0/σ) of the protocol over F ∈ [a, b] for half-normal |w| (continuum)."""
    from ..analytic import weibull as aw

    k, lam = aw.anchor(a, b)
    return float(k), float(lam)


def noise_curve(p):
    """V(p) = p / ((1 − p) ln²(1 − p)) (seed 002 eq. (3)); numpy, vectorised."""
    p = np.asarray(p, dtype=np.float64)
    return p / ((1.0 - p) * np.log1p(-p) ** 2)


def _p_star() -> float:
    from ..analytic import weibull as aw

    return float(aw.p_star())


# --- independent computations of this study ---------------------------------------------------

def mixture_anchor(weights, sigmas, a=0.1, b=0.9, n_nodes=400) -> tuple[float, float]:
    """Protocol fit (k, λ) of a mixture of half-normals, continuum limit, by quadrature.

    |w| has CDF F(x) = Σ_j π_j erf(x / (σ_j √2)); k = Cov(ln x, Y)/Var(ln x) with F uniform on
    [a, b], λ = exp(mean ln x − mean Y / k). Gauss–Legendre in u with F = a + (b − a) u²;
    x(F) by root-finding. Independent of :mod:`rmtbase.analytic.weibull`."""
    from scipy.optimize import brentq
    from scipy.special import erf

    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    s = np.asarray(sigmas, dtype=np.float64)
    u, wu = np.polynomial.legendre.leggauss(n_nodes)
    # two-sided substitution F = a + (b − a)·t, t = (1 − cos(π v))/2: clusters nodes at both ends
    v = (u + 1) / 2
    t = (1 - np.cos(np.pi * v)) / 2
    dt = np.pi / 2 * np.sin(np.pi * v) / 2  # dt/dv · dv/du
    F = a + (b - a) * t
    weight = wu * dt
    weight = weight / weight.sum()

    def cdf(x):
        return float(np.sum(w * erf(x / (s * math.sqrt(2)))))

    hi = 50 * s.max()
    lnx = np.array([math.log(brentq(lambda x, f=f: cdf(x) - f, 1e-300, hi, xtol=1e-300,
                                    rtol=1e-15, maxiter=500)) for f in F])
    Y = np.log(-np.log1p(-F))
    mx, my = np.sum(weight * lnx), np.sum(weight * Y)
    k = np.sum(weight * (lnx - mx) * (Y - my)) / np.sum(weight * (lnx - mx) ** 2)
    return float(k), float(math.exp(mx - my / k))


def _simulate_fits(key, shape, n_mats, chunk):
    """Protocol fits (k, λ) at the three trims of ``n_mats`` N(0, 1) matrices of ``shape``."""
    import jax
    import jax.numpy as jnp

    from ..stats.elementwise import element_stats

    out = {t: {"k": [], "lam": []} for t in TRIMS}
    fns = {t: jax.jit(lambda w, tr=TRIM_FRACTION[t]: element_stats(w, trim=tr)) for t in TRIMS}
    for start in range(0, n_mats, chunk):
        idx = jnp.arange(start, min(start + chunk, n_mats))
        w = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), shape,
                                                 dtype=jnp.float32))(idx)
        for t in TRIMS:
            st = fns[t](w)
            out[t]["k"].append(np.asarray(st["weibull_k"]))
            out[t]["lam"].append(np.asarray(st["weibull_lambda"]))
    return {t: {q: np.concatenate(v) for q, v in d.items()} for t, d in out.items()}


def _noise_mc(key, n, reps, probs):
    """N·Var[Y(F̂_N(x_p))] over ``reps`` samples of N half-normal draws, at each p."""
    import jax
    import jax.numpy as jnp
    from scipy.special import erfinv

    xp = jnp.asarray(math.sqrt(2) * erfinv(np.asarray(probs)))

    def one(i):
        x = jnp.abs(jax.random.normal(jax.random.fold_in(key, i), (n,), dtype=jnp.float32))
        f = jnp.searchsorted(jnp.sort(x), xp) / n
        return jnp.log(-jnp.log1p(-f))

    ys = np.asarray(jax.jit(jax.vmap(one))(jnp.arange(reps)))
    return n * ys.var(axis=0, ddof=1)


def _pearson_through_origin(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    return float(np.corrcoef(x, y)[0, 1]), float(np.sum(x * y) / np.sum(x * x))


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study; see the module docstring. Returns figures, data and a summary."""
    import jax

    from . import _weibull_verdicts as verdicts

    out = io.prepare(out_dir)
    key = jax.random.key(seed)
    n_head, n_block, n_rep = (40, 3, 400) if quick else (1000, 60, 4000)

    cont = {t: _anchor(*ab) for t, ab in TRIMS.items()}
    head = _simulate_fits(jax.random.fold_in(key, 1), (64, 768), n_head, 20)
    block = _simulate_fits(jax.random.fold_in(key, 2), (512, 2048), n_block, 1)
    p_star = _p_star()
    probs = np.array([0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98])
    mc_v = _noise_mc(jax.random.fold_in(key, 3), 20_000, n_rep, probs)

    rows = []
    for t in TRIMS:
        for size, fits in (("64x768", head), ("512x2048", block)):
            k, lam = fits[t]["k"], fits[t]["lam"]
            rows.append(dict(trim=t, matrix=size, n_matrices=k.size,
                             k_continuum=cont[t][0], k_mean=k.mean(), k_std=k.std(ddof=1),
                             k_sem=k.std(ddof=1) / math.sqrt(k.size),
                             lam_continuum=cont[t][1], lam_mean=lam.mean(),
                             lam_std=lam.std(ddof=1)))
    data = [io.write_csv(rows, out / "weibull_fits.csv")]
    data.append(io.write_csv(
        [dict(p=p, V_exact=v, V_mc=m) for p, v, m in zip(probs, noise_curve(probs), mc_v,
                                                          strict=True)],
        out / "weibull_noise_curve.csv"))

    table = verdicts.build(cont=cont, head=head, block=block, p_star=p_star,
                           mixture_anchor=mixture_anchor, noise_curve=noise_curve)
    data.append(io.write_csv(table, out / "weibull_verdicts.csv"))
    data.append(io.write_text(verdicts.markdown(table, quick=quick), out / "weibull_verdicts.md"))

    figures = [_figure_fits(out, cont, head), _figure_noise(out, p_star, probs, mc_v, n_rep)]
    held = sum(r["holds"] == "yes" for r in table)
    return {"figures": figures, "data": data,
            "summary": {"k0": cont["80"][0], "lambda0_over_sigma": cont["80"][1],
                        "p_star": p_star, "claims_checked": len(table), "claims_holding": held}}


def _figure_fits(out, cont, head):
    from .. import plot

    fig, axes = io.figure(1, 2, size=(5.0, 3.6))
    ak, al = axes[0]
    allk = np.concatenate([head[t]["k"] for t in TRIMS])
    alll = np.concatenate([head[t]["lam"] for t in TRIMS])
    rk = (allk.min() - 0.01, allk.max() + 0.01)
    rl = (alll.min() - 0.005, alll.max() + 0.005)
    for i, t in enumerate(TRIMS):
        c = plot.series_color(i)
        plot.hist_density(head[t]["k"], bins=40, range=rk, ax=ak, color=c,
                          label=f"{t}% trim, simulated")
        ak.axvline(cont[t][0], color=c, ls="--", lw=1.2)
        plot.hist_density(head[t]["lam"], bins=40, range=rl, ax=al, color=c,
                          label=f"{t}% trim")
        al.axvline(cont[t][1], color=c, ls="--", lw=1.2)
    ak.axvspan(1.186, 1.204, color="#F0E442", alpha=0.3, lw=0, label="paper's band [1.186, 1.204]")
    ak.set_xlabel("Weibull shape k (protocol fit of |w|)")
    al.set_xlabel("Weibull scale λ/σ")
    ak.set_title(f"{head['80']['k'].size} Gaussian 64×768 matrices; dashed: continuum", fontsize=9)
    ak.legend(fontsize=7)
    al.legend(fontsize=7)
    return io.save_figure(fig, out / "weibull_fits.png")


def _figure_noise(out, p_star, probs, mc_v, n_rep):
    from .. import plot

    fig, axes = io.figure(1, 1, size=(6.0, 4.0))
    ax = axes[0, 0]
    p = np.linspace(0.005, 0.995, 600)
    vmin = noise_curve(p_star)
    plot.analytic_curve(p, noise_curve(p) / vmin, ax=ax, ls="-",
                        label="V(p)/V(p*), V = p/((1−p)ln²(1−p))")
    se = mc_v * math.sqrt(2 / (n_rep - 1))
    ax.errorbar(probs, mc_v / vmin, yerr=se / vmin, fmt="o", ms=4, color=plot.series_color(0),
                label=f"Monte Carlo N·Var[Y(F̂)], N = 20000, {n_rep} reps")
    ax.axvspan(0, 0.1, color=plot.OKABE_ITO[6], alpha=0.15, lw=0, label="bottom 10 %")
    ax.axvspan(0.9, 1.0, color=plot.OKABE_ITO[1], alpha=0.15, lw=0, label="top 10 %")
    ax.axvline(p_star, color=plot.OKABE_ITO[3], ls=":", label=f"p* = {p_star:.4f}")
    ax.set_yscale("log")
    ax.set_ylim(0.8, 100)
    ax.set_xlabel("cumulative fraction p")
    ax.set_ylabel("Var(Y) / Var(Y)_min")
    ax.legend(fontsize=7)
    return io.save_figure(fig, out / "weibull_noise_curve.png")
