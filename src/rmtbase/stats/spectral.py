"""Spectral statistics of W_QK = W_Qᵀ W_K from its factors, never from the d×d product.

Conventions (``docs/conventions.md``): W_Q, W_K are ``(d_h, d)``; W_QK = W_Qᵀ W_K is ``(d, d)`` of
rank ≤ d_h; λ_k = s_k², the squared singular values of W_QK (eigenvalues of W_QK W_QKᵀ), of
which d_h are nonzero, sorted **descending**. No 1/√d or 1/√d_h factor is applied.

Why d_h×d_h cores suffice. Write W_Q = L_Q U_Q with L_Q ``(d_h, d_h)`` and U_Q ``(d_h, d)``
with orthonormal rows (e.g. L_Q = R_Qᵀ from the thin QR W_Qᵀ = Q_Q R_Q, or the Cholesky factor
of the Gram G_Q = W_Q W_Qᵀ = L_Q L_Qᵀ), likewise W_K. Then

    W_QK = U_Qᵀ (L_Qᵀ L_K) U_K ,

and since U_Qᵀ has orthonormal columns and U_K orthonormal rows, the nonzero singular values of
W_QK are exactly those of the d_h×d_h core C = L_Qᵀ L_K (equivalently λ = eig(G_Q G_K)). The
spectrum therefore depends on the factors only through their Grams, which is what the fast null
path (:mod:`rmtbase.ensembles.wishart`: bidiagonal B for W_Q, Bartlett L_K for W_K) exploits. Cost:
O(d d_h²) for the QR plus O(d_h³) for the core SVD, instead of O(d³) for the SVD of the d×d
product.

Accuracy: λ = s(C)², with s from an SVD of the core (not the eigenvalues of CᵀC), so small λ
keep the accuracy of an SVD (absolute error ≈ eps·s_max per singular value) rather than losing
the square of the condition number; the QR route is backward stable also for ill-conditioned
trained weights, where a Gram Cholesky could fail. The exceptions are the null's ``"eigh"``
route of :func:`eigvals_from_bidiagonal`, used only where κ is small, and the quantised null's
Gram route (:func:`null_eigvals_by_grams`), checked per draw.

References: Marchenko & Pastur (1967); for the limit law of x = λ/(σ_Q²σ_K²d²), MP_c ⊠ MP_c with
c = d_h/d, Burda, Jarosz, Livan, Nowak & Swiech (2010); Mingo & Speicher (2017).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._matmul import mm
from ..errors import InputError
from ..registry import Names
from ._bisection import tridiagonal_eigvals
from .statistic import REGISTRY, records
from .statistic import spectral as _spectral


def _spectral_records(statistics=None):
    return _spectral(records() if statistics is None else statistics)


#: Names of the spectral statistics, in registry order (:mod:`.statistic`; a live view: a
#: spectral statistic registered later, or by a plugin, is in it).
SPECTRAL_STATS = Names(REGISTRY, lambda s: s.kind == "spectral")


def core_from_factors(wq, wk):
    """The d_h×d_h core C = R_Q R_Kᵀ (= L_Qᵀ L_K with L = Rᵀ) whose singular values are W_QK's.

    wq, wk: ``(..., d_h, d)``. Uses R-only thin QR of wqᵀ and wkᵀ (``(..., d, d_h)``). For
    d_h > d the factors' row spaces are not full rank; this case is excluded by the callers'
    ``check_dims`` (1 ≤ d_h ≤ d).
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

    wq, wk: ``(..., d_h, d)`` in any float dtype (computation in that dtype). Returns the d_h
    squared singular values of W_QK sorted descending (exact zeros if a factor is rank
    deficient). Never forms the d×d product.
    """
    return _squared_singular_values(core_from_factors(wq, wk))


def eigvals_from_cholesky(lq, lk):
    """λ from lower-triangular Gram factors: G_Q = lq lqᵀ = wq wqᵀ; λ = s²(lqᵀ lk), descending.

    lq, lk: ``(..., d_h, d_h)`` lower triangular (e.g. from :func:`rmtbase.ensembles.wishart.gram_cholesky`).
    With wq = lq U_Q (U_Q orthonormal rows), wqᵀ wk = U_Qᵀ (lqᵀ lk) U_K: the transpose sits on
    the **first** factor.
    """
    lq = jnp.asarray(lq)
    lk = jnp.asarray(lk)
    return _squared_singular_values(mm(jnp.swapaxes(lq, -1, -2), lk))


#: Largest first-order relative error the null's Gram route (:func:`null_eigvals_by_grams`)
#: may carry on any λ: eps·B ≤ this, B the per-draw bound on κ(G_Q) and κ(G_K), else the draw
#: takes the QR route.
GRAM_MAX_REL_ERROR = 1e-3


def null_eigvals_by_grams(w):
    """λ of W_QK = w[0]ᵀ w[1] for a **null draw's** factors ``w`` ``(2, d_h, d)`` (W_Q, W_K,
    float32, one draw), descending, by the Gram route where it is accurate, else by
    :func:`eigvals_from_factors` (the heads' QR route); returns ``(λ, used_grams)``.

    Gram route: G = W Wᵀ (one batched GEMM), its Cholesky factor L (LAPACK reads the lower
    triangle), λ = s²(L_Qᵀ L_K) (:func:`eigvals_from_cholesky`): two GEMMs of d·d_h² and two
    Cholesky factorisations instead of two Householder QRs (cheaper at large d_h:
    ``benchmarks/lambda_route.py``).

    Accuracy. Rounding G (relative error u ~ eps of ‖G‖) perturbs each λ by a relative
    u·(κ(G_Q) + κ(G_K)) to first order (λ are the eigenvalues of G_Q^{1/2} G_K G_Q^{1/2};
    Ostrowski), where the QR route's error grows like √κ: squaring the factors costs accuracy
    only where they are ill conditioned. Trained heads can be, so the heads keep the QR route.
    The null's Gaussian factors (lowrank ensemble, through a block quantiser) are not:
    κ(W) ≈ (√d + √d_h)/(√d − √d_h), 4.4 at 640 × 256 (κ(G) ≈ 20). Each draw is checked,
    not assumed: σ_min(C) ≤ σ_min(L_Q)·‖L_K‖₂ (and the same with Q and K exchanged) and
    ‖G‖₂ ≤ ‖G‖_∞ for a symmetric G, so B = ‖G_Q‖_∞ ‖G_K‖_∞ / λ_min bounds κ(G_Q) and κ(G_K)
    from above (B ≈ 1,500 at 640 × 256). A draw with eps·B > :data:`GRAM_MAX_REL_ERROR`, or
    whose Cholesky factorisation failed (NaN), is computed again by the QR route (``lax.cond``:
    one branch runs). Against float64 numpy (20 draws each at 640 × 256 Q5_0, 1024 × 128 Q4_1,
    512 × 256 Q8_0) both routes were within 1.1·10⁻⁵ relative on every λ (the core's float32
    SVD dominates); ``tests/test_gram_route.py`` holds them to 10⁻⁴."""
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

    The fast null path (:func:`rmtbase.ensembles.wishart.gram_bidiagonal` for W_Q, Bartlett ``lk``
    for W_K): C = Bᵀ lk is lower Hessenberg and costs O(n²). Returns λ ``(..., n)``. method:

    - ``"svd"``: λ = s(C)², relative error eps·√κ;
    - ``"eigh"``: λ = eig(C Cᵀ) by Householder tridiagonalisation and Sturm bisection
      (:func:`rmtbase.stats._bisection.tridiagonal_eigvals`), faster on CPU; each λ carries an
      absolute error of order n·eps·λ_max (Wilkinson), a relative error n·eps·κ for
      κ = λ_max/λ_min, so it is used only where κ is small
      (:func:`rmtbase.baseline.eig_route.eig_method`); values clipped at 0;
    - ``"eigvalsh"``: :func:`jax.numpy.linalg.eigvalsh` of C Cᵀ, the error bound of ``"eigh"``;
      the accelerators' route;
    - ``"jacobi"``, ``"jacobi_pallas"``: eig(C Cᵀ) by parallel cyclic Jacobi
      (:mod:`rmtbase.stats._jacobi`, :mod:`rmtbase.stats._jacobi_pallas`), the bound of
      ``"eigh"``; taken only where :mod:`rmtbase.stats._gpu_routes` says they are faster;
    - ``"hestenes"``, ``"hestenes_pallas"``: s(C)² by one-sided Jacobi on the rows of C
      (:mod:`rmtbase.stats._hestenes`), an SVD's kind of error.
    """
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
    """Spectral statistics of the nonzero eigenvalues ``lam`` ``(..., n)`` (any order).

    Keys: the names of the spectral records of ``statistics`` (default the registry,
    :data:`rmtbase.stats.statistic.STATISTICS`: exactly :data:`SPECTRAL_STATS`), each computed
    by its record's ``fn``:

    - ``lambda_max``, ``lambda_min``: largest and smallest λ;
    - ``sum_lambda`` Σλ (= ‖W_QK‖_F²), ``sum_lambda2`` Σλ² (= ‖W_QK W_QKᵀ‖_F²);
    - ``pr`` = (Σλ)²/Σλ² (participation ratio), ``npr`` = pr / n;
    - ``spectral_entropy`` = −Σ p ln p with p = λ/Σλ (nats; terms with p = 0 contribute 0);
    - ``condition_number`` = λ_max/λ_min (inf if λ_min = 0); ``stable_rank`` = Σλ/λ_max.

    Statistics over the last axis; leading axes are batch axes.
    """
    lam = jnp.asarray(lam)
    return {st.name: st.fn(lam) for st in _spectral_records(statistics)}
