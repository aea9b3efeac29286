"""Spectral statistics of W_QK = W_Qᵀ W_K from its factors, never from the d×d product.

λ_k = s_k², the squared singular values of W_QK, d_h of them nonzero, descending (no 1/√d factor).
With W_Q = L_Q U_Q (U_Q orthonormal rows; L_Q = R_Qᵀ from the thin QR of W_Qᵀ, or the Gram's
Cholesky factor), likewise W_K, W_QK = U_Qᵀ (L_Qᵀ L_K) U_K, so λ are the squared singular values
of the d_h×d_h core C = L_Qᵀ L_K (= eig(G_Q G_K)): O(d d_h²) instead of O(d³); the QR route is
backward stable for ill-conditioned trained weights.

References: Marchenko & Pastur (1967); MP_c ⊠ MP_c for λ/(σ_Q²σ_K²d²), c = d_h/d: Burda,
Jarosz, Livan, Nowak & Swiech (2010); Mingo & Speicher (2017)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._matmul import mm
from ..errors import InputError
from ..registry import Names, plugin_call
from ._bisection import tridiagonal_eigvals
from .statistic import REGISTRY, STATISTICS
from .statistic import spectral as _spectral


def _spectral_records(statistics=None):
    return _spectral(STATISTICS if statistics is None else statistics)


#: Names of the spectral statistics, in registry order (:mod:`.statistic`; a live view: a
#: spectral statistic registered later, or by a plugin, is in it).
SPECTRAL_STATS = Names(REGISTRY, lambda s: s.kind == "spectral")
#: The shipped spectral statistics' names: those a default score computes.
SHIPPED_SPECTRAL = tuple(s.name for s in _spectral(STATISTICS))


def core_from_factors(wq, wk):
    """The d_h×d_h core C = R_Q R_Kᵀ (R-only thin QR of wqᵀ, wkᵀ ``(..., d, d_h)``), s(C) = s(W_QK).
    """
    wq, wk = jnp.broadcast_arrays(jnp.asarray(wq), jnp.asarray(wk))
    # one batched QR for both factors (wq = rqᵀ Qᵀ): two LAPACK custom calls in flight at once
    # can deadlock jaxlib's CPU thread pool, each waiting for workers the other holds
    r = jnp.linalg.qr(jnp.swapaxes(jnp.stack([wq, wk]), -1, -2), mode="r")
    return mm(r[0], jnp.swapaxes(r[1], -1, -2))


def _squared_singular_values(c):
    s = jnp.linalg.svd(c, compute_uv=False)  # descending
    return s * s


def eigvals_from_factors(wq, wk):
    """Nonzero eigenvalues λ of W_QK W_QKᵀ, W_QK = wqᵀ wk, from d_h×d_h cores; ``(..., d_h)``.

    wq, wk: ``(..., d_h, d)``, computed in their dtype. λ descending (exact zeros for a
    rank-deficient factor); never forms the d×d product."""
    return _squared_singular_values(core_from_factors(wq, wk))


def eigvals_from_cholesky(lq, lk):
    """λ = s²(lqᵀ lk), descending, from lower-triangular Gram factors ``(..., d_h, d_h)``, G = l lᵀ.
    """
    lq = jnp.asarray(lq)
    lk = jnp.asarray(lk)
    return _squared_singular_values(mm(jnp.swapaxes(lq, -1, -2), lk))


#: Largest first-order relative error the null's Gram route (:func:`null_eigvals_by_grams`)
#: may carry on any λ: eps·B ≤ this, B the per-draw bound on κ(G_Q) and κ(G_K), else the draw
#: takes the QR route.
GRAM_MAX_REL_ERROR = 1e-3


def null_eigvals_by_grams(w):
    """λ of W_QK = w[0]ᵀ w[1] for a null draw's factors ``w`` ``(2, d_h, d)`` (float32), descending;
    returns ``(λ, used_grams)``. Gram route: G = W Wᵀ, Cholesky L, λ = s²(L_Qᵀ L_K)
    (:func:`eigvals_from_cholesky`). Rounding G perturbs λ by a relative u·(κ(G_Q) + κ(G_K))
    (Ostrowski), so each draw is checked: B = ‖G_Q‖_∞ ‖G_K‖_∞ / λ_min bounds both κ(G) from above; a
    draw with eps·B > :data:`GRAM_MAX_REL_ERROR`, or a failed Cholesky (NaN), takes the QR route
    (:func:`eigvals_from_factors`, ``lax.cond``)."""
    g = mm(w, jnp.swapaxes(w, -1, -2))
    ell = jax.lax.linalg.cholesky(g, symmetrize_input=False)
    lam = eigvals_from_cholesky(ell[0], ell[1])
    norms = jnp.max(jnp.sum(jnp.abs(g), axis=-1), axis=-1)  # ‖G_Q‖_∞, ‖G_K‖_∞
    bound = norms[0] * norms[1] / lam[-1]
    ok = jnp.finfo(w.dtype).eps * bound <= GRAM_MAX_REL_ERROR  # False for NaN or inf
    lam = jax.lax.cond(ok, lambda: lam, lambda: eigvals_from_factors(w[0], w[1]))
    return lam, ok


def bidiagonal_core(diag, sub, lk):
    """C = Bᵀ lk (lower Hessenberg) for B lower bidiagonal, in O(n²): row i is
    b_ii lk_i + b_{i+1,i} lk_{i+1}. Shapes as in :func:`eigvals_from_bidiagonal`."""
    diag = jnp.asarray(diag)
    sub = jnp.asarray(sub)
    lk = jnp.asarray(lk)
    zero = jnp.zeros((*sub.shape[:-1], 1), sub.dtype)
    sub_pad = jnp.concatenate([sub, zero], axis=-1)  # B_{i+1,i}, 0 for the last row
    lk_next = jnp.concatenate([lk[..., 1:, :], jnp.zeros_like(lk[..., :1, :])], axis=-2)
    return diag[..., :, None] * lk + sub_pad[..., :, None] * lk_next


#: the eigen routes of :func:`eigvals_from_bidiagonal`
EIG_METHODS = ("svd", "eigh", "eigvalsh", "jacobi", "jacobi_pallas", "hestenes",
               "hestenes_pallas")


def eigvals_from_bidiagonal(diag, sub, lk, method="svd"):
    """λ = s²(Bᵀ lk), descending, for B lower bidiagonal (``diag`` ``(..., n)``, ``sub`` ``(..., n−1)``).

    C = Bᵀ lk is lower Hessenberg (O(n²)). method:

    - ``"svd"``: λ = s(C)², relative error eps·√κ;
    - ``"eigh"``: eig(C Cᵀ) by tridiagonalisation and Sturm bisection, absolute error
      ≈ n·eps·λ_max (Wilkinson), so only for small κ; clipped at 0;
    - ``"eigvalsh"``: :func:`jax.numpy.linalg.eigvalsh` of C Cᵀ, the same bound;
    - ``"jacobi"``, ``"jacobi_pallas"``: parallel cyclic Jacobi on C Cᵀ, the same bound;
    - ``"hestenes"``, ``"hestenes_pallas"``: one-sided Jacobi s(C)², an SVD's error."""
    core = bidiagonal_core(diag, sub, lk)
    if method == "svd":
        return _squared_singular_values(core)
    if method not in EIG_METHODS:
        raise InputError(f"method must be one of {', '.join(map(repr, EIG_METHODS))}, "
                         f"got {method!r}")
    if method.startswith("hestenes"):
        from ._hestenes import hestenes_eigvals
        from ._jacobi_pallas import hestenes_eigvals_pallas

        return (hestenes_eigvals if method == "hestenes" else hestenes_eigvals_pallas)(core)
    gram = mm(core, jnp.swapaxes(core, -1, -2))
    if method == "eigvalsh":
        return jnp.maximum(jnp.linalg.eigvalsh(gram)[..., ::-1], 0.0)
    if method == "jacobi":
        from ._jacobi import jacobi_eigvalsh

        return jnp.maximum(jacobi_eigvalsh(gram), 0.0)
    if method == "jacobi_pallas":
        from ._jacobi_pallas import jacobi_eigvalsh_pallas

        return jnp.maximum(jacobi_eigvalsh_pallas(gram), 0.0)
    _, d, e, _ = jax.lax.linalg.tridiagonal(gram, lower=True)
    solve = tridiagonal_eigvals  # jax.scipy.linalg.eigh_tridiagonal's bits, less to compile
    for _ in range(d.ndim - 1):
        solve = jax.vmap(solve)
    lam = solve(d, e)  # ascending
    return jnp.maximum(lam[..., ::-1], 0.0)


def spectral_stats(lam, statistics=None) -> dict:
    """Spectral statistics of the nonzero eigenvalues ``lam`` ``(..., n)`` (any order, last axis).

    Keys: the spectral records of ``statistics`` (default the shipped), each by its ``fn``:
    ``lambda_max``, ``lambda_min``; ``sum_lambda`` Σλ, ``sum_lambda2`` Σλ²; ``pr`` =
    (Σλ)²/Σλ², ``npr`` = pr / n; ``spectral_entropy`` −Σ p ln p, p = λ/Σλ; ``condition_number``
    λ_max/λ_min; ``stable_rank`` Σλ/λ_max."""
    lam = jnp.asarray(lam)
    return {st.name: _value(st, lam) for st in _spectral_records(statistics)}


def _value(st, lam):
    """``st.fn(lam)``; a plugin's failure or a value not of shape ``lam.shape[:-1]`` is one
    :class:`rmtbase.registry.PluginError` line naming it."""
    if REGISTRY.shipped(st.name) and REGISTRY.peek(st.name) is st:
        return st.fn(lam)
    want = tuple(lam.shape[:-1])

    def check(out):
        shape = getattr(out, "shape", None)
        if shape is None or tuple(shape) != want:
            got = f"shape {tuple(shape)}" if shape is not None else f"a {type(out).__name__}"
            return f"{got} for λ of shape {tuple(lam.shape)} (a statistic maps λ (..., d_h) to " \
                   f"(...), here {want})"
        return None

    return plugin_call(REGISTRY, st.name, "fn(λ)", st.fn, lam, check=check)
