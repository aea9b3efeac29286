"""The composition null's s² from bidiagonal Grams: one d_h-sized GEMM a draw, exact in law.

Same law as :func:`rmtbase.baseline.composition_null.null_squares` (chain Q2ᵀ K2 O1 V1 of
independent Gaussians): s² = tr(Mᵀ G_Q M G_V) / (tr(G_Q G_K) tr(G_O G_V)), M = K_a T, T = L_Oᵀ,
G_K = K_a K_aᵀ + X Xᵀ, X ``(d_h2, d − d_h1)`` Gaussian. Householder bidiagonalisation
(Dumitriu & Edelman 2002, §3; :func:`rmtbase.ensembles.wishart.gram_bidiagonal`) gives
G_V = U_V B_V B_Vᵀ U_Vᵀ, G_Q = U_Q B_Q B_Qᵀ U_Qᵀ, U_· functions of W_V, W_Q alone. Given U_V,
Z U_V has Z's law (Z = H T the O factor), so the R factor S of T U_V = P S is Bartlett-
transposed, and K_a P has K_a's law, independent of S. Given U_Q, (U_Qᵀ K_a, U_Qᵀ X) has
(K_a, X)'s law. Hence, with P = K_a S (the one GEMM),

    s² = ‖B_Qᵀ P B_V‖² / ((‖B_Qᵀ K_a‖² + tr(B_Q B_Qᵀ Y)) ‖S B_V‖²),  Y = X Xᵀ,

where tr(B_Q B_Qᵀ Y) needs only Y's diagonal and first off-diagonal: with x_i the rows of X,
‖x_1‖² ~ χ²_{d−d_h1}; x_{i+1} = h_i x̂_i + r_i, h_i ~ N(0, 1), ‖r_i‖² ~ χ²_{d−d_h1−1}, so
Y_{i,i+1} = h_i ‖x_i‖ and Y_{i+1,i+1} = h_i² + ‖r_i‖², all independent. Draw i is
``fold_in(key, i)``; chunks as :func:`rmtbase.baseline.composition_null.in_chunks`.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from ..ensembles.chisquare import chi
from ..ensembles.gaussian import named_key
from ..ensembles.threefry import normal
from ..ensembles.wishart import bartlett_factor
from ..stats.storage import storage_record
from .composition_null import Part, chunk_size, draw_program, in_chunks

_ALL = Part()  # every draw, no progress

#: Head size from which float32 draws come from these samplers: at d_h = 256 (d = 640) the
#: composition null took 1.5 ms a draw against the reduced sampler's 3.2 and the shared-key
#: overlap 1.8 against 2.5; at 128 (d = 2,048) 0.37 against 0.57 and 0.36 against 0.50; at 64
#: (d = 576) 0.14 against 0.10 (the Gaussians dominate there). CPU, 2 loaded cores.
BIDIAGONAL_FROM = 128


def composition_bidiagonal(d: int, d_h1: int, d_h2: int, storage="float32") -> bool:
    """Whether the composition null at (d, d_h1, d_h2) and ``storage`` is drawn by
    :func:`null_squares_bidiagonal`: float storage wider than 16 bits, d_h2 ≤ d − d_h1,
    d − d_h1 ≥ 2, max(d_h1, d_h2) ≥ :data:`BIDIAGONAL_FROM`."""
    d, d_h1, d_h2 = int(d), int(d_h1), int(d_h2)
    return (not storage_record(storage).is_narrow_float and d_h2 <= d - d_h1
            and d - d_h1 >= 2 and max(d_h1, d_h2) >= BIDIAGONAL_FROM)


def overlap_bidiagonal(d: int, d_h: int, shared_key: bool, storage="float32") -> bool:
    """Whether the QK-overlap null is drawn by :func:`null_overlap_shared_bidiagonal`: a shared
    key head, float storage wider than 16 bits, 2 d_h ≤ d, d_h ≥ :data:`BIDIAGONAL_FROM`."""
    return (bool(shared_key) and not storage_record(storage).is_narrow_float
            and 2 * int(d_h) <= int(d) and int(d_h) >= BIDIAGONAL_FROM)


def null_squares_bidiagonal(key, d: int, d_h1: int, d_h2: int, n: int, dtype=jnp.float32, *,
                            part: Part = _ALL):
    """Draws ``part.start`` … n−1 of s² under the Gaussian-factor null, exactly in law (module
    docstring). Needs d_h2 ≤ d − d_h1 and d − d_h1 ≥ 2."""
    d, d_h1, d_h2 = int(d), int(d_h1), int(d_h2)
    if d_h2 > d - d_h1 or d - d_h1 < 2:
        raise ValueError(f"the bidiagonal null needs d_h2 <= d - d_h1 and d - d_h1 >= 2 "
                         f"(d={d}, d_h={d_h1}, {d_h2})")
    run = _program(d, d_h1, d_h2, jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, chunk_size(6 * max(d_h1, d_h2) ** 2), part.bar)


def _upper_bidiagonal_times(a, b, x):
    """Bᵀ x for B lower bidiagonal (diagonal ``a``, subdiagonal ``b``) and x ``(n, c)``."""
    return a[:, None] * x + jnp.concatenate([b[:, None] * x[1:], jnp.zeros_like(x[:1])], 0)


def _times_lower_bidiagonal(x, a, b):
    """x B for x ``(r, n)`` and B lower bidiagonal (diagonal ``a``, subdiagonal ``b``)."""
    return x * a[None, :] + jnp.concatenate([x[:, 1:] * b[None, :], jnp.zeros_like(x[:, :1])], 1)


@functools.lru_cache(maxsize=16)
def _program(d: int, d_h1: int, d_h2: int, dtype: str):
    """One compiled program per shape: the χ variates in one call, the normals in one call."""
    dt = jnp.dtype(dtype)
    m = d - d_h1
    dof = np.concatenate([np.arange(d, d - d_h2, -1), np.arange(d_h2 - 1, 0, -1),  # B_Q
                          np.arange(d, d - d_h1, -1), np.arange(d_h1 - 1, 0, -1),  # B_V
                          np.arange(d, d - d_h1, -1),  # S's diagonal
                          [m], np.full(d_h2 - 1, m - 1)]).astype(dtype)  # ‖x_1‖, ‖r_i‖
    cut = np.cumsum([d_h2, d_h2 - 1, d_h1, d_h1 - 1, d_h1, 1])
    n_low = d_h1 * (d_h1 - 1) // 2

    def one(k):
        x = chi(named_key(k, "diag"), jnp.asarray(dof), dt)
        qa, qb, va, vb, sd, x1, r = jnp.split(x, cut)
        z = normal(named_key(k, "normal"), (n_low + d_h2 * d_h1 + d_h2 - 1,), dt)
        s = bartlett_factor(z[:n_low], sd).T  # S, upper triangular
        ka = z[n_low:n_low + d_h2 * d_h1].reshape(d_h2, d_h1)
        h = z[n_low + d_h2 * d_h1:]
        p = ka @ s
        num = jnp.sum(_times_lower_bidiagonal(_upper_bidiagonal_times(qa, qb, p), va, vb) ** 2)
        y = jnp.concatenate([x1 * x1, h * h + r * r])  # Y's diagonal
        t_diag = qa * qa + jnp.concatenate([jnp.zeros((1,), dt), qb * qb])
        trace_y = jnp.sum(t_diag * y) + 2.0 * jnp.sum(qa[:-1] * qb * h * jnp.sqrt(y[:-1]))
        den_q = jnp.sum(_upper_bidiagonal_times(qa, qb, ka) ** 2) + trace_y
        den_o = jnp.sum(_times_lower_bidiagonal(s, va, vb) ** 2)
        return num / (den_q * den_o)

    return draw_program(one)


def null_overlap_shared_bidiagonal(key, d: int, d_h: int, n: int, dtype=jnp.float32, *,
                                   part: Part = _ALL):
    """Draws ``part.start`` … n−1 of the QK overlap c of two heads sharing one Gaussian key head,
    exactly in law, without a GEMM: as :func:`rmtbase.baseline.composition_null.null_overlap`
    (Q_a Q_bᵀ = L_Qa Q_b1ᵀ, G_Qb = Q_b1 Q_b1ᵀ + L Lᵀ), with G_K = U B Bᵀ Uᵀ (Dumitriu & Edelman;
    U a function of W_K, and (Uᵀ Q_a, Uᵀ Q_b) has (Q_a, Q_b)'s law), so
    c = ⟨Bᵀ L_Qa, Bᵀ Q_b1⟩ / √(‖Bᵀ L_Qa‖² (‖Bᵀ Q_b1‖² + ‖Bᵀ L‖²)). Needs 2 d_h ≤ d."""
    d, d_h = int(d), int(d_h)
    if 2 * d_h > d:
        raise ValueError(f"the bidiagonal overlap null needs 2 d_h <= d (d={d}, d_h={d_h})")
    run = _overlap_program(d, d_h, jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, chunk_size(8 * d_h ** 2), part.bar)


@functools.lru_cache(maxsize=16)
def _overlap_program(d: int, n: int, dtype: str):
    dt = jnp.dtype(dtype)
    dof = np.concatenate([np.arange(d, d - n, -1), np.arange(d - n, d - 2 * n, -1),  # L_Qa, L
                          np.arange(d, d - n, -1), np.arange(n - 1, 0, -1)]).astype(dtype)  # B
    cut = np.cumsum([n, n, n])
    n_low = n * (n - 1) // 2

    def one(k):
        qa_d, qb_d, ba, bb = jnp.split(chi(named_key(k, "diag"), jnp.asarray(dof), dt), cut)
        z = normal(named_key(k, "normal"), (2 * n_low + n * n,), dt)
        qa = _upper_bidiagonal_times(ba, bb, bartlett_factor(z[:n_low], qa_d))
        lb = _upper_bidiagonal_times(ba, bb, bartlett_factor(z[n_low:2 * n_low], qb_d))
        qb = _upper_bidiagonal_times(ba, bb, z[2 * n_low:].reshape(n, n))
        inner = jnp.sum(qa * qb)
        return inner / jnp.sqrt(jnp.sum(qa * qa) * (jnp.sum(qb * qb) + jnp.sum(lb * lb)))

    return draw_program(one)


__all__ = ["BIDIAGONAL_FROM", "composition_bidiagonal", "null_overlap_shared_bidiagonal",
           "null_squares_bidiagonal", "overlap_bidiagonal"]
