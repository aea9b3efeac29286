"""Functions that run as one compiled program when called outside ``jit``.

A ``lax`` loop over a closure, called op by op, is traced and compiled afresh at every call.
:func:`compiled_when_eager` gives such a function one ``jax.jit`` program per static arguments and
shapes for its eager calls; inside a trace (``jit``, ``vmap``, ``lax.map``) it runs as written.

:data:`FEW_CALLS` are per-program XLA compiler options for a program run a few times on CPU
(``jax.jit(f, compiler_options=FEW_CALLS)``), never the global ``XLA_FLAGS``; JAX accepts them
on a top-level ``jit`` only. :data:`MANY_CALLS` are those of a program run many times."""

from __future__ import annotations

import functools
import inspect

import jax

#: ``xla_cpu_use_fusion_emitters=False``: XLA's CPU backend emits the program's fusions with
#: its elemental LLVM emitters instead of the MLIR fusion emitters, which compile slower (an
#: MLIR pipeline per fusion before LLVM): about a third less compile CPU for programs run a
#: few times, outputs byte-identical (docs/performance.md). Not for hot loops,
#: which run slower this way. An ``xla_cpu_*`` option only: other backends
#: ignore it. JAX's persistent compilation cache keys on the options (a program cached before
#: compiles once more).
FEW_CALLS = {"xla_cpu_use_fusion_emitters": False}


def few_calls() -> dict:
    """:data:`FEW_CALLS` where the default backend is the CPU, else no options (no other
    backend was checked with them)."""
    return dict(FEW_CALLS) if jax.default_backend() == "cpu" else {}


#: ``xla_backend_optimization_level=3`` and ``xla_cpu_use_fusion_emitters=True``, XLA's CPU
#: defaults, stated per program: for the Monte Carlo loops that run a program thousands of
#: times (the null draws). Where the process's ``XLA_FLAGS`` change them, these programs
#: still compile at the defaults: they keep their speed and the bits of a default run (equal
#: bit for bit with and without such flags, tests/test_compiler_options.py), unless
#: :data:`INHERIT_FLAGS` is set.
MANY_CALLS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


#: An environment variable: set (non-empty), :func:`many_calls` gives :func:`few_calls`, so
#: that the process's ``XLA_FLAGS`` govern the null draws too (the quick test tier's: their
#: draws run a few hundred times, too few to repay XLA's default level's compile time).
INHERIT_FLAGS = "RMTBASE_XLA_MANY_CALLS_INHERIT"


def many_calls() -> dict | None:
    """:data:`MANY_CALLS` where the default backend is the CPU, else None; :func:`few_calls`
    where :data:`INHERIT_FLAGS` is set."""
    import os

    if os.environ.get(INHERIT_FLAGS):
        return few_calls()
    return dict(MANY_CALLS) if jax.default_backend() == "cpu" else None


def compiled_when_eager(*, static_argnames: tuple = ()):
    """Decorator: eager calls go through ``jax.jit(fn, static_argnames=...)``; a call with a
    traced argument or an unhashable static argument runs ``fn`` itself."""

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
