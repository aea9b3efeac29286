"""Generate the σ = 1 null tables shipped in ``src/rmtbase/data`` and their ``index.json``.

One netCDF file per (d, d_h) cell of the seed models, named by
:func:`rmtbase.baseline.cache.table_filename` (every key the numbers depend on), lowrank ensemble,
float32, seed 0, stored as float32 or (``--storage bfloat16``) passed through the checkpoint's
rounding (:mod:`rmtbase.stats.precision`). Each run adds or replaces index entries for the cells it made and records the
wall time of each, so the choices in docs/null-and-storage.md can be checked:

    python sims/make_shipped_tables.py --stats spectral --draws 4000
    python sims/make_shipped_tables.py --stats all --draws 2000 --cells 384x32
    python sims/make_shipped_tables.py --stats all --draws 2000 --storage bfloat16
    python sims/make_shipped_tables.py --stats spectral --draws 100000 --cells 384x32 --extension
    python sims/make_shipped_tables.py --bands

``--extension`` marks a long spectral table as serving only the sequential extension of the
spectral null (:mod:`rmtbase.baseline.cache`): the 100,000 draws at MiniLM's (384, 32), so that
a first ``rmtbase score`` on the default model generates nothing. ``--bands`` writes
``spectrum_bands.json``: the null spectrum band of the spectrum figure (200 draws, seed 0) of
each cell, which spares a first run compiling the draws.

Re-running with the same options rewrites identical numbers (same seed, same backend).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import time
from pathlib import Path

#: (d, d_h) of the seed models -> the models that use it.
SEED_CELLS = {
    (384, 32): "MiniLM-L6",
    (512, 64): "Pythia-70M",
    (768, 64): "GPT-2 small, BERT-base, Pythia-160M",
    (1024, 64): "GPT-2 medium, Pythia-410M",
    (1280, 64): "GPT-2 large",
    (1600, 64): "GPT-2 XL",
    (2048, 256): "Pythia-1B",
    (2048, 128): "Pythia-1.4B",
    (2560, 80): "Pythia-2.8B",
    (4096, 128): "Pythia-6.9B, LLaMA-3-8B, Mistral-7B",
    (5120, 128): "Pythia-12B",
}

DATA = Path(__file__).resolve().parents[1] / "src" / "rmtbase" / "data"


def _cells(text: str | None):
    if not text:
        return list(SEED_CELLS)
    out = []
    for item in text.split(","):
        d, d_h = item.lower().split("x")
        out.append((int(d), int(d_h)))
    return out


def main(argv=None) -> int:
    from rmtbase.baseline.cache import table_filename
    from rmtbase.baseline.tables import TABLE_FORMAT, baseline, write_table

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stats", choices=("all", "spectral", "elementwise"), default="spectral")
    p.add_argument("--draws", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cells", default=None, help="comma list like 768x64,384x32 (default: all)")
    p.add_argument("--storage", default="float32", help="checkpoint precision the null models")
    p.add_argument("--out", type=Path, default=DATA)
    p.add_argument("--extension", action="store_true",
                   help="mark the tables as serving the sequential spectral extension only")
    p.add_argument("--bands", action="store_true",
                   help="write spectrum_bands.json (null spectrum bands) and no tables")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.bands:
        return _bands(args)
    index_path = args.out / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"tables": []}
    for d, d_h in _cells(args.cells):
        t0 = time.perf_counter()
        ds = baseline(d, d_h, stats=args.stats, draws=args.draws, seed=args.seed,
                      progress=True, storage=args.storage)
        seconds = time.perf_counter() - t0
        name = table_filename(d, d_h, ensemble="lowrank", stats=args.stats, draws=args.draws,
                              seed=args.seed, dtype="float32", storage=args.storage)
        path = write_table(ds, args.out / name)
        entry = {"file": name, "d": d, "d_h": d_h, "ensemble": "lowrank", "stats": args.stats,
                 "draws": args.draws, "seed": args.seed, "dtype": "float32",
                 "storage": args.storage,
                 "format": TABLE_FORMAT, "models": SEED_CELLS.get((d, d_h), ""),
                 **({"extension": True} if args.extension else {}),
                 "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                 "bytes": path.stat().st_size, "seconds": round(seconds, 1),
                 "backend": ds.attrs["backend"], "rmtbase_version": ds.attrs["rmtbase_version"],
                 "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        index["tables"] = [e for e in index["tables"] if e["file"] != name] + [entry]
        index["tables"].sort(key=lambda e: (e["d"], e["d_h"], e["stats"], e["draws"],
                                            e.get("storage", "float32")))
        tmp = index_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(index, indent=1) + "\n")
        tmp.replace(index_path)
        print(f"{name}: {seconds:.1f} s, {entry['bytes'] / 1e6:.2f} MB", flush=True)
    return 0


def _bands(args) -> int:
    import jax

    from rmtbase._version import __version__
    from rmtbase.scoring.score import SPECTRUM_QUANTILES, _drawn_spectrum_band

    n = 200  # score_model's spectrum_draws default
    bands = []
    for d, d_h in _cells(args.cells):
        band = _drawn_spectrum_band(d, d_h, n, args.seed)
        bands.append({"d": d, "d_h": d_h, "draws": n, "seed": args.seed,
                      "quantiles": list(SPECTRUM_QUANTILES),
                      "band": [[float(v) for v in row] for row in band]})
        print(f"band {d}x{d_h}", flush=True)
    out = {"definition": "rmtbase.scoring.score.null_spectrum_band: quantiles of the sorted "
                         "normalised null spectrum lambda / (rms_Q^2 rms_K^2 d^2)",
           "backend": jax.default_backend(), "jax_version": jax.__version__,
           "rmtbase_version": __version__,
           "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "bands": bands}
    (args.out / "spectrum_bands.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
