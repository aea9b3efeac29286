"""torch's intra-op threads for rmtbase's forward passes: :class:`torch_threads` (the tool's
policy) and :class:`one_thread`. torch's one thread per core spin on a busy machine and multiply
the CPU. The policy (:func:`choose`) never reads the machine's load: ``--threads`` (``threads=``)
first; else your ``OMP_NUM_THREADS``, left to torch; else one thread per :data:`PER_THREAD`
parameters in the model's blocks (rounded up), at most the usable cores and torch's count."""

from __future__ import annotations

import os

#: Block parameters per torch thread: a model below it runs on one thread.
PER_THREAD = 200_000_000

_ACTIVE: list = []


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def choose(threads: int | None, params: int, torch_count: int) -> tuple[int, str]:
    """``(count, why)`` of the policy (module docstring); ``params``: the model's block
    parameters, ``torch_count``: torch's own count."""
    if threads is not None:
        return int(threads), "--threads"
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        return torch_count, "OMP_NUM_THREADS"
    want = max(1, -(-int(params) // PER_THREAD))
    count = max(1, min(want, usable_cores(), torch_count))
    return count, f"{int(params):,} block parameters, one thread per {PER_THREAD:,}"


class torch_threads:
    """torch's threads by the policy inside the block, restored after: :meth:`fit` chooses
    once the model is known (until then torch's count is left); a block inside another takes
    the outer block's ``threads`` when it has none of its own. :class:`one_thread` inside it
    keeps the chosen count."""

    def __init__(self, threads: int | None = None):
        if threads is not None and not (isinstance(threads, int) and not isinstance(
                threads, bool) and threads >= 1):
            from ..errors import InputError

            raise InputError(f"threads is a positive integer or None, got {threads!r}")
        self.threads, self.count, self.why = threads, None, None

    def __enter__(self):
        import torch

        if self.threads is None and _ACTIVE:
            self.threads = _ACTIVE[-1].threads
        self._saved = torch.get_num_threads()
        _ACTIVE.append(self)
        return self

    def fit(self, layers) -> int:
        """Choose and set the count for a model whose blocks are ``layers`` (modules, or their
        parameter count); returns it."""
        import torch

        params = layers if isinstance(layers, int) else sum(
            p.numel() for m in layers for p in m.parameters())
        self.count, self.why = choose(self.threads, params, self._saved)
        torch.set_num_threads(self.count)
        return self.count

    def __exit__(self, *exc) -> bool:
        import torch

        _ACTIVE.remove(self)
        torch.set_num_threads(self._saved)
        return False


def fit_threads(layers) -> dict | None:
    """:meth:`torch_threads.fit` of the innermost active block: ``{"torch": count, "why":
    …}`` (None where no block is active)."""
    if not _ACTIVE:
        return None
    b = _ACTIVE[-1]
    b.fit(layers)
    return {"torch": b.count, "why": b.why}


class one_thread:
    """torch's intra-op threads set to 1 inside the block and restored after, or, inside a
    :class:`torch_threads` block that has chosen, kept at its count."""

    def __enter__(self):
        import torch

        self._n = torch.get_num_threads()
        chosen = next((b.count for b in reversed(_ACTIVE) if b.count is not None), None)
        torch.set_num_threads(chosen or 1)
        return self

    def __exit__(self, *exc) -> bool:
        import torch

        torch.set_num_threads(self._n)
        return False


def in_torch_threads(fn):
    """``fn`` run in a :class:`torch_threads` block of its keyword ``threads`` (taken off)."""
    import functools

    @functools.wraps(fn)
    def run(*args, threads: int | None = None, **kwargs):
        with torch_threads(threads):
            return fn(*args, **kwargs)
    return run


__all__ = ["PER_THREAD", "choose", "fit_threads", "in_torch_threads", "one_thread",
           "torch_threads", "usable_cores"]
