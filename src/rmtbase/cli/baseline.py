"""``rmtbase baseline``: make a Monte Carlo null table, or summarise one.

    rmtbase baseline --d 768 --dh 64 --draws 2000 --seed 7 --out t.nc
    rmtbase baseline --summary t.nc [--json]

Thin wrapper over :func:`rmtbase.baseline.tables.baseline` and :func:`rmtbase.baseline.tables.summary`.
"""

from __future__ import annotations

import argparse
import sys

from ._common import add_sigma_options, emit, positive_int

ENSEMBLES = ("lowrank", "gaussian", "residual")
STAT_SETS = ("all", "spectral", "elementwise")


def add_table_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``baseline`` and ``sweep``: the table's keys."""
    add_sigma_options(p)
    p.add_argument("--ensemble", choices=ENSEMBLES, default="lowrank",
                   help="null ensemble (default lowrank: W_QK = W_Q^T W_K, Gaussian factors)")
    p.add_argument("--draws", type=positive_int, default=2000, help="Monte Carlo draws per cell")
    p.add_argument("--seed", type=positive_int, default=0, help="PRNG seed (default 0)")
    p.add_argument("--stats", choices=STAT_SETS, default="all", help="statistics to compute")
    p.add_argument("--depth", type=positive_int, default=None, help="depth L (residual ensemble)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="sampling dtype (default float32)")
    p.add_argument("--chunk-size", type=positive_int, default=None,
                   help="draws per vectorised batch (memory only; numbers do not change)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def table_options(args: argparse.Namespace) -> dict:
    from ._common import resolve_sigmas

    sigma_q, sigma_k = resolve_sigmas(args)
    return dict(sigma_q=sigma_q, sigma_k=sigma_k, ensemble=args.ensemble, draws=args.draws,
                seed=args.seed, stats=args.stats, depth=args.depth, dtype=args.dtype,
                chunk_size=args.chunk_size)


def add_parser(sub):
    p = sub.add_parser("baseline", help="Monte Carlo null table (netCDF) or its summary",
                       description=__doc__.splitlines()[0])
    p.add_argument("--d", type=positive_int, nargs="+", help="model width(s) d")
    p.add_argument("--dh", type=positive_int, nargs="+", help="head dimension(s) d_h")
    add_table_options(p)
    p.add_argument("--out", default=None, help="write the table here (netCDF4, atomically)")
    p.add_argument("--summary", metavar="FILE", default=None,
                   help="summarise an existing table instead of making one")
    p.add_argument("--json", action="store_true", help="summary as JSON")
    return p


def _single(values, flag):
    from ..errors import InputError

    if values is None:
        return None
    if len(values) != 1:
        raise InputError(f"{flag} takes one value with --summary")
    return values[0]


def print_summary(ds, d=None, d_h=None, as_json=False, source="") -> None:
    """Summary of one cell of ``ds``: JSON, or an aligned text table."""
    from ..baseline.tables import QUANTILES, summary

    s = summary(ds, d, d_h)
    if as_json:
        emit(s, True)
        return
    if d is None:
        d, d_h = int(ds["d"].values[0]), int(ds["d_h"].values[0])
    a = ds.attrs
    print(f"{source}  d={d} d_h={d_h}  ensemble={a.get('ensemble')}  draws={a.get('draws')}  "
          f"seed={a.get('seed')}  sigma_q={a.get('sigma_q')} sigma_k={a.get('sigma_k')}  "
          f"dtype={a.get('dtype')}".strip())
    cols = ["mean", "std", *(f"q{q:g}" for q in QUANTILES), "analytic"]
    width = max(len(n) for n in s)
    print(f"{'statistic':<{width}}  " + "  ".join(f"{c:>11}" for c in cols))
    for name, e in s.items():
        cells = [f"{e[c]:>11.5g}" if c in e else f"{'-':>11}" for c in cols]
        print(f"{name:<{width}}  " + "  ".join(cells))


def run(args) -> int:
    from ..errors import InputError

    if args.summary:
        from ..baseline.tables import read_table

        ds = read_table(args.summary)
        print_summary(ds, _single(args.d, "--d"), _single(args.dh, "--dh"), args.json,
                      args.summary)
        return 0
    if args.d is None or args.dh is None:
        raise InputError("baseline needs --d and --dh (or --summary FILE)")
    from ..baseline.tables import baseline

    progress = not args.no_progress and sys.stderr.isatty()
    ds = baseline(args.d if len(args.d) > 1 else args.d[0],
                  args.dh if len(args.dh) > 1 else args.dh[0],
                  out=args.out, progress=progress, **table_options(args))
    if args.out:
        print(f"wrote {args.out}: {len(ds.data_vars)} statistics x {ds.sizes['draw']} draws, "
              f"cells {ds.attrs['cells']}", file=sys.stderr)
    elif ds.sizes["d"] * ds.sizes["d_h"] == 1:
        print_summary(ds, as_json=args.json)
    else:
        raise InputError("a grid needs --out FILE")
    return 0
