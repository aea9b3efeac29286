"""The parallel cyclic Jacobi kernels in Pallas, one program per block of matrices: two-sided on
Grams (:func:`rmtbase.stats._jacobi.jacobi_step`) and one-sided on the matrices
(:func:`rmtbase.stats._hestenes.hestenes_step`). A program loads ``block`` padded m × m matrices
once, sweeps until its block converges and writes diagonals or squared row norms; on the CPU in
Pallas' interpret mode."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ._hestenes import hestenes_step, tolerance2
from ._jacobi import MAX_SWEEPS, jacobi_step, off_ratio, pad, padded_size


def swap_bit(x, axis, b):
    """``x`` permuted along ``axis`` by i ↦ i ⊕ 2^b, from Triton-lowerable operations only."""
    shape = x.shape
    axis = axis % x.ndim
    lo = 1 << b
    y = x.reshape(shape[:axis] + (shape[axis] // (2 * lo), 2, lo) + shape[axis + 1:])
    two = axis + 1
    perm = tuple(d for d in range(y.ndim) if d != two) + (two,)
    y = jnp.transpose(y, perm)
    first, second = jnp.split(y, 2, axis=-1)
    y = jnp.concatenate([second, first], axis=-1)
    inverse = tuple(perm.index(d) for d in range(y.ndim))
    return jnp.transpose(y, inverse).reshape(shape)


def xor_static(x, axis, k):
    """``x`` permuted along ``axis`` by i ↦ i ⊕ k for a Python int k (popcount(k) swaps)."""
    for b in range(int(k).bit_length()):
        if (k >> b) & 1:
            x = swap_bit(x, axis, b)
    return x


def xor_traced(x, axis, k):
    """``x`` permuted along ``axis`` by i ↦ i ⊕ k for a traced k (log₂ m swaps, selected)."""
    m = x.shape[axis]
    for b in range(max(1, (m - 1).bit_length())):
        x = jnp.where(((k >> b) & 1) == 1, swap_bit(x, axis, b), x)
    return x


def _steps(step, m, unroll, state):
    """Steps k = 1 … m − 1 of one sweep: ``state = step(state, k, partner)``."""
    if unroll:
        for k in range(1, m):
            state = step(state, k, functools.partial(xor_static, k=k))
        return state
    return jax.lax.fori_loop(1, m, lambda k, x: step(
        x, k, functools.partial(xor_traced, k=k)), state)


def _two_sided(a_ref, out_ref, *, m, max_sweeps, tol2, unroll):
    """Kernel: two-sided Jacobi on the block's Grams; writes their diagonals."""
    def more(carry):
        x, it = carry
        return (it < max_sweeps) & (jnp.max(off_ratio(x)) > tol2)

    def body(carry):
        x, it = carry
        return _steps(jacobi_step, m, unroll, x), it + 1

    a, _ = jax.lax.while_loop(more, body, (a_ref[...], jnp.int32(0)))
    eye = jax.lax.broadcasted_iota(jnp.int32, (m, m), 0) == \
        jax.lax.broadcasted_iota(jnp.int32, (m, m), 1)
    out_ref[...] = jnp.sum(jnp.where(eye, a, 0), axis=-1)


def _one_sided(a_ref, out_ref, *, m, max_sweeps, tol2, unroll):
    """Kernel: one-sided (Hestenes) Jacobi on the block's matrices; writes their squared row
    norms (:mod:`rmtbase.stats._hestenes`)."""
    def step(state, k, partner):
        x, worst = state
        x, cos2 = hestenes_step(x, k, partner)
        return x, jnp.maximum(worst, cos2)

    def more(carry):
        _, it, worst = carry
        return (it < max_sweeps) & (jnp.max(worst) > tol2)

    def body(carry):
        x, it, _ = carry
        x, worst = _steps(step, m, unroll, (x, jnp.zeros(x.shape[:-2], x.dtype)))
        return x, it + 1, worst

    a = a_ref[...]
    start = jnp.full(a.shape[:-2], jnp.inf, a.dtype)
    a, _, _ = jax.lax.while_loop(more, body, (a, jnp.int32(0), start))
    out_ref[...] = jnp.sum(a * a, axis=-1)


def _call(kernel, x, block, max_sweeps, unroll, interpret, num_warps, tol2):
    """The kernel over ``x`` ``(..., n, n)`` padded to m and to whole blocks; the first n
    outputs of each matrix, descending (the others belong to the zero padding)."""
    x = jnp.asarray(x)
    n = x.shape[-1]
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    m = padded_size(n)
    batch = x.shape[:-2]
    work = pad(x.reshape((-1, n, n)), m)
    count = work.shape[0]
    total = -(-count // block) * block
    if total != count:
        work = jnp.pad(work, ((0, total - count), (0, 0), (0, 0)))
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    params = {}
    if not interpret:  # the Triton backend, named (Pallas may default to Mosaic GPU)
        from jax.experimental.pallas import triton as pltriton

        params["compiler_params"] = pltriton.CompilerParams(
            **({} if num_warps is None else {"num_warps": num_warps}))
    body = functools.partial(kernel, m=m, max_sweeps=max_sweeps, unroll=unroll,
                             tol2=tol2(m, x.dtype))
    out = pl.pallas_call(
        body, out_shape=jax.ShapeDtypeStruct((total, m), x.dtype), grid=(total // block,),
        in_specs=[pl.BlockSpec((block, m, m), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((block, m), lambda i: (i, 0)), interpret=interpret,
        **params)(work)
    lam = -jnp.sort(-out[:count, :n], axis=-1)
    return lam.reshape(batch + (n,))


def jacobi_eigvalsh_pallas(g, *, block=1, max_sweeps=MAX_SWEEPS, unroll=False, interpret=None,
                           num_warps=None):
    """Eigenvalues of the symmetric ``g`` ``(..., n, n)``, descending, by the two-sided kernel.

    block: matrices per program (a power of two); interpret: Pallas' interpret mode (default on
    CPU); num_warps: Triton's warps per program."""
    return _call(_two_sided, g, block, max_sweeps, unroll, interpret, num_warps,
                 lambda m, dt: float(jnp.finfo(dt).eps) ** 2)


def hestenes_eigvals_pallas(c, *, block=1, max_sweeps=MAX_SWEEPS, unroll=False, interpret=None,
                            num_warps=None):
    """λ = s(C)², descending, of ``c`` ``(..., n, n)`` by the one-sided kernel; arguments as
    :func:`jacobi_eigvalsh_pallas`."""
    return _call(_one_sided, c, block, max_sweeps, unroll, interpret, num_warps, tolerance2)
