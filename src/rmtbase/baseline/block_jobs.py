"""Draw blocks of null tables as units of Dask work, kept as they arrive so a run resumes.

A job is one table spec at one cell, cut into :data:`rmtbase.baseline.tables.DRAW_BLOCK` blocks,
so any split gives the same numbers; :class:`BlockJobs` stores σ = 1 blocks (:func:`unit_blocks`)
and applies σ as :func:`rmtbase.baseline.tables.generate_blocks` does, bit for bit."""

from __future__ import annotations

import numpy as np


def unit_blocks(spec, cell, start, stop) -> list[dict]:
    """σ = 1 draws of blocks ``start .. stop-1`` of ``cell``, one dict of numpy arrays per block."""
    import dataclasses

    from .tables import generate_blocks

    unit = dataclasses.replace(spec, sigma_q=1.0, sigma_k=1.0)
    return [{k: np.asarray(v) for k, v in generate_blocks(unit, cell[0], cell[1], b, b + 1).items()}
            for b in range(start, stop)]


def job_blocks(specs, job, start, stop) -> list[dict]:
    """:func:`unit_blocks` of job ``(request, d, d_h)``: ``specs[request]`` at cell (d, d_h)."""
    return unit_blocks(specs[job[0]], job[1:], start, stop)


class BlockJobs:
    """The draw blocks of several jobs, those already stored and those to compute as tasks of up to
    ``per`` blocks.

    ``jobs``: {job key: (spec, (d, d_h), store or None)}. :meth:`tasks` lists the (job, start,
    stop) ranges with a block not stored; :meth:`add` stores a task's σ = 1 blocks at once;
    :meth:`draws` gives a complete job's draws at its spec's σ."""

    def __init__(self, jobs: dict, per: int):
        self.jobs, self.per = jobs, per
        self.blocks: dict = {}
        for job, (spec, cell, store) in jobs.items():
            for b in range(spec.n_blocks()):
                got = None if store is None else store.load(*cell, b, _block_size(spec, b))
                if got is not None and _has_spectrum(spec) and "qk.lambda" not in got:
                    got = None  # a block stored without its spectrum is computed again
                if got is not None:
                    self.blocks[(job, b)] = got

    def tasks(self) -> list[tuple]:
        out = []
        for job, (spec, _, _) in self.jobs.items():
            missing = [b for b in range(spec.n_blocks()) if (job, b) not in self.blocks]
            for a in range(0, spec.n_blocks(), self.per):
                if any(a <= b < a + self.per for b in missing):
                    out.append((job, a, min(a + self.per, spec.n_blocks())))
        return out

    def add(self, job, start: int, blocks: list[dict]) -> bool:
        """Keep a task's blocks; True when its job is now complete."""
        from ..files.interrupts import fault_point

        spec, cell, store = self.jobs[job]
        for i, got in enumerate(blocks):
            self.blocks[(job, start + i)] = got
            if store is not None:
                store.save(*cell, start + i, got)
                fault_point(f"block:{store.blocks()}")
        return self.complete(job)

    def complete(self, job) -> bool:
        return all((job, b) in self.blocks for b in range(self.jobs[job][0].n_blocks()))

    def release(self, job) -> None:
        """Forget a job's blocks (its table is written)."""
        for b in range(self.jobs[job][0].n_blocks()):
            self.blocks.pop((job, b), None)

    def draws(self, job) -> dict:
        from .sigma_range import scale_draws

        spec = self.jobs[job][0]
        parts = [scale_draws(self.blocks[(job, b)], spec.sigma_q, spec.sigma_k, spec.dtype)
                 for b in range(spec.n_blocks())]
        return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def _block_size(spec, b: int) -> int:
    from .tables import DRAW_BLOCK

    return min(DRAW_BLOCK, spec.draws - b * DRAW_BLOCK)


def _has_spectrum(spec) -> bool:
    from .table_contents import stores_spectrum

    return stores_spectrum(spec.stats)


__all__ = ["BlockJobs", "job_blocks", "unit_blocks"]
