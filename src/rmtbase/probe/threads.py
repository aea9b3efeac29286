"""torch's intra-op threads for rmtbase's forward passes: :class:`one_thread` (the text
probe's windows, :mod:`rmtbase.probe.run`; the circuit search's capture and patches,
:mod:`rmtbase.circuits.run`).

On a shared CPU torch's threads waiting on each other cost more than they gain: one thread was
faster for every forward pass measured (docs/performance.md, "The attention probe").
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
