"""Functions that run as one compiled program when called outside ``jit``.

A function built on ``lax.fori_loop``, ``while_loop`` or ``scan`` over a closure, called op by
op, is traced afresh at every call: the closure is a new function each time, so JAX compiles
the loop again and keeps every compile. Measured (2 cores): the K-quants' scale search 0.8–3.4 s
and up to ~0.3 GB a call (a 16-layer Q3_K GGUF encoded one matrix at a time grew a process to
10.8 GB), the χ² sampler 2.4 s a call, a product network 1.4 s. :func:`compiled_when_eager`
gives such a function one ``jax.jit`` program per static arguments and shapes for its eager
calls; called inside a trace (``jit``, ``vmap``, ``lax.map``) it runs as written, so no
compiled program that calls it changes.

:data:`FEW_CALLS` are XLA compiler options for a program a command runs a few times on CPU
(``jax.jit(f, compiler_options=FEW_CALLS)``): per program, never the process-global
``XLA_FLAGS``. JAX accepts them on a top-level ``jit`` only (one traced inside another
``jit`` raises ValueError), so a program that is also called inside traces gets a top-level
``jit`` of its own at the eager call site.
"""

from __future__ import annotations

import functools
import inspect

import jax

#: ``xla_cpu_use_fusion_emitters=False``: XLA's CPU backend emits the program's fusions with
#: its elemental LLVM emitters instead of the MLIR fusion emitters, which compile slower (an
#: MLIR pipeline per fusion before LLVM): about a third less compile CPU for programs run a
#: few times, outputs byte-identical (``benchmarks/compile_options.py``). Not for hot loops,
#: which run slower this way. An ``xla_cpu_*`` option only: other backends
#: ignore it. JAX's persistent compilation cache keys on the options (a program cached before
#: compiles once more).
FEW_CALLS = {"xla_cpu_use_fusion_emitters": False}


def few_calls() -> dict:
    """:data:`FEW_CALLS` where the default backend is the CPU, else no options (no other
    backend was checked with them)."""
    return dict(FEW_CALLS) if jax.default_backend() == "cpu" else {}


def compiled_when_eager(*, static_argnames: tuple = ()):
    """Decorator: eager calls go through ``jax.jit(fn, static_argnames=...)``; a call with any
    traced argument, or with a static argument that cannot be hashed (a list of widths, an
    array gain), runs ``fn`` itself."""

    def wrap(fn):
        jitted = jax.jit(fn, static_argnames=static_argnames)
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if any(isinstance(x, jax.core.Tracer)
                   for x in jax.tree_util.tree_leaves((args, kwargs))):
                return fn(*args, **kwargs)
            bound = signature.bind(*args, **kwargs).arguments
            try:
                hash(tuple(bound.get(name) for name in static_argnames))
            except TypeError:
                return fn(*args, **kwargs)
            return jitted(*args, **kwargs)

        return call

    return wrap
