"""``rmtbase sweep``: a (d, d_h) grid of null tables as Dask distributed tasks.

    rmtbase sweep --d 768 1024 --dh 64 --draws 2000 --seed 7 --workers 2 --out grid.nc
    rmtbase sweep --d 4096 --dh 128 --scheduler tcp://10.0.0.5:8786 --out big.nc

The combined table equals ``rmtbase baseline`` over the same grid and seed, bit for bit.
Thin wrapper over :func:`rmtbase.baseline.sweep.sweep`.
"""

from __future__ import annotations

import sys

from ._common import positive_int
from .baseline import add_table_options, table_options


def add_parser(sub):
    p = sub.add_parser("sweep", help="grid of null tables on Dask distributed",
                       description=__doc__.splitlines()[0])
    p.add_argument("--d", type=positive_int, nargs="+", required=True, help="model widths d")
    p.add_argument("--dh", type=positive_int, nargs="+", required=True, help="head dimensions d_h")
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


def run(args) -> int:
    from ..baseline.sweep import sweep

    progress = not args.no_progress
    ds = sweep(args.d, args.dh, scheduler=args.scheduler, workers=args.workers,
               blocks_per_task=args.blocks_per_task, out=args.out, progress=progress,
               **table_options(args))
    print(f"wrote {args.out}: {len(ds.data_vars)} statistics x {ds.sizes['draw']} draws, "
          f"cells {ds.attrs['cells']}", file=sys.stderr)
    return 0
