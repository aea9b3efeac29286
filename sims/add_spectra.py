"""Add the stored spectrum ``lambda`` to the shipped null tables, in place, verified.

Tables made before spectra were stored hold only the spectral statistics. For each shipped
file with spectral statistics this re-draws the spectral part only, with the file's own seed,
key derivation (:func:`rmtbase.baseline.tables.cell_key`, blocks of ``DRAW_BLOCK``), storage
rounding and draw count:

- ``stats="spectral"`` tables: :func:`rmtbase.baseline.null.null_draws` with
  ``return_lambda=True`` — the code path that made them (the fast spectral path);
- ``stats="all"`` tables (factor path): the draw's W_Q, W_K (:func:`lowrank_factors`, then the
  storage round trip) and λ = :func:`eigvals_from_factors` — what ``head_stats`` computed the
  stored statistics from — without the element statistics.

It then **verifies** that :func:`rmtbase.stats.spectral.spectral_stats` of the new λ equals
every stored spectral statistic (max relative deviation printed; a file whose deviation exceeds
``--rtol``, default 1e-5, is not written), writes the file atomically (the table plus
``lambda``; every other variable and attribute unchanged) and updates ``index.json`` (sha256,
bytes). ``--max-bytes`` caps the bytes added in all (the tracked tree must stay small): files
are taken in the order MiniLM's (384, 32) first, then spectral tables, then ``all`` tables by
width, and a file that would pass the cap is left as it is and reported.

    python sims/add_spectra.py                      # every shipped file, 34 MB cap
    python sims/add_spectra.py --cells 384x32 --dry-run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "src" / "rmtbase" / "data"


def draw_lambda(entry: dict) -> np.ndarray:
    """λ ``(draws, d_h)`` of the shipped table ``entry`` at σ = 1, float32, redrawn."""
    import jax
    import jax.numpy as jnp

    from rmtbase.baseline.null import null_draws
    from rmtbase.baseline.tables import DRAW_BLOCK, cell_key
    from rmtbase.ensembles import lowrank_factors, map_draws
    from rmtbase.stats.precision import round_trip
    from rmtbase.stats.spectral import eigvals_from_factors

    d, d_h, n, storage = entry["d"], entry["d_h"], entry["draws"], entry["storage"]
    key = cell_key(entry["seed"], d, d_h)

    def fn(k):
        wq, wk = lowrank_factors(k, d, d_h, 1.0, 1.0, jnp.float32)
        if storage != "float32":
            wq, wk = round_trip(wq, storage), round_trip(wk, storage)
        return {"qk.lambda": eigvals_from_factors(wq, wk)}

    parts = []
    for b in range(-(-n // DRAW_BLOCK)):
        m = min(DRAW_BLOCK, n - b * DRAW_BLOCK)
        bkey = jax.random.fold_in(key, b)
        if entry["stats"] == "spectral":
            got = null_draws(bkey, d, d_h, m, stats="spectral", storage=storage,
                             return_lambda=True)
        else:
            got = map_draws(fn, bkey, m, min(m, 64), method="map")
        parts.append(np.asarray(got["qk.lambda"], dtype=np.float32))
    return np.concatenate(parts)


def verify(ds, lam: np.ndarray) -> dict:
    """Max relative deviation of spectral_stats(λ) from each stored spectral statistic."""
    from rmtbase.baseline.spectra import derive_stats
    from rmtbase.stats import SPECTRAL_STATS

    names = [s for s in SPECTRAL_STATS if s in ds.data_vars]
    got = derive_stats(lam, names)
    out = {}
    for s in names:
        a = np.asarray(ds[s].values, np.float64).reshape(-1)
        b = np.asarray(got[s], np.float64).reshape(-1)
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            out[s] = float("inf")
            continue
        m = np.isfinite(a) & (a != 0)
        out[s] = float(np.max(np.abs(b[m] - a[m]) / np.abs(a[m]))) if m.any() else 0.0
    return out


def _order(e: dict):
    return ((e["d"], e["d_h"]) != (384, 32), e["stats"] != "spectral", e["d"] * e["d_h"],
            e["file"])


def main(argv=None) -> int:
    from rmtbase.baseline.spectra import LAMBDA_VAR
    from rmtbase.baseline.table_dataset import lambda_variable
    from rmtbase.baseline.tables import read_table, write_table

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--cells", default=None, help="comma list like 384x32 (default: all)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--max-bytes", type=float, default=34e6, help="bytes added in all, at most")
    p.add_argument("--dry-run", action="store_true", help="verify and measure, write nothing")
    args = p.parse_args(argv)
    index_path = args.data / "index.json"
    index = json.loads(index_path.read_text())
    cells = None if not args.cells else {tuple(int(x) for x in c.lower().split("x"))
                                         for c in args.cells.split(",")}
    todo = sorted((e for e in index["tables"] if e["stats"] in ("all", "spectral")
                   and (cells is None or (e["d"], e["d_h"]) in cells)), key=_order)
    added, skipped, bad = 0, [], []
    scratch = Path(tempfile.mkdtemp(prefix="rmtbase-add-spectra-"))
    try:
        for e in todo:
            path = args.data / e["file"]
            ds = read_table(path)
            if LAMBDA_VAR in ds.data_vars:
                print(f"{e['file']}: has lambda already", flush=True)
                continue
            t0 = time.perf_counter()
            lam = draw_lambda(dict(e, storage=e.get("storage", "float32")))
            dev = verify(ds, lam)
            worst = max(dev.values())
            new = ds.copy()
            new[LAMBDA_VAR] = lambda_variable({(e["d"], e["d_h"]): {"qk.lambda": lam}},
                                              e["draws"], ds["npr"].dtype, [e["d"]], [e["d_h"]])
            new = new.assign_coords(eig=("eig", np.arange(lam.shape[1], dtype=np.int64),
                                         {"long_name": "eigenvalue rank (0 = largest)"}))
            new.attrs["history"] = (ds.attrs.get("history", "") + " lambda added by "
                                    f"sims/add_spectra.py (spectral_stats(lambda) max rel dev "
                                    f"{worst:.2e} from the stored statistics); ").strip()
            tmp = write_table(new, scratch / e["file"])
            grow = tmp.stat().st_size - path.stat().st_size
            secs = time.perf_counter() - t0
            line = (f"{e['file']}: {secs:.1f} s, max rel dev {worst:.2e} "
                    f"({max(dev, key=dev.get)}), +{grow / 1e6:.2f} MB")
            if not worst <= args.rtol:
                bad.append(e["file"])
                print(f"{line}: MISMATCH beyond {args.rtol:g}, not written "
                      + json.dumps(dev), flush=True)
                continue
            if added + grow > args.max_bytes:
                skipped.append((e["file"], grow))
                print(f"{line}: over the {args.max_bytes / 1e6:.1f} MB cap, not written",
                      flush=True)
                continue
            if args.dry_run:
                added += grow
                print(f"{line} (dry run)", flush=True)
                continue
            part = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            shutil.copyfile(tmp, part)
            with open(part, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(part, path)
            added += grow
            e["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
            e["bytes"] = path.stat().st_size
            itmp = index_path.with_suffix(".json.tmp")
            itmp.write_text(json.dumps(index, indent=1) + "\n")
            itmp.replace(index_path)
            print(line, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"added {added / 1e6:.2f} MB; {len(skipped)} over the cap "
          f"({sum(g for _, g in skipped) / 1e6:.2f} MB): {[f for f, _ in skipped]}; "
          f"{len(bad)} mismatched: {bad}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
