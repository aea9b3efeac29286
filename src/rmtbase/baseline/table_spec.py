"""What fixes a table's numbers besides its cells: :class:`TableSpec` (:func:`make_spec`).

:data:`DRAW_BLOCK` (draws per PRNG block, the unit of a Dask task) and :func:`grid_cells` (``d``
and ``d_h`` to cells). Re-exported from :mod:`rmtbase.baseline.tables`."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import (
    InputError,
    check_dims,
    check_draws,
    check_keywords,
    check_seed,
    check_sigma,
)
from ..stats.storage import FLOAT32, Storage, storage_record
from .table_contents import STAT_SETS, check_ensemble

#: Draws per PRNG block: part of the key derivation, and the unit of work of a Dask task.
DRAW_BLOCK = 250
DTYPES = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class TableSpec:
    """Everything but (d, d_h) that fixes a table's numbers; the storage as its record
    (:class:`rmtbase.stats.storage.Storage`, looked up once by :func:`make_spec`).

    ``draws``: a table made on its own (``rmtbase baseline``, ``rmtbase sweep``,
    :func:`rmtbase.baseline.tables.baseline`) has 2,000 by default, the size of the shipped
    tables (``src/rmtbase/data/*-n2000-*``), because nothing grows it afterwards; a score asks
    for at least :data:`rmtbase.baseline.cache.TABLE_DRAWS` and grows its null itself where a
    decision is open (:mod:`rmtbase.scoring.stopping`)."""

    ensemble: str = "lowrank"
    stats: str = "all"
    draws: int = 2000
    seed: int = 0
    sigma_q: float = 1.0
    sigma_k: float = 1.0
    depth: int | None = None
    dtype: str = "float32"
    chunk_size: int | None = None
    x64: bool = False
    storage: Storage = FLOAT32

    def __post_init__(self):
        """Checked when built (one-line :class:`InputError`); the ensemble's alias resolved,
        the storage held as its record, ``x64`` read from ``dtype``."""
        put = object.__setattr__
        put(self, "ensemble", check_ensemble(self.ensemble))
        if self.stats not in STAT_SETS:
            raise InputError(f"stats must be one of {', '.join(STAT_SETS)}, got {self.stats!r}")
        put(self, "draws", check_draws(self.draws))
        put(self, "seed", check_seed(self.seed))
        put(self, "sigma_q", check_sigma(self.sigma_q, "sigma_q"))
        put(self, "sigma_k", check_sigma(self.sigma_k, "sigma_k"))
        depth = self.depth
        if self.ensemble == "residual":
            if depth is None or isinstance(depth, bool) \
                    or not isinstance(depth, int | np.integer) or depth < 1:
                raise InputError(f"the residual ensemble needs an integer depth >= 1, got "
                                 f"{depth!r}")
            put(self, "depth", int(depth))
        elif depth is not None:
            raise InputError(f"depth applies only to the residual ensemble, not "
                             f"{self.ensemble!r}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be float32 or float64, got {self.dtype!r}")
        put(self, "x64", self.dtype == "float64")
        cs = self.chunk_size
        if cs is not None and (not isinstance(cs, int | np.integer) or cs < 1):
            raise InputError(f"chunk_size must be a positive integer, got {cs!r}")
        put(self, "storage", storage_record(self.storage))  # the name looked up once, here

    def n_blocks(self) -> int:
        return -(-self.draws // DRAW_BLOCK)


def make_spec(*, sigma=None, sigma_q=None, sigma_k=None, ensemble="lowrank",
              draws=TableSpec.draws, seed=0, stats="all", depth=None, dtype="float32",
              chunk_size=None, storage="float32") -> TableSpec:
    """A :class:`TableSpec` from options (it checks itself): ``sigma`` sets both σ (not with
    ``sigma_q``/``sigma_k``; None: 1), ``dtype`` any NumPy spelling of float32 or float64."""
    if sigma is not None and (sigma_q is not None or sigma_k is not None):
        raise InputError("give either sigma or sigma_q/sigma_k, not both")
    if sigma is not None:
        sigma_q = sigma_k = check_sigma(sigma, "sigma")
    try:
        dtype = np.dtype(dtype).name if dtype is not None else "float32"
    except TypeError:
        raise InputError(f"dtype must be float32 or float64, got {dtype!r}") from None
    return TableSpec(ensemble=ensemble, stats=stats, draws=draws, seed=seed,
                     sigma_q=1.0 if sigma_q is None else sigma_q,
                     sigma_k=1.0 if sigma_k is None else sigma_k, depth=depth, dtype=dtype,
                     chunk_size=chunk_size, storage=storage)


#: :func:`make_spec`'s keywords: what a table's options may name.
SPEC_KEYWORDS = ("sigma", "sigma_q", "sigma_k", "ensemble", "draws", "seed", "stats", "depth",
                 "dtype", "chunk_size", "storage")


def spec_with(spec: TableSpec | None, options: dict, caller: str) -> TableSpec:
    """``spec`` (None: the defaults) with the fields ``options`` names (:func:`make_spec`'s
    keywords) replaced, checked again by :func:`make_spec`; ``sigma`` replaces both σ. TypeError
    for a keyword :func:`make_spec` lacks, InputError for a ``spec`` of another type."""
    check_keywords(options, SPEC_KEYWORDS, caller)
    if spec is None:
        return make_spec(**options)
    if not isinstance(spec, TableSpec):
        raise InputError(f"{caller}: spec must be a TableSpec, got {spec!r}")
    if not options:
        return spec
    held = {"sigma_q": spec.sigma_q, "sigma_k": spec.sigma_k, "ensemble": spec.ensemble,
            "draws": spec.draws, "seed": spec.seed, "stats": spec.stats, "depth": spec.depth,
            "dtype": spec.dtype, "chunk_size": spec.chunk_size, "storage": spec.storage}
    if "sigma" in options:
        del held["sigma_q"], held["sigma_k"]
    return make_spec(**{**held, **options})


def grid_cells(d, d_h) -> list[tuple[int, int]]:
    """Cells (d, d_h) of the outer product of ``d`` and ``d_h`` (ints or sequences), d_h ≤ d;
    for a single (d, d_h) an impossible pair is an error, in a grid it is skipped."""
    ds = [d] if np.ndim(d) == 0 else list(d)
    dhs = [d_h] if np.ndim(d_h) == 0 else list(d_h)
    if not ds or not dhs:
        raise InputError("need at least one d and one d_h")
    if len(ds) == 1 and len(dhs) == 1:
        return [check_dims(ds[0], dhs[0])]
    ds = [check_dims(x, 1)[0] for x in ds]
    dhs = [check_dims(x, 1)[0] for x in dhs]
    cells = list(dict.fromkeys((a, b) for a in ds for b in dhs if b <= a))
    if not cells:
        raise InputError(f"no cell with d_h <= d in d={ds}, d_h={dhs}")
    return cells
