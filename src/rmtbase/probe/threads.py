"""torch's intra-op threads for rmtbase's forward passes: :class:`one_thread` (the text
probe's windows, :mod:`rmtbase.probe.run`; the circuit search's capture and patches,
:mod:`rmtbase.circuits.run`).

On a shared CPU torch's threads waiting on each other cost more than they gain. Measured on
the 2-core machine (other jobs running): one SmolLM2-shaped receiver (32 × 101 tokens, 12
patches) took 1.6 s on 1 thread and 29 s on 2, and SmolLM2's forward of 16 × 101 tokens
19.7 s wall / 5.4 s CPU on 1 thread against 57.7 s / 18.1 s on 2 (load 21–28, 2026-11-26);
the SmolLM2 text probe of 8 windows of 256 tokens took 7.3 CPU-s / 26.0 s wall on 1 thread and
30.7 CPU-s / 123.2 s on 2 (load 13–14, 2026-11-26 14:13 UTC); MiniLM's 27 windows 5.9 s
against 13.5 s (docs/performance.md, "The attention probe").
"""

from __future__ import annotations


class one_thread:
    """torch's intra-op threads set to 1 inside the block and restored after (module
    docstring says why)."""

    def __enter__(self):
        import torch

        self._n = torch.get_num_threads()
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc) -> bool:
        import torch

        torch.set_num_threads(self._n)
        return False


__all__ = ["one_thread"]
