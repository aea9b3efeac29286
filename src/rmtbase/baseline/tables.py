"""Baseline tables: Monte Carlo null draws over a (d, d_h) grid as an xarray Dataset.

One variable per statistic, dims ``(d, d_h, draw)``: spectral statistics by bare name, element
statistics as ``<matrix>_<stat>``, spectral tables also ``lambda``; W_Q, W_K i.i.d. N(0, σ²), no
1/√d. Keys (``TABLE_FORMAT``): ``cell = fold_in(fold_in(key(seed), d), d_h)`` (then ``depth``
for ``residual``), block ``b`` of :data:`DRAW_BLOCK` draws ``fold_in(cell, b)``, draw ``j``
``fold_in(block_key, j)``: draw ``i`` depends on (seed, d, d_h, i) only, a shorter table is a
prefix. Sampled at σ = 1, moved to
(σ_Q, σ_K) exactly (:mod:`.sigma_range`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .limits import check_cells
from .references import QUANTILES, REFERENCE_NOTES, reference_values, summary  # noqa: F401
from .table_contents import ENSEMBLES, STAT_SETS, stat_names  # noqa: F401
from .table_dataset import assemble
from .table_file import (  # noqa: F401
    TABLE_FORMAT,
    check_output_file,
    check_writable,
    read_table,
    write_table,
)
from .table_spec import DRAW_BLOCK, DTYPES, TableSpec, grid_cells, make_spec, spec_with  # noqa: F401

if TYPE_CHECKING:
    import xarray as xr


def cell_key(seed: int, d: int, d_h: int, depth: int | None = None):
    """The PRNG key of cell (d, d_h): ``fold_in(fold_in(key(seed), d), d_h)`` (+ depth)."""
    import jax

    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), d), d_h)
    return key if depth is None else jax.random.fold_in(key, depth)


def generate_blocks(spec: TableSpec, d: int, d_h: int, start: int = 0, stop: int | None = None,
                    bar=None, store=None) -> dict:
    """Draws of blocks ``start .. stop-1`` of cell (d, d_h), ``{"qk.npr": array, ...}``, sampled at
    σ = 1 and moved to the spec's σ. ``bar``: progress, in draws. ``store``: a
    :class:`rmtbase.baseline.partial.PartialStore` whose blocks are reused and extended."""
    import jax

    from .null import null_draws
    from .sigma_range import scale_draws
    from .table_contents import LAMBDA_KEY, stores_spectrum
    from .table_file import fault_point

    stop = spec.n_blocks() if stop is None else stop
    if not 0 <= start < stop <= spec.n_blocks():
        raise InputError(f"block range [{start}, {stop}) outside [0, {spec.n_blocks()})")
    parts = []
    spectrum = stores_spectrum(spec.stats)
    with jax.enable_x64(spec.x64):
        key = cell_key(spec.seed, d, d_h, spec.depth)
        for b in range(start, stop):
            n = min(DRAW_BLOCK, spec.draws - b * DRAW_BLOCK)
            got = store.load(d, d_h, b, n) if store is not None else None
            if got is not None and spectrum and LAMBDA_KEY not in got:
                got = None  # a block stored without its spectrum is computed again
            if got is None:
                got = null_draws(jax.random.fold_in(key, b), d, d_h, n, stats=spec.stats,
                                 ensemble=spec.ensemble, depth=spec.depth,
                                 chunk_size=spec.chunk_size,
                                 dtype=getattr(jax.numpy, spec.dtype), storage=spec.storage,
                                 return_lambda=spectrum)
                if store is not None:
                    store.save(d, d_h, b, got)
                    fault_point(f"block:{store.blocks()}")
            parts.append(scale_draws(got, spec.sigma_q, spec.sigma_k, spec.dtype))
            if bar is not None:
                bar.update(n)
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def table_size(spec: TableSpec, cells) -> int:
    """Bytes to reserve on disk for the table (and the blocks kept to resume it)."""
    from .table_contents import n_eigenvalues, stores_spectrum
    from .table_file import table_bytes

    n_d = len({c[0] for c in cells})
    n_dh = len({c[1] for c in cells})
    n_eig = max(n_eigenvalues(d, d_h, spec.ensemble) for d, d_h in cells) \
        if stores_spectrum(spec.stats) else 0
    return table_bytes((len(stat_names(spec)) + n_eig) * n_d * n_dh * spec.draws,
                       np.dtype(spec.dtype).itemsize)


def _progress(total: int, enabled, desc: str, unit: str = "draw"):
    """A :func:`rmtbase.progress.progress_bar`, or ``enabled`` itself when it is a reporter
    (an object with ``update``) the caller made."""
    if hasattr(enabled, "update"):
        return enabled
    from ..progress import progress_bar

    return progress_bar(total, desc=desc, unit=unit, enabled=enabled)


def run_cells(spec: TableSpec, cells: Iterable[tuple[int, int]], progress: bool = True,
              store=None) -> dict:
    """Generate every draw of every cell in this process: ``{(d, d_h): draws dict}``."""
    cells = list(cells)
    with _progress(len(cells) * spec.draws, progress, "rmtbase baseline") as bar:
        return {(d, d_h): generate_blocks(spec, d, d_h, bar=bar, store=store)
                for d, d_h in cells}


def cell_table(spec: TableSpec, cell: tuple[int, int], progress=True) -> xr.Dataset:
    """The table of ``spec`` at one validated cell, drawn in this process: what :func:`baseline`
    returns for it without ``out``."""
    check_cells(spec, [cell])
    return assemble(spec, [cell], run_cells(spec, [cell], progress))


def baseline(d, d_h, *, spec: TableSpec | None = None, out=None, progress=True, resume=True,
             **options):
    """Monte Carlo null table of head statistics for W_Q, W_K (d_h, d) at (σ_Q, σ_K).

    ``d``, ``d_h``: ints or sequences (cells with d_h > d are NaN). ``spec``: the table's law and
    size (a :class:`TableSpec`); ``options``: :func:`make_spec`'s keywords (stats ``"all"``,
    ``"spectral"`` or ``"elementwise"``; storage: the checkpoint precision modelled), replacing
    the spec's. ``out``: also write atomically (checked first); ``resume`` keeps completed
    blocks. Memory, size and σ range (:class:`InputError`) are checked before any draw. Returns
    a :class:`xarray.Dataset` ``(d, d_h, draw)``; same arguments, same bits on the same backend."""
    spec = spec_with(spec, options, "baseline")
    cells = grid_cells(d, d_h)
    check_cells(spec, cells)
    store = None
    if out is not None:
        out = check_output_file(out, size=2 * table_size(spec, cells))
        if resume:
            from .partial import PartialStore

            store = PartialStore(out, spec)
    ds = assemble(spec, cells, run_cells(spec, cells, progress, store))
    if out is not None:
        write_table(ds, out)
        if store is not None:
            store.finish()
    return ds
