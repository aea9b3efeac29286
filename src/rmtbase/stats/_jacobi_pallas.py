"""The parallel cyclic Jacobi eigenvalue kernel in Pallas: one program per block of matrices.

The arithmetic is :func:`rmtbase.stats._jacobi.jacobi_step` (ordering, stopping and error bound
in :mod:`rmtbase.stats._jacobi`); this module only places it in a kernel. Each program loads
``block`` padded m × m matrices once, runs every sweep on them (a ``while`` on the block's own
off-diagonal norm) and writes their diagonals; nothing goes back to device memory between
steps. The partner permutation i ↦ i ⊕ k is built from the operations Pallas lowers to Triton
(reshape, transpose, two-way split along the last axis, two-way concatenate): i ↦ i ⊕ 2^b is a
swap of the halves of the size-2 axis that bit b becomes after a reshape, and i ↦ i ⊕ k
composes the swaps of k's set bits. Two variants of the step loop (``unroll``):

- ``False``: a ``fori_loop`` over k; each step applies the swap of every bit b of m, kept
  where bit b of k is set (log₂ m swaps a step, small program);
- ``True``: the m − 1 steps of a sweep unrolled with k static (popcount(k) swaps a step,
  about half as many; a program m − 1 times longer).

On the CPU (no GPU lowering) the kernel runs in Pallas' interpret mode, which evaluates the
same jaxpr with ``jnp``: that is how tests/test_jacobi.py checks it. Which variant, block size
and warp count are fastest on a GPU, and whether either beats cuSOLVER, is measured by
``benchmarks/gpu.py`` (nothing here is tuned yet: no GPU was at hand when it was written).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

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


def _sweep(a, m, unroll):
    """One sweep (steps k = 1 … m − 1) on the block ``a`` ``(block, m, m)``."""
    if unroll:
        for k in range(1, m):
            a = jacobi_step(a, k, functools.partial(xor_static, k=k))
        return a
    return jax.lax.fori_loop(1, m, lambda k, x: jacobi_step(
        x, k, functools.partial(xor_traced, k=k)), a)


def _kernel(g_ref, out_ref, *, m, max_sweeps, tol2, unroll):
    a = g_ref[...]

    def more(carry):
        x, it = carry
        return (it < max_sweeps) & (jnp.max(off_ratio(x)) > tol2)

    def body(carry):
        x, it = carry
        return _sweep(x, m, unroll), it + 1

    a, _ = jax.lax.while_loop(more, body, (a, jnp.int32(0)))
    eye = jax.lax.broadcasted_iota(jnp.int32, (m, m), 0) == \
        jax.lax.broadcasted_iota(jnp.int32, (m, m), 1)
    out_ref[...] = jnp.sum(jnp.where(eye, a, 0), axis=-1)


def jacobi_eigvalsh_pallas(g, *, block=1, max_sweeps=MAX_SWEEPS, unroll=False, interpret=None,
                           num_warps=None):
    """Eigenvalues of the symmetric ``g`` ``(..., n, n)``, descending (as
    :func:`rmtbase.stats._jacobi.jacobi_eigvalsh`), by the Pallas kernel.

    block: matrices per program (a power of two; the batch is padded with zero matrices, which
    stop at once). interpret: Pallas' interpret mode (default: on the CPU backend only).
    num_warps: Triton's warps per program (GPU only; None = Pallas' default).
    """
    g = jnp.asarray(g)
    n = g.shape[-1]
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, got {block}")
    m = padded_size(n)
    batch = g.shape[:-2]
    work = pad(g.reshape((-1, n, n)), m)
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
    kernel = functools.partial(_kernel, m=m, max_sweeps=max_sweeps, unroll=unroll,
                               tol2=float(jnp.finfo(g.dtype).eps) ** 2)
    diag = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((total, m), g.dtype), grid=(total // block,),
        in_specs=[pl.BlockSpec((block, m, m), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((block, m), lambda i: (i, 0)), interpret=interpret,
        **params)(work)
    lam = -jnp.sort(-diag[:count, :n], axis=-1)  # columns n … m − 1: the zero padding
    return lam.reshape(batch + (n,))
