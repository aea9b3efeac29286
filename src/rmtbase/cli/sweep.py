"""``rmtbase sweep``: a (d, d_h) grid of null tables as Dask distributed tasks.

``rmtbase sweep --d 768 1024 --dh 64 --draws 2000 --seed 7 --workers 2 --out grid.nc`` wraps
:func:`rmtbase.baseline.sweep.sweep`: the table equals ``rmtbase baseline`` over the same grid
and seed, bit for bit; ``--storage`` draws through a precision's round trip, as ``score`` does.
An interrupted sweep given again submits only its unfinished blocks (kept beside ``--out`` or
each cache file). ``--into-cache`` (:func:`rmtbase.baseline.sweep_cache.sweep_into_cache`) writes
instead the null tables and profile null a Gaussian-null ``score`` of each (d, d_h, storage)
reads from the user cache (``--stats``, ``--draws``, ``--seed`` then the score's; served tables
kept). ``--network KIND`` (:func:`rmtbase.baseline.sweep.network_sweep`): a product-network table
over (d, depth, gain), float64 (``--dh``, ``--sigma*``, ``--ensemble``, ``--dtype``,
``--storage`` do not apply)."""

from __future__ import annotations

import sys

from ..analytic._network_kind import KINDS
from ..stats.names import STORAGES
from ..stats.storage import REGISTRY as STORAGE_REGISTRY
from ..stats.storage import shipped_records
from ._common import ginibre_choice, live_choice, number, positive_int
from .baseline import TABLE_OUT_HELP, add_table_options, table_options

#: Draws of a table when --draws is not given (``rmtbase baseline``'s default).
TABLE_DRAWS = 2000
#: Head-table options that a --network table does not take (argparse dest, its default).
NOT_FOR_NETWORK = {"dh": None, "sigma": None, "sigma_q": None, "sigma_k": None,
                   "ensemble": "lowrank", "dtype": "float32", "storage": None}
#: Options that the scorer's cache tables do not take (σ = 1, lowrank, float32 tables).
NOT_FOR_CACHE = {"sigma": None, "sigma_q": None, "sigma_k": None, "ensemble": "lowrank",
                 "dtype": "float32", "depth": None, "network": None, "out": None}


def add_parser(sub):
    p = sub.add_parser("sweep", help="grid of null tables on Dask distributed (or the "
                                     "scorer's cache tables: --into-cache)",
                       description=__doc__.splitlines()[0])
    p.add_argument("--d", type=positive_int, nargs="+", required=True, help="model widths d")
    p.add_argument("--dh", type=positive_int, nargs="+", help="head dimensions d_h (head tables)")
    p.add_argument("--network", choices=KINDS, default=None, type=ginibre_choice("--network"),
                   help="a product-network table over (d, depth, gain) instead of head tables")
    p.add_argument("--gain", type=number, nargs="+", default=None,
                   help="per-layer gains G of --network (default 1)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler address")
    where.add_argument("--workers", type=positive_int,
                       help="start a loopback LocalCluster of N processes, 1 thread each")
    p.add_argument("--blocks-per-task", type=positive_int, default=1,
                   help="blocks of 250 draws of one cell per Dask task (numbers do not change)")
    add_table_options(p)
    p.set_defaults(draws=None)  # resolved in run(): a table's default, or the score's
    p.add_argument("--storage", type=live_choice(STORAGES, STORAGE_REGISTRY), metavar="STORAGE",
                   nargs="+", default=None,
                   help="checkpoint storage the null draws are put through (default float32; "
                        "several only with --into-cache): "
                        + ", ".join(s.name for s in shipped_records()) + ", or a plugin's")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", help=TABLE_OUT_HELP)
    out.add_argument("--into-cache", action="store_true",
                     help="write the null tables and profile nulls that `rmtbase score` reads "
                          "for these shapes and storages into the user cache ($RMTBASE_CACHE), "
                          "so its next score of them draws no null table")
    return p


def _network(args, progress):
    from ..baseline.sweep import network_sweep
    from ..errors import InputError

    extra = ["--" + k.replace("_", "-") for k, v in NOT_FOR_NETWORK.items()
             if getattr(args, k) != v]
    if args.into_cache:
        extra.append("--into-cache")
    if extra:
        raise InputError(f"{', '.join(extra)} do not apply to a --network table")
    if args.depth is None:
        raise InputError("--network needs --depth L [L ...]")
    draws = TABLE_DRAWS if args.draws is None else args.draws
    return network_sweep(args.d, args.depth, 1.0 if args.gain is None else args.gain,
                         kind=args.network, draws=draws, seed=args.seed, stats=args.stats,
                         chunk_size=args.chunk_size, scheduler=args.scheduler,
                         workers=args.workers, blocks_per_task=args.blocks_per_task,
                         out=args.out, progress=progress)


def _into_cache(args, progress) -> int:
    """``--into-cache``: the score's null tables and profile nulls, both drawn on the
    workers."""
    from ..baseline.sweep_cache import sweep_into_cache
    from ..baseline.tables import grid_cells
    from ..errors import InputError
    from ..files.user_cache import cache_dir
    from ..scoring.profile.cache import cached_profile_null

    extra = ["--" + k.replace("_", "-") for k, v in NOT_FOR_CACHE.items()
             if getattr(args, k) != v]
    if extra:
        raise InputError(f"{', '.join(extra)} do not apply to --into-cache (the scorer's "
                         "cache holds sigma = 1 lowrank float32 tables)")
    storages = list(dict.fromkeys(args.storage or ["float32"]))
    cells = grid_cells(args.d, args.dh)

    def profiles(client):  # scoring's own function, file and format; chunks on the workers
        for cell in cells:
            for storage in storages:
                cached_profile_null(*cell, storage, seed=args.seed, client=client)

    got = sweep_into_cache(args.d, args.dh, storages=storages, stats=args.stats,
                           draws=args.draws, seed=args.seed, chunk_size=args.chunk_size,
                           scheduler=args.scheduler, workers=args.workers,
                           blocks_per_task=args.blocks_per_task, progress=progress,
                           then=profiles)
    print(f"{cache_dir()}: wrote {len(got['written'])} null tables, "
          f"{len(got['found'])} already there, and the profile nulls of "
          f"{len(cells) * len(storages)} (shape, storage) pairs", file=sys.stderr)
    return 0


def run(args) -> int:
    from ..baseline.sweep import sweep
    from ..errors import InputError

    progress = not args.no_progress
    if args.network:
        ds = _network(args, progress)
        print(f"wrote {args.out}: {len(ds.data_vars)} statistics x {ds.sizes['draw']} draws, "
              f"{args.network} network, d {list(ds['d'].values)}, depth "
              f"{list(ds['depth'].values)}, gain {list(ds['gain'].values)}", file=sys.stderr)
        return 0
    if args.dh is None:
        raise InputError("sweep needs --dh (head tables) or --network KIND")
    if args.gain is not None:
        raise InputError("--gain applies only to a --network table")
    if args.into_cache:
        return _into_cache(args, progress)
    if args.storage is not None and len(args.storage) > 1:
        raise InputError("--storage takes one value for a table (several only with "
                         "--into-cache)")
    if args.draws is None:
        args.draws = TABLE_DRAWS
    ds = sweep(args.d, args.dh, scheduler=args.scheduler, workers=args.workers,
               blocks_per_task=args.blocks_per_task, out=args.out, progress=progress,
               storage=(args.storage or ["float32"])[0], **table_options(args))
    print(f"wrote {args.out}: {len(ds.data_vars)} statistics x {ds.sizes['draw']} draws, "
          f"cells {ds.attrs['cells']}, {ds.attrs['storage_dtype']} storage", file=sys.stderr)
    return 0
