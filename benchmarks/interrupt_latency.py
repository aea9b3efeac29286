"""SIGINT-to-exit latency in every stage of ``rmtbase score MODEL --composition --probe``.

    python benchmarks/interrupt_latency.py [--model DIR] [--workdir DIR] [--seed 0]

The model is the random Gemma-3-270M-shaped folder of ``benchmarks/composition_gemma_shape.py``
(d 640, d_h 256, 18 layers; built there if ``--model`` is not given): its long JAX calls (the
null table's draws, the profile null, the composition and QK-overlap null draws) are the
largest of any model the tests reach. A first, cold run (new, empty ``RMTBASE_CACHE``) gives the
timeline: each stage from its first line on stderr (:data:`STAGES`) to the next stage's. For
each stage a try starts from the cache as it was when that stage began (the first run's cache
less every file written after that moment, the compiled programs kept), waits for the stage's
first line, sleeps a moment uniform within the stage (at most :data:`WITHIN` s; seeded RNG),
sends SIGINT to the process group (a terminal's Ctrl-C) and measures the seconds to exit. A try
is clean as in ``benchmarks/interrupt_moments.py`` (:func:`verdict`), its latency at most 5 s.

Printed: the timeline, then per stage the latency, the exit status and what was unclean.
Measured: docs/performance.md ("Interrupts").
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent

#: (stage, words of the stderr line that starts it), in the order a run reaches them.
STAGES = (("null table draws", "generating the null table"),
          ("profile null", "drawing the profile null"),
          ("composition", "composition: every cross-layer"),
          ("composition null", "drawing the composition null"),
          ("QK-overlap null", "QK-overlap"),
          ("text probe", "probe"),
          ("circuit search", "circuits:"),
          ("exit", "wrote "))
#: The longest wait within a stage before the SIGINT (s).
WITHIN = 30.0


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


moments = _load("interrupt_moments")
verdict = moments.verdict


def score_command(model: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "rmtbase", "score", str(model), "--composition", "--probe",
            "--no-figures", "--out", str(out)]


def _env(cache: Path) -> dict:
    env = moments._env(cache)
    env["HF_HUB_OFFLINE"] = "1"
    env["RMTBASE_PROGRESS_INTERVAL"] = "5"
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return env


def stage_of(line: str) -> str | None:
    """The stage a stderr line starts (:data:`STAGES`), None for any other line."""
    if "still working" in line or "warning" in line:
        return None
    if line.startswith("wrote "):
        return "exit"
    if not line.startswith("rmtbase"):
        return None
    for name, words in STAGES:
        if words in line:
            return name
    return None


def timeline(run) -> list[tuple[str, float, float]]:
    """(stage, start, end) in s after the start: each stage from its first line to the next
    stage's first line (the last to the exit)."""
    first = {}
    for t, s in run.lines:
        name = stage_of(s)
        if name is not None and name not in first:
            first[name] = t
    order = sorted(first.items(), key=lambda kv: kv[1])
    ends = [t for _, t in order[1:]] + [run.ended]
    return [(name, t, e) for (name, t), e in zip(order, ends, strict=True)]


def cache_at(full: Path, since_epoch: float, dest: Path) -> None:
    """``full`` (a cache) as it was at ``since_epoch``: files written later left out, the
    compiled programs (``jax/``) kept."""
    shutil.copytree(full, dest)
    for p in sorted(dest.rglob("*")):
        if p.is_file() and "jax" not in p.relative_to(dest).parts \
                and p.stat().st_mtime > since_epoch:
            p.unlink()


def try_stage(model: Path, full: Path, start_epoch: float, stage, workdir: Path,
              rng: random.Random, within: float = WITHIN) -> dict:
    """One run from the cache as it was when ``stage`` began, interrupted within it."""
    name, t0, t1 = stage
    box = workdir / f"try-{name.replace(' ', '-')}"
    shutil.rmtree(box, ignore_errors=True)
    box.mkdir()
    cache_at(full, start_epoch + t0 - 0.5, box / "cache")
    out = box / "out"
    run = moments.Run(score_command(model, out), _env(box / "cache"))
    into = rng.uniform(0.0, min(t1 - t0, within))
    seen = None
    while seen is None and run.proc.poll() is None:
        seen = next((t for t, s in list(run.lines) if stage_of(s) == name), None)
        time.sleep(0.02)
    hit = False
    if seen is not None:
        time.sleep(max(0.0, seen + into - (time.monotonic() - run.t0)))
        hit = run.interrupt()
    rc = run.wait(1800)
    if not hit:
        return {"stage": name, "missed": True, "rc": rc, "tail": run.stderr[-800:]}
    latency = run.ended - run.sent
    bad = verdict(rc, run.stderr, out, latency)
    return {"stage": name, "into": into, "at": run.sent, "latency": latency, "rc": rc,
            "unclean": bad, "tail": run.stderr[-1500:] if bad else ""}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stages", default=None, help="comma-separated stages (default: all)")
    ap.add_argument("--tries", type=int, default=1, help="tries per stage (default 1)")
    ap.add_argument("--within", type=float, default=WITHIN,
                    help=f"the longest wait within a stage, s (default {WITHIN:g})")
    a = ap.parse_args(argv)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="rmtbase-interrupt-latency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = a.model or _load("composition_gemma_shape").gemma(workdir / "gemma3-shape-18")
    full = workdir / "cache-full"
    start_file = workdir / "timeline.txt"
    if not start_file.is_file():  # the cold run (kept: a rerun reuses it)
        shutil.rmtree(full, ignore_errors=True)
        full.mkdir()
        epoch = time.time()
        run = moments.Run(score_command(model, workdir / "out-cold"), _env(full))
        if run.wait(7200) != 0:
            raise SystemExit(f"the cold run failed:\n{run.stderr[-3000:]}")
        shutil.rmtree(workdir / "out-cold", ignore_errors=True)
        st = timeline(run)
        start_file.write_text(f"{epoch!r}\n" + "".join(f"{n}\t{s!r}\t{e!r}\n" for n, s, e in st))
        (workdir / "cold-stderr.txt").write_text("".join(f"{t:.2f}\t{x}\n" for t, x in run.lines))
    lines = start_file.read_text().splitlines()
    epoch = float(lines[0])
    st = [(n, float(s), float(e)) for n, s, e in (x.split("\t") for x in lines[1:])]
    print(f"cold run: {st[-1][2]:.0f} s wall; stages (s after the start):")
    for n, s, e in st:
        print(f"  {s:7.1f}-{e:7.1f}  {n}")
    rng = random.Random(a.seed)
    want = set(a.stages.split(",")) if a.stages else None
    worst = 0.0
    for stage in (s for s in st for _ in range(a.tries)):
        into_rng = random.Random(rng.random())
        if want and stage[0] not in want:
            continue
        got = try_stage(model, full, epoch, stage, workdir, into_rng, a.within)
        if got.get("missed"):
            print(f"{stage[0]:>18}: missed (the run ended first, exit {got['rc']})")
            continue
        worst = max(worst, got["latency"])
        mark = "clean" if not got["unclean"] else "UNCLEAN: " + "; ".join(got["unclean"])
        print(f"{stage[0]:>18}: SIGINT {got['into']:5.1f} s into the stage: exit {got['rc']} "
              f"after {got['latency']:.2f} s: {mark}", flush=True)
        if got["unclean"]:
            print("    " + got["tail"].replace("\n", "\n    "))
    print(f"worst SIGINT-to-exit latency {worst:.2f} s (target <= 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
