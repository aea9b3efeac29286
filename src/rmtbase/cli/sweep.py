"""``rmtbase sweep``: a (d, d_h) grid of null tables as Dask distributed tasks.

    rmtbase sweep --d 768 1024 --dh 64 --draws 2000 --seed 7 --workers 2 --out grid.nc
    rmtbase sweep --d 4096 --dh 128 --scheduler tcp://10.0.0.5:8786 --out big.nc
    rmtbase sweep --network residual --d 64 384 --depth 1 4 16 48 --gain 0.5 1 --workers 2 \
        --draws 500 --out net.nc

The combined table equals ``rmtbase baseline`` over the same grid and seed, bit for bit.
With ``--network KIND`` it is a product-network table over (d, depth, gain)
(:func:`rmtbase.baseline.network_tables.network_table`, float64; ``--dh``, ``--sigma*``,
``--ensemble`` and ``--dtype`` do not apply). Thin wrapper over
:func:`rmtbase.baseline.sweep.sweep` and :func:`rmtbase.baseline.sweep.network_sweep`.
"""

from __future__ import annotations

import sys

from ._common import number, positive_int
from .baseline import add_table_options, table_options

#: Head-table options that a --network table does not take (argparse dest, its default).
NOT_FOR_NETWORK = {"dh": None, "sigma": None, "sigma_q": None, "sigma_k": None,
                   "ensemble": "lowrank", "dtype": "float32"}


def add_parser(sub):
    p = sub.add_parser("sweep", help="grid of null tables on Dask distributed",
                       description=__doc__.splitlines()[0])
    p.add_argument("--d", type=positive_int, nargs="+", required=True, help="model widths d")
    p.add_argument("--dh", type=positive_int, nargs="+", help="head dimensions d_h (head tables)")
    p.add_argument("--network", choices=("gaussian", "residual"), default=None,
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
    p.add_argument("--out", required=True,
                   help="write the table here (netCDF4, atomically; an earlier rmtbase table "
                        "there is replaced, any other existing file refused)")
    return p


def _network(args, progress):
    from ..baseline.sweep import network_sweep
    from ..errors import InputError

    extra = ["--" + k.replace("_", "-") for k, v in NOT_FOR_NETWORK.items()
             if getattr(args, k) != v]
    if extra:
        raise InputError(f"{', '.join(extra)} do not apply to a --network table")
    if args.depth is None:
        raise InputError("--network needs --depth L [L ...]")
    return network_sweep(args.d, args.depth, 1.0 if args.gain is None else args.gain,
                         kind=args.network, draws=args.draws, seed=args.seed, stats=args.stats,
                         chunk_size=args.chunk_size, scheduler=args.scheduler,
                         workers=args.workers, blocks_per_task=args.blocks_per_task,
                         out=args.out, progress=progress)


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
    ds = sweep(args.d, args.dh, scheduler=args.scheduler, workers=args.workers,
               blocks_per_task=args.blocks_per_task, out=args.out, progress=progress,
               **table_options(args))
    print(f"wrote {args.out}: {len(ds.data_vars)} statistics x {ds.sizes['draw']} draws, "
          f"cells {ds.attrs['cells']}", file=sys.stderr)
    return 0
