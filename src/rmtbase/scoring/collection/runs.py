"""How a collection's entries are run: :func:`score_one` (one entry, task or in process),
:class:`EntryStore` (a resumable run's files), :class:`LocalRunner` and :class:`DaskRunner`
(tasks retried :data:`RETRIES` times, polled by :func:`rmtbase.baseline.sweep.completed`)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys


def score_one(model, revision, options: dict, x64: bool):
    """Score one entry (a Dask task; also the one-process path). Runs under ``jax_enable_x64 =
    x64`` so a worker computes what the driver would; the spectrum band is added by the
    driver."""
    import jax

    if bool(jax.config.read("jax_enable_x64")) != bool(x64):
        jax.config.update("jax_enable_x64", bool(x64))
    from ..score import score_model

    return score_model(model, revision=revision, progress=False, spectrum_draws=0, **options)


@functools.cache
def _band(d: int, d_h: int, n: int, seed: int):
    from ..score import null_spectrum_band

    return null_spectrum_band(d, d_h, n, seed=seed)


def add_band(ds, n: int, seed: int):
    from ..score import SPECTRUM_QUANTILES

    if not n:
        return ds
    band = _band(int(ds.attrs["d"]), int(ds.attrs["d_h"]), int(n), int(seed))
    ds["null_spectrum"] = (("quantile", "rank"), band)
    ds["null_spectrum"].attrs["definition"] = (
        f"quantiles of the sorted normalised null spectrum over {int(n)} draws")
    ds = ds.assign_coords(quantile=list(SPECTRUM_QUANTILES))
    return ds


def say(progress, text):
    if progress:
        print(f"rmtbase: {text}", file=sys.stderr, flush=True)


#: Retries of a Dask task whose worker died (a task's own error is not retried: it would
#: fail again).
RETRIES = 2


class EntryStore:
    """The entry files of one collection run (:mod:`rmtbase.scoring.collection.entries`)."""

    def __init__(self, folder, specs, options, x64, band):
        from .entries import entry_key

        self.folder, self.band = folder, band
        self.keys = [entry_key(s.model, s.revision, options, x64) for s in specs]
        self.specs = specs
        self.wrote = 0

    def load(self, i):
        """The stored entry ``i`` if it can be reused, else None; an entry that cannot (changed
        after it was written, unverifiable, unreadable) is named in one warning line."""
        from .entries import check, entry_path

        label = self.specs[i].label
        ds, why = check(self.folder, label, self.keys[i])
        if why is not None:
            print(f"rmtbase: warning: entry {label} ({entry_path(self.folder, label)}) {why}; "
                  "scoring it again", file=sys.stderr, flush=True)
        return ds

    def save(self, i, ds):
        from .entries import save

        ds = save(self.folder, self.specs[i].label, self.keys[i], add_band(ds, *self.band))
        self.wrote += 1
        return ds


class LocalRunner:
    """Runs batches of entries one after another in this process."""

    def __init__(self, specs, options, x64, progress, store=None):
        self.specs, self.options, self.x64, self.progress = specs, options, x64, progress
        self.store = store

    def __enter__(self):
        return self.run

    def __exit__(self, *exc):
        return False

    def _done(self, i, ds, k, n, how="scored"):
        say(self.progress, f"{how} {self.specs[i].label} ({k}/{n}): "
                            f"{int(ds['head_flag'].sum())} of {ds['head_flag'].size} heads "
                            "differ from the null")

    def _stored(self, todo, force) -> dict:
        """Entries of ``todo`` found in the store (none when ``force``)."""
        if self.store is None or force:
            return {}
        found = {i: ds for i in todo if (ds := self.store.load(i)) is not None}
        for k, (i, ds) in enumerate(found.items()):
            self._done(i, ds, k + 1, len(todo), "reused the stored entry")
        return found

    def _keep(self, i, ds):
        return ds if self.store is None else self.store.save(i, ds)

    def _options(self, i, start) -> dict:
        """Entry ``i``'s options: the collection's, with ``null_start`` where ``start`` (a
        dict by entry) names the least null sizes it starts from (a re-score)."""
        if not start or start.get(i) is None:
            return self.options
        return {**self.options, "null_start": start[i]}

    def run(self, batches, force=False, start=None) -> dict:
        """Score ``batches`` (entries, or lists of them; ``force``: not from the store;
        ``start``: {entry: null sizes to start from}, :meth:`_options`)."""
        batches = [batches] if batches and isinstance(batches[0], int) else batches
        todo = [i for b in batches for i in b]
        out = self._stored(todo, force)
        k = len(out)
        for i in todo:
            if i in out:
                continue
            s = self.specs[i]
            out[i] = self._keep(i, score_one(s.model, s.revision, self._options(i, start),
                                             self.x64))
            k += 1
            self._done(i, out[i], k, len(todo))
        return out


class DaskRunner(LocalRunner):
    """Runs each batch of entries as Dask tasks (one per entry), batch after batch."""

    def __init__(self, specs, options, x64, progress, store, workers, scheduler, client):
        super().__init__(specs, options, x64, progress, store)
        self.where = (scheduler, workers, client)

    def __enter__(self):
        from ...baseline.sweep import cluster_client, require_distributed

        self.dist = require_distributed("--workers/--scheduler (Dask tasks)")
        self._ctx = cluster_client(*self.where)
        self.client = self._ctx.__enter__()
        return self.run

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)

    def run(self, batches, force=False, start=None) -> dict:
        batches = [batches] if batches and isinstance(batches[0], int) else batches
        n = sum(len(b) for b in batches)
        out = self._stored([i for b in batches for i in b], force)
        k = len(out)
        for batch in batches:
            futures = {self.client.submit(score_one, os.fspath(self.specs[i].model),
                                          self.specs[i].revision, self._options(i, start),
                                          self.x64,
                                          pure=False, retries=RETRIES): i
                       for i in batch if i not in out}
            with contextlib.closing(self._wait(futures)) as finished:
                for i, ds in finished:
                    out[i] = self._keep(i, ds)
                    k += 1
                    self._done(i, out[i], k, n)
        return out

    def _wait(self, futures: dict):
        """Yield (entry, result) as the tasks finish, through the one Dask wait
        (:func:`rmtbase.baseline.sweep.completed`: it polls, so a Ctrl-C is delivered while
        waiting, and cancels the tasks left on any exit before the end)."""
        from ...baseline.sweep import completed, result
        from ...files.interrupts import fault_point

        fault_point("tasks:submitted")
        with contextlib.closing(completed(futures, self.client)) as finished:
            for fut in finished:
                yield futures[fut], result(fut)


__all__ = ["RETRIES", "DaskRunner", "EntryStore", "LocalRunner", "add_band", "say", "score_one"]
