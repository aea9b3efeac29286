"""The commands and code blocks of README.md and docs/tour.md, read as a new user would run them
(issue 37): shared by the quick parse test (tests/test_readme.py) and the tour test that runs
them (tests/test_tour.py).

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
