"""Count JAX compilations: a backend compile, or a request to the persistent cache (which a
cache hit answers without a backend compile)."""

from __future__ import annotations

import contextlib

import jax

_EVENTS = ("/jax/core/compile/backend_compile_duration",
           "/jax/compilation_cache/compile_requests_use_cache")


@contextlib.contextmanager
def compiles():
    """``with compiles() as seen:`` — ``seen`` lists the compile events inside the block."""
    seen = []

    def on_event(event, *args, **kwargs):
        if event in _EVENTS:
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(on_event)
    jax.monitoring.register_event_listener(on_event)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
        jax.monitoring.unregister_event_listener(on_event)
