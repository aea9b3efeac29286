"""The commands and code blocks of README.md and docs/tour.md, read as a new user would run them:
shared by the quick parse test (tests/test_readme.py) and the tour test that runs them
(tests/test_tour.py).

A page's steps are, in page order: every ``$ …`` line of a ``console`` block, every line of a
``bash`` block (a ``\\`` at the end of a line continues it) and every ``python`` block whole.
Prose and the output lines of console blocks are not steps.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "docs" / "tour.md")

FENCE = re.compile(r"^```([a-z]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Steps the tour test does not run, each with why (a pattern that matches no step is an error,
#: so this list cannot go stale). Everything else runs exactly as written.
NOT_RUN = {
    r"^\./scripts/demo\.sh": "sets up .venv from the package index; the test environment holds "
                             "what it installs (test_demo_installs_what_the_tour_uses)",
    r"^\./scripts/test\.sh": "runs the test suite this test is part of",
    r"^pip install ": "replaced by a check that what it installs is installed",
    r"^rmtbase score (gpt2|EleutherAI/)": "needs the Hugging Face hub (no network in tests)",
}



def _in(folder: str, *files: str) -> tuple[str, ...]:
    return tuple(f"{folder}/{f}" for f in files)


#: The files of a score folder, a collection's, ``--components``' additions, a
#: task's circuit folder and a probe's.
SCORE = ("manifest.json", "report.html", "scores.nc", "heads.csv", "scores.csv", "summary.txt",
         "figures/verdict.png", "figures/effect_*.png", "figures/spectrum_L*_H*.png")
COLLECTION = ("manifest.json", "report.html", "scores.nc", "heads.csv", "scores.csv",
              "summary.txt", "figures/trajectory_*.png", "figures/trajectory_flags.png",
              "figures/verdict_grid.png")
COMPONENTS = ("components.nc", "components.csv", "figures/components_weibull_k.png",
              "figures/components_terminal_k.png")
TASK = ("manifest.json", "report.html", "circuit.json", "summary.json", "summary.txt",
        "curve.csv",
        "circuit.dot", "circuit.graphml", "figures/circuit.png", "figures/faithfulness.png")
PROBE = ("manifest.json", "probe.nc", "probe.csv", "probe.png")

#: What each step that runs writes, by a pattern of its code (a step matches exactly one;
#: ``tests/test_readme.py`` checks both ways): paths under the page's folder, or ``$CACHE/``
#: the user cache, each a glob that must match a file the step wrote. The tour test opens
#: every file a step writes (``tests/_outputs.py``); this says which may not be missing.
WRITES: dict[str, tuple[str, ...]] = {
    r"^import rmtbase\nds = rmtbase\.score_model": _in("out/minilm-py", *SCORE),
    r"--out delta-check": _in("delta-check", *SCORE),
    r"--composition --probe --out smol-score$": _in(
        "smol-score", *SCORE, "composition.nc", "circuits.nc", "figures/composition.png"),
    r"circuits \S+ --out smol-circuits$": _in(
        "smol-circuits", "manifest.json", "summary.txt", "circuits.nc", "composition.nc",
        "figures/circuits.png"),
    r"--task ioi --out smol-ioi$": _in("smol-ioi", *TASK),
    r"^import json\ncapitals = ": ("capitals.jsonl",),
    r"--task capitals\.jsonl --out smol-capitals$": _in("smol-capitals", *TASK),
    r"--evaluate smol-capitals/circuit\.json > capitals-eval\.json$": ("capitals-eval.json",),
    r"^rmtbase constants --digits 20$": (),
    r"^rmtbase constants --digits 50 --json": (),
    r"^rmtbase spectrum ": (),
    r"^rmtbase elementwise ": (),
    r"--out t\.nc": ("t.nc",),
    r"--summary t\.nc": (),
    r"--out grid\.nc": ("grid.nc",),
    r"--into-cache": (),  # the shipped tables and profile nulls cover it: nothing new
    r"^import rmtbase\nds = rmtbase\.baseline\(": (),
    r"^rmtbase score +# embedded default": _in("rmtbase-score/all-MiniLM-L6-v2", *SCORE),
    r"--out my-model-perm": _in("my-model-perm", *SCORE),
    r"--out minilm-json > minilm\.json": (*_in("minilm-json", *SCORE), "minilm.json"),
    r"--out ci-check": _in("ci-check", *SCORE),
    r"--out my-json \|": _in("my-json", *SCORE),
    r"--out minilm-components": _in("minilm-components", *SCORE, *COMPONENTS),
    r"^rmtbase score \./llama --components": _in("rmtbase-score/llama", *SCORE, *COMPONENTS),
    r"^rmtbase score ckpts/step\* --components": (
        *_in("rmtbase-score/step0+step1", *COLLECTION, "components.nc", "components.csv",
             "figures/components_k_trajectory.png"), "rmtbase-score/step0+step1.entries/*.nc"),
    r"--out traj ": (*_in("traj", *COLLECTION), "traj.entries/step0.nc", "traj.entries/step1.nc"),
    r"--out cmp": _in("cmp", "manifest.json", "flags.csv", "profiles.csv", "summary.txt",
                      "report.html", "figures/profiles.png"),
    r"--out probe-minilm": _in("probe-minilm", *PROBE),
    r"--out probe-mine": _in("probe-mine", *PROBE),
    r"--out probe-smol": _in("probe-smol", *PROBE),
    r"--probe --out scores-probe": _in("scores-probe", *SCORE),
    r"^from rmtbase\.models import load_heads": (),
}


def writes(step: Step) -> tuple[str, ...] | None:
    """The paths ``WRITES`` names for ``step`` (None: no entry, or more than one)."""
    found = [files for pattern, files in WRITES.items() if re.search(pattern, step.code)]
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class Step:
    page: str       # README.md or docs/tour.md
    line: int       # 1-based line of the page
    lang: str       # "sh" or "python"
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def not_run(self) -> str | None:
        for pattern, why in NOT_RUN.items():
            if re.search(pattern, self.code):
                return why
        return None


def steps(page: Path) -> list[Step]:
    text = page.read_text()
    name = str(page.relative_to(ROOT))
    out: list[Step] = []
    for m in FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        first = text.count("\n", 0, m.start(2)) + 1
        if lang == "python":
            out.append(Step(name, first, "python", body))
            continue
        if lang not in ("console", "bash"):
            continue
        pending, start = "", 0
        for i, line in enumerate(body.splitlines()):
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not pending:
                start = first + i
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            code = (pending + line).strip()
            pending = ""
            if code and not code.startswith("#"):
                out.append(Step(name, start, "sh", code))
    return out


def rmtbase_argvs(code: str, env: dict[str, str] | None = None) -> list[list[str]]:
    """The argument lists of every ``rmtbase`` call in a shell line (after ``&&``, ``||``,
    ``;``, pipes; a comment and redirections dropped; ``$VAR`` from ``env``)."""
    env = env or {}
    lex = shlex.shlex(code, posix=True, punctuation_chars=";&|<>")
    lex.whitespace_split = True
    lex.commenters = "#"
    words = list(lex)
    out, cur = [], []
    for w in [*words, ";"]:
        if w and set(w) <= set(";&|<>"):
            if cur:
                out.append(cur)
            cur = [] if not w.startswith(">") else None
            continue
        if cur is None:  # the target of a redirection
            cur = []
            continue
        cur.append(re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), w))
    return [a[1:] for a in out if a and Path(a[0]).name == "rmtbase"]


#: Where each output a step claims to write goes: ``--out X``, ``> file``, ``-> path``.
OUT = re.compile(r"--out[ =](\S+)")
REDIRECT = re.compile(r"(?<![0-9&])>\s*(\S+)")
ARROW = re.compile(r"->\s*(\S+?)/?(?:\s|$)")


def claimed_outputs(code: str) -> list[str]:
    """The files and folders a shell line says it writes."""
    command, _, comment = code.partition(" #")
    found = [m.group(1) for m in OUT.finditer(command)]
    found += [m.group(1) for m in REDIRECT.finditer(command)]
    found += [m.group(1) for m in ARROW.finditer(comment) if "/" in m.group(1)]
    return [f.strip("'\"") for f in found]


#: The README's quoted circuit lines: the ``text`` block after the paragraph that opens
#: "A circuit:".
README_CIRCUIT = re.compile(r"^A circuit:.*?^```text\n(.*?)^```", re.MULTILINE | re.DOTALL)


def readme_circuit_lines(text: str | None = None) -> list[str]:
    """The circuit lines the README quotes (its block after "A circuit:")."""
    text = (ROOT / "README.md").read_text() if text is None else text
    m = README_CIRCUIT.search(text)
    return m.group(1).splitlines() if m else []


def found_lines_of(summary: str) -> list[str]:
    """The found lines of a circuits ``summary.txt``: the rows under its first heading, up to
    the first blank line, without their two-space indent (a wrapped row's continuation, indented
    further, joined to its line)."""
    out: list[str] = []
    for row in summary.split("\n\n", 1)[0].splitlines()[1:]:
        if row.startswith("   ") and out:
            out[-1] += " " + row.strip()
        else:
            out.append(row.removeprefix("  "))
    return out


def demo_circuits_script(out: str) -> str:
    """The lines of ``scripts/demo.sh`` that find SmolLM2's circuits, as a bash script with the
    environment's ``python`` and ``rmtbase`` for ``.venv/bin/…`` and ``out`` as the folder."""
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    smol = re.search(r"^smol=.*$", demo, re.MULTILINE).group(0)
    run = re.search(r"^\S*rmtbase circuits .*$", demo, re.MULTILINE).group(0)
    return "\n".join(["set -euo pipefail", smol.replace(".venv/bin/", ""),
                      f"circuits={shlex.quote(out)}", run.replace(".venv/bin/", "")])
