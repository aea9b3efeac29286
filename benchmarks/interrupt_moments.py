"""Ctrl-C during ``rmtbase circuits`` at random moments: how many tries end cleanly, and how late.

    python benchmarks/interrupt_moments.py [--tries 100] [--seed 0] [--workdir DIR]

A tiny random GPT-2 (3 layers of 4 heads, d 64, vocabulary 100, peaked attention) is searched
with ``rmtbase circuits MODEL --draws 100 --receivers <the 8 heads of layers 1-2> --mlp-paths
on``. A first run fills a cache; an uninterrupted run on it gives the timeline: the stages
between the stage lines on stderr (start-up, composition, the labels at each repeat length,
the path patching and writing, the exit after ``wrote``). Each try runs on a copy of that
cache and sends SIGINT to the run's process group (what a terminal's Ctrl-C does) at a moment
drawn from a seeded RNG, as (stage, seconds into it) so that load on the machine does not
shift it into another stage: even-numbered tries uniform within each stage in turn, odd ones
uniform over the whole run. A try is *clean* (:func:`verdict`): exit status 130, the line
``rmtbase: interrupted`` once, no traceback, no abort (``terminate called``, status 134), no
``.OUT.lock`` or ``.OUT.tmp-*`` beside the output, the output absent or complete (its
manifest's files there with their sizes and SHA-256), and exit within :data:`PROMPT` s of the
signal. Two endings without the line are clean too (:func:`ending`): ``finished`` (exit 0,
output complete: the signal came after the exit handlers, once the process had committed to
its exit; checked with a timestamp from the last exit handler: every signal before it gave
130), and ``killed at start`` (the default action of SIGINT before the interpreter runs:
nothing said or written; a shell reports 130). A run that ended before its moment is not a
try (the next moment is taken).

Printed: each try, the worst latency per stage, clean / tries, the worst and median
SIGINT-to-exit latency. Measured: docs/performance.md ("Interrupts")."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

#: Seconds from SIGINT to exit within which a try counts as prompt.
PROMPT = 5.0
#: Every head of layers 1 and 2: patched whatever the labels say, so every stage runs.
RECEIVERS = ",".join(f"L{li}H{h}" for li in (1, 2) for h in range(4))


#: The tiny GPT-2's sizes (``GPT2Config`` keywords).
SIZES = dict(n_layer=3, n_head=4, n_embd=64, vocab_size=100, n_positions=128)


def build_model(folder: Path, **sizes) -> Path:
    """The tiny random GPT-2 of the module docstring (built once; no network): seed 0,
    :data:`SIZES` updated by ``sizes``, every weight matrix but the embeddings ×8."""
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(**{**SIZES, **sizes}, bos_token_id=0, eos_token_id=0)
    net = GPT2LMHeadModel(cfg)
    with torch.no_grad():  # peaked attention: some heads labelled, so every stage runs
        for name, p in net.named_parameters():
            if p.ndim == 2 and "wte" not in name and "wpe" not in name:
                p.mul_(8.0)
    net.save_pretrained(folder)
    return folder


def circuits_command(model: Path, out: Path) -> list[str]:
    """The circuit search of the module docstring, into ``out``."""
    return [sys.executable, "-m", "rmtbase", "circuits", str(model), "--draws", "100",
            "--receivers", RECEIVERS, "--mlp-paths", "on", "--no-figures", "--out", str(out)]


def _env(cache: Path) -> dict:
    env = {**os.environ, "RMTBASE_CACHE": str(cache), "RMTBASE_PROGRESS_INTERVAL": "0.2",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("RMTBASE_FAULT", None)
    return env


class Run:
    """One run of ``command`` in its own session: stderr lines with their moments (s after
    start), exit status and moment; :meth:`interrupt` sends SIGINT to its process group."""

    def __init__(self, command: list[str], env: dict):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        self.marks: list[float] = []  # moments of the stage lines (is_mark)
        self.new_mark = threading.Condition()
        self.sent: float | None = None
        self.ended: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stderr:
            t = time.monotonic() - self.t0
            self.lines.append((t, raw.rstrip("\n")))
            if is_mark(raw):
                with self.new_mark:
                    self.marks.append(t)
                    self.new_mark.notify_all()
        self.proc.stderr.close()
        with self.new_mark:
            self.marks.append(float("inf"))  # the stream ended: no more marks
            self.new_mark.notify_all()

    def wait_mark(self, k: int) -> float | None:
        """The moment of stage line ``k`` (1-based; 0: the start), waiting for it; None when
        the run ended first."""
        if k == 0:
            return 0.0
        with self.new_mark:
            while len(self.marks) < k:
                self.new_mark.wait()
        t = self.marks[k - 1]
        return None if t == float("inf") else t

    def interrupt(self) -> bool:
        """SIGINT to the process group now; False when the process had already ended."""
        if self.proc.poll() is not None:
            return False
        self.sent = time.monotonic() - self.t0
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        return True

    def wait(self, timeout: float = 900.0) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait()
        self.ended = time.monotonic() - self.t0
        self._reader.join(10)
        return rc

    @property
    def stderr(self) -> str:
        return "\n".join(t for _, t in self.lines)


def is_mark(line: str) -> bool:
    """A stage line: ``rmtbase circuits: <stage>`` (not a progress count, nor a receiver's
    finding said as it is done) or ``wrote …``."""
    return ((line.startswith("rmtbase circuits:") and "%)" not in line
             and not line.startswith("rmtbase circuits: found "))
            or line.startswith("wrote "))


def stages(run: Run) -> list[tuple[str, int, float]]:
    """(name, first stage line, duration) of each stage of a finished run: ``start-up`` (line
    0: the start) until the first stage line, each stage (:func:`stage_name`) until the next,
    ``exit`` from ``wrote`` to the end; the stage lines are counted from 1."""
    marks = [(t, s) for t, s in run.lines if is_mark(s)]
    out, prev, name = [], 0.0, "start-up"
    for i, (t, s) in enumerate(marks + [(run.ended, None)]):
        if out and out[-1][0] == name:  # the labels at several lengths: one stage
            out[-1] = (name, out[-1][1], out[-1][2] + t - prev)
        else:
            out.append((name, i, t - prev))
        prev = t
        name = None if s is None else stage_name(s)
    return out


def stage_name(line: str) -> str:
    """The stage a stage line starts: composition, labels, path patching or exit."""
    if line.startswith("wrote "):
        return "exit"
    text = line.split(": ", 1)[1]
    for key, name in (("composition", "composition"), ("labels", "labels"),
                      ("receiver", "path patching"), ("output loss", "path patching")):
        if text.startswith(key) or key in text.split(";")[0]:
            return name
    return text[:40]


def timeline(model: Path, cache: Path, workdir: Path) -> list[tuple[str, int, float]]:
    """The stages of one uninterrupted run (checked to succeed) on a copy of ``cache``."""
    out = workdir / "timeline-out"
    shutil.rmtree(workdir / "timeline-cache", ignore_errors=True)
    shutil.copytree(cache, workdir / "timeline-cache")
    run = Run(circuits_command(model, out), _env(workdir / "timeline-cache"))
    rc = run.wait()
    if rc != 0:
        raise RuntimeError(f"the uninterrupted run failed ({rc}):\n{run.stderr[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return stages(run)


def moments(stage_list, n: int, rng: random.Random) -> list[tuple[int, float]]:
    """``n`` moments (stage index, seconds into it): even-numbered ones uniform within the
    stages in turn (every stage is hit), odd-numbered ones uniform over the whole run."""
    total = sum(d for _, _, d in stage_list)
    got = []
    for i in range(n):
        if i % 2 == 0:
            k = (i // 2) % len(stage_list)
            got.append((k, rng.uniform(0.0, stage_list[k][2])))
            continue
        t = rng.uniform(0.0, total)
        for k, (_, _, d) in enumerate(stage_list):
            if t < d or k == len(stage_list) - 1:
                got.append((k, min(t, d)))
                break
            t -= d
    return got


def _complete(out: Path) -> bool:
    """Whether ``out`` holds a finished output: its manifest's files, sizes and SHA-256."""
    try:
        man = json.loads((out / "manifest.json").read_text())
        for rel, meta in man["files"].items():
            data = (out / rel).read_bytes()
            if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
                return False
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    return True


def ending(rc: int, err: str, out: Path) -> str:
    """How a try ended: ``finished`` (exit 0, the output complete, no interrupt line: the
    signal came after the process had committed to its exit), ``killed at start`` (by the
    signal's default action, nothing said or written: before the interpreter had started), else
    ``interrupted``."""
    said = any(s.strip() == "rmtbase: interrupted" for s in err.splitlines())
    if rc == 0 and not said and _complete(out):
        return "finished"
    if rc == -signal.SIGINT and not err.strip() and not out.exists():
        return "killed at start"
    return "interrupted"


def verdict(rc: int, err: str, out: Path, latency: float | None) -> list[str]:
    """What was unclean about one interrupted try (empty: clean; module docstring)."""
    bad = []
    if ending(rc, err, out) == "interrupted":
        if rc != 130:
            bad.append(f"exit {rc}")
        n = sum(1 for s in err.splitlines() if s.strip() == "rmtbase: interrupted")
        if n != 1:
            bad.append(f"'rmtbase: interrupted' {n} times")
    for what in ("Traceback", "terminate called", "Error", "Exception"):
        if what in err:
            bad.append(what)
    left = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    if left:
        bad.append(f"left {left}")
    if out.exists() and not _complete(out):
        bad.append("incomplete output")
    if latency is None or latency > PROMPT:
        bad.append(f"exit {latency if latency is None else round(latency, 2)} s after SIGINT")
    return bad


def try_at(model: Path, cache: Path, workdir: Path, stage: tuple[str, int, float],
           into: float, index: int) -> dict | None:
    """One run on a copy of ``cache``, interrupted ``into`` s after ``stage`` (of
    :func:`stages`) began: {"stage", "at", "into", "latency", "rc", "unclean": [...], "tail"};
    None when the run ended first."""
    box = workdir / f"try-{index}"
    shutil.rmtree(box, ignore_errors=True)
    shutil.copytree(cache, box / "cache")
    out = box / "out"
    run = Run(circuits_command(model, out), _env(box / "cache"))
    start = run.wait_mark(stage[1])
    hit = False
    if start is not None:
        time.sleep(max(0.0, start + into - (time.monotonic() - run.t0)))
        hit = run.interrupt()
    rc = run.wait()
    if not hit:
        shutil.rmtree(box, ignore_errors=True)
        return None
    latency = run.ended - run.sent
    bad = verdict(rc, run.stderr, out, latency)
    got = {"stage": stage[0], "at": round(run.sent, 3), "into": round(into, 3),
           "latency": round(latency, 3), "rc": rc, "unclean": bad,
           "ending": ending(rc, run.stderr, out),
           "tail": run.stderr[-1500:] if bad else ""}
    if not bad:
        shutil.rmtree(box, ignore_errors=True)
    return got


def prepare(workdir: Path) -> tuple[Path, Path, list]:
    """(model, cache, stages): the tiny model, a cache that one uninterrupted run filled, and
    that first (cold) run's :func:`stages`."""
    model = build_model(workdir / "model")
    cache = Path(tempfile.mkdtemp(dir=workdir, prefix="cache-"))
    out = workdir / "first-out"
    run = Run(circuits_command(model, out), _env(cache))
    if run.wait() != 0:
        raise RuntimeError(f"the first run failed:\n{run.stderr[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return model, cache, stages(run)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args(argv)
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="rmtbase-interrupts-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model, cache, _ = prepare(workdir)
    st = timeline(model, cache, workdir)
    print(f"timeline: {sum(d for _, _, d in st):.1f} s uninterrupted (warm cache), stages:")
    for name, _, d in st:
        print(f"  {d:6.2f} s  {name}")
    results = []
    for i, (k, into) in enumerate(moments(st, 3 * a.tries, random.Random(a.seed))):
        if len(results) == a.tries:
            break
        got = try_at(model, cache, workdir, st[k], into, i)
        if got is None:  # the run had ended: not a try
            continue
        results.append(got)
        mark = (f"clean ({got['ending']})" if not got["unclean"]
                else "UNCLEAN: " + "; ".join(got["unclean"]))
        print(f"try {len(results):3d}: SIGINT {got['into']:5.2f} s into {got['stage']!r} "
              f"({got['at']:.2f} s): exit {got['rc']} after {got['latency']:.2f} s: {mark}",
              flush=True)
        if got["unclean"]:
            print("    " + got["tail"].replace("\n", "\n    "))
    lat = sorted(r["latency"] for r in results)
    clean = sum(not r["unclean"] for r in results)
    by = {}
    for r in results:
        by.setdefault(r["stage"], []).append(r["latency"])
    print("worst latency by stage: " + "; ".join(f"{k!r} {max(v):.2f} s ({len(v)})"
                                                  for k, v in by.items()))
    ends = {}
    for r in results:
        ends[r["ending"]] = ends.get(r["ending"], 0) + 1
    print(f"clean: {clean} of {len(results)} ({', '.join(f'{v} {k}' for k, v in ends.items())}); "
          f"SIGINT-to-exit latency worst {lat[-1]:.2f} s, median {lat[len(lat) // 2]:.2f} s")
    return 0 if clean == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
