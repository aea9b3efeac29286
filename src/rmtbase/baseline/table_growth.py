"""A null table grown from the draws already held, never redrawn from draw 0.

Draw ``i`` of a table depends on (seed, d, d_h, i) only and block ``b`` of
:data:`~rmtbase.baseline.table_spec.DRAW_BLOCK` draws is drawn by itself
(:mod:`rmtbase.baseline.tables`), so the ``n``-draw table is its first whole blocks from a
shorter table of the same request followed by the blocks after them. :func:`held_table` finds the
largest shorter table of a request (user cache, memory, or shipped) drawn by this program;
:func:`grown_table` draws only the blocks after its whole ones and gives the table a fresh draw
gives, value for value (held draws kept as held, ``creation_time`` aside)."""

from __future__ import annotations

import os

import numpy as np

#: Global attributes that must agree for a held table's draws to be this program's draws.
SAME_PROGRAM = ("rmtbase_table_format", "ensemble", "stats", "seed", "dtype", "storage_dtype",
                "backend", "jax_version", "jax_enable_x64", "prng_impl", "draw_block", "sampler",
                "key_derivation", "cells")
#: What a global attribute absent from a table means: a table without ``storage_dtype`` (the
#: shipped float32 tables) holds float32 statistics, as the shipped index's default storage says.
ABSENT = {"storage_dtype": "float32"}


def _same_program(ds, spec, cell) -> bool:
    """Whether ``ds``'s draws were made as ``spec``'s at ``cell`` are here."""
    from .table_dataset import _global_attrs

    want = _global_attrs(spec, [cell])
    return all(str(ds.attrs.get(k, ABSENT.get(k))) == str(want.get(k)) for k in SAME_PROGRAM)


def held_table(key, entries):
    """The largest table of ``entries`` (index entries of request ``key``, a
    :class:`rmtbase.baseline.cache.TableKey`, with fewer draws: a cached ``file``, a ``table``
    kept in memory, or a shipped one read by its ``load()``) with at least one whole block, drawn
    by this program; a damaged file is reported and removed. Tables are read largest first, only
    until one serves. None where none serves."""
    from ..errors import TableError
    from ..files.cache_trust import UntrustedCache
    from ..files.user_cache import damaged
    from .cache_rungs import read_cached
    from .table_spec import DRAW_BLOCK

    spec = key.spec()
    held = [e for e in entries if DRAW_BLOCK <= e["draws"] < key.min_draws]
    for entry in sorted(held, key=lambda e: -e["draws"]):  # the largest first
        if "table" in entry:
            ds = entry["table"]
        elif "load" in entry:
            ds = entry["load"]()
        else:
            try:
                ds = read_cached(entry)
            except UntrustedCache:  # another user's: said once by read_cached, left alone
                continue
            except TableError as exc:
                if os.path.lexists(entry["file"]):  # not one another process just removed
                    damaged(entry["file"], str(exc).removeprefix(f"{entry['file']} "), "table")
                continue
        if _same_program(ds, spec, (key.d, key.d_h)) and (
                not entry.get("shipped") or _first_draw_agrees(ds, spec, (key.d, key.d_h))):
            return ds
    return None


#: Statistics of draw 0 compared by :func:`_first_draw_agrees`, and their relative tolerance:
#: float32 rounding of the same matrices (another CPU, another batch) moves them by ~1e-7 to
#: 1e-6; another draw moves the rms of a d × d_h factor by about 1/sqrt(2 d d_h) (≈ 1e-3 at
#: 4096 × 128, more at smaller shapes) and λ's statistics by percents.
PROBE, PROBE_RTOL = ("q.rms", "k.rms", "qk.lambda_max", "qk.sum_lambda2"), 2e-5


def _first_draw_agrees(ds, spec, cell) -> bool:
    """Whether draw 0 of ``ds`` (a shipped table, drawn elsewhere) is this program's draw 0 to
    float32 rounding: one draw computed here on the table's key (its key derivation) and
    compared on :data:`PROBE`. A table whose sampler route changed since it was drawn keeps its
    attributes but not its draws; it is not continued."""
    import jax

    from .null import null_draws
    from .sigma_range import scale_draws
    from .tables import cell_key

    d, d_h = cell
    with jax.enable_x64(spec.x64):
        got = null_draws(jax.random.fold_in(cell_key(spec.seed, d, d_h, spec.depth), 0), d, d_h,
                         1, stats=spec.stats, ensemble=spec.ensemble, depth=spec.depth,
                         chunk_size=spec.chunk_size, dtype=getattr(jax.numpy, spec.dtype),
                         storage=spec.storage)
    got = scale_draws(got, spec.sigma_q, spec.sigma_k, spec.dtype)
    held = _as_draws(ds, 1)
    names = [k for k in PROBE if k in held and k in got]
    return bool(names) and all(
        np.allclose(np.asarray(got[k], dtype=np.float64).ravel()[:1],
                    np.asarray(held[k], dtype=np.float64).ravel()[:1], rtol=PROBE_RTOL, atol=0)
        for k in names)


def held_draws(held) -> int:
    """Draws of ``held`` that a grown table keeps: its whole blocks (0 for None)."""
    from .table_spec import DRAW_BLOCK

    return 0 if held is None else held.sizes["draw"] // DRAW_BLOCK * DRAW_BLOCK


def _as_draws(ds, n: int) -> dict:
    """The first ``n`` draws of a one-cell table as ``null_draws`` keys (``{"qk.npr": ...}``)."""
    from .table_contents import LAMBDA_KEY, LAMBDA_VAR

    out = {}
    for v in ds.data_vars:
        a = ds[v].attrs
        name = LAMBDA_KEY if v == LAMBDA_VAR else f"{a['matrix']}.{a['statistic']}"
        out[name] = np.asarray(ds[v].values[0, 0, :n])
    return out


def grown_table(spec, cell, held, bar=None):
    """The table of ``spec`` at ``cell``: :func:`held_draws` of ``held`` (:func:`held_table`)
    kept, the blocks after them drawn (``bar``: progress, in draws). Same values and attributes
    as :func:`rmtbase.baseline.tables.cell_table` (``creation_time`` aside)."""
    from .limits import check_cells
    from .table_dataset import assemble
    from .table_spec import DRAW_BLOCK
    from .tables import generate_blocks

    cell = (int(cell[0]), int(cell[1]))
    check_cells(spec, [cell])
    keep = held_draws(held)
    if not 0 < keep < spec.draws:
        raise ValueError(f"a held table of {keep} whole draws cannot grow to {spec.draws}")
    new = generate_blocks(spec, *cell, start=keep // DRAW_BLOCK, bar=bar)
    old = _as_draws(held, keep)
    if set(old) != set(new):  # other statistics than this program draws: all drawn here
        old = generate_blocks(spec, *cell, start=0, stop=keep // DRAW_BLOCK)
    # the held values are the fresh ones cast to the table's dtype: assemble's cast of their
    # concatenation gives the same bits
    draws = {k: np.concatenate([np.asarray(old[k]), np.asarray(new[k])]) for k in new}
    return assemble(spec, [cell], {cell: draws})


__all__ = ["ABSENT", "SAME_PROGRAM", "grown_table", "held_draws", "held_table"]
