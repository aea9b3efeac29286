"""``rmtbase baseline``: make a Monte Carlo null table, or summarise one.

    rmtbase baseline --d 768 --dh 64 --draws 2000 --seed 7 --out t.nc
    rmtbase baseline --summary t.nc [--json]

Wraps :func:`rmtbase.baseline.tables.baseline` and :func:`rmtbase.baseline.tables.summary`.
Everything refusable is refused before the first draw; ``--out`` is written atomically (an
rmtbase table there replaced, another file refused) and an interrupted run resumes from its
completed blocks."""

from __future__ import annotations

import argparse
import sys

from ._common import add_sigma_options, emit, ginibre_choice, positive_int

#: rmtbase.baseline.table_contents.ENSEMBLES, spelled here so that parsing imports no JAX
ENSEMBLES = ("lowrank", "ginibre", "residual")
STAT_SETS = ("all", "spectral", "elementwise")


def add_table_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``baseline`` and ``sweep``: the table's keys."""
    add_sigma_options(p)
    p.add_argument("--ensemble", choices=ENSEMBLES, default="lowrank",
                   type=ginibre_choice("--ensemble"),
                   help="null ensemble (default lowrank: W_QK = W_Q^T W_K, Gaussian factors; "
                        "ginibre: a full-rank d x d matrix of i.i.d. Gaussian entries)")
    p.add_argument("--draws", type=positive_int, default=None,
                   help="Monte Carlo draws per cell (default: a table's, 2,000: "
                        "rmtbase.baseline.table_spec.TableSpec)")
    p.add_argument("--seed", type=positive_int, default=0, help="PRNG seed (default 0)")
    p.add_argument("--stats", choices=STAT_SETS, default="all", help="statistics to compute")
    p.add_argument("--depth", type=positive_int, nargs="+", default=None,
                   help="depth L (residual ensemble); several with rmtbase sweep --network")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="sampling dtype (default float32)")
    p.add_argument("--chunk-size", type=positive_int, default=None,
                   help="draws per compiled call (numbers do not change, bit for bit)")
    p.add_argument("--no-progress", "--quiet", dest="no_progress", action="store_true",
                   help="no progress output (default: a bar on a terminal, else a line on "
                        "stderr every ~30 s)")


#: Options that make a table; meaningless with ``--summary``.
TABLE_DESTS = ("sigma", "sigma_q", "sigma_k", "ensemble", "draws", "seed", "stats", "depth",
               "dtype", "chunk_size", "out")


def table_options(args: argparse.Namespace) -> dict:
    from ..errors import InputError
    from ._common import resolve_sigmas

    sigma_q, sigma_k = resolve_sigmas(args)
    depth = args.depth
    if depth is not None:
        if len(depth) != 1:
            raise InputError("--depth takes one value for head tables (several only with "
                             "rmtbase sweep --network)")
        depth = depth[0]
    out = dict(sigma_q=sigma_q, sigma_k=sigma_k, ensemble=args.ensemble, draws=args.draws,
               seed=args.seed, stats=args.stats, depth=depth, dtype=args.dtype,
               chunk_size=args.chunk_size)
    if out["draws"] is None:  # the table's own default (TableSpec.draws)
        del out["draws"]
    return out


#: ``--out`` of a command that writes one null table (``baseline``, ``sweep``).
TABLE_OUT_HELP = ("write the table here (netCDF4, atomically; an earlier rmtbase table there is "
                  "replaced, any other existing file refused; rerun the same command to resume "
                  "an interrupted run)")


def add_parser(sub):
    p = sub.add_parser("baseline", help="Monte Carlo null table (netCDF) or its summary",
                       description=__doc__.splitlines()[0])
    p.add_argument("--d", type=positive_int, nargs="+", help="model width(s) d")
    p.add_argument("--dh", type=positive_int, nargs="+", help="head dimension(s) d_h")
    add_table_options(p)
    p.add_argument("--out", default=None, help=TABLE_OUT_HELP)
    p.add_argument("--summary", metavar="FILE", default=None,
                   help="summarise an existing table instead of making one")
    p.add_argument("--json", action="store_true", help="summary as JSON")
    p.set_defaults(_table_defaults={k: p.get_default(k) for k in TABLE_DESTS})
    return p


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _single(values, flag):
    from ..errors import InputError

    if values is None:
        return None
    if len(values) != 1:
        raise InputError(f"{flag} takes one value with --summary")
    return values[0]


def print_summary(ds, d=None, d_h=None, as_json=False, source="") -> None:
    """Summary of one cell of ``ds`` (JSON or aligned text); a sweep's table with no cell named is
    summarised cell by cell (JSON keyed ``"<d>x<d_h>"``)."""
    from ..baseline.tables import QUANTILES, summary

    if d is None and d_h is None and "d" in ds.dims and "d_h" in ds.dims \
            and ds.sizes["d"] * ds.sizes["d_h"] > 1:
        cells = [(int(a), int(b)) for a in ds["d"].values for b in ds["d_h"].values if b <= a]
        if as_json:
            emit({f"{a}x{b}": summary(ds, a, b) for a, b in cells}, True, command="baseline")
            return
        for i, (a, b) in enumerate(cells):
            if i:
                print()
            print_summary(ds, a, b, False, source)
        return
    s = summary(ds, d, d_h)
    if as_json:
        emit(s, True, command="baseline")
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

        defaults = getattr(args, "_table_defaults", {})
        extra = [_flag(k) for k, v in defaults.items() if getattr(args, k, v) != v]
        if extra:
            raise InputError(f"--summary reads a table; {', '.join(extra)} do not apply to it "
                             "(only --d, --dh and --json do)")
        ds = read_table(args.summary)
        print_summary(ds, _single(args.d, "--d"), _single(args.dh, "--dh"), args.json,
                      args.summary)
        return 0
    if args.d is None or args.dh is None:
        raise InputError("baseline needs --d and --dh (or --summary FILE)")
    if not args.out and len(args.d) * len(args.dh) > 1:
        raise InputError("a grid of several (d, d_h) needs --out FILE (a single cell without "
                         "--out prints its summary)")
    from ..baseline.tables import baseline

    try:
        ds = baseline(args.d if len(args.d) > 1 else args.d[0],
                      args.dh if len(args.dh) > 1 else args.dh[0],
                      out=args.out, progress=not args.no_progress, **table_options(args))
    except KeyboardInterrupt:
        if args.out:
            print("rmtbase: completed blocks are kept; run the same command again to continue",
                  file=sys.stderr)
        raise
    if args.out:
        print(f"wrote {args.out}: {sum('eig' not in v.dims for v in ds.data_vars.values())} "
              f"statistics x {ds.sizes['draw']} draws, "
              f"cells {ds.attrs['cells']}", file=sys.stderr)
    else:
        print_summary(ds, as_json=args.json)
    return 0
