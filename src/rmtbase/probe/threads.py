"""torch's intra-op threads for rmtbase's forward passes: :class:`one_thread`.

On a shared CPU one thread was faster for every forward pass measured (docs/performance.md)."""

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
