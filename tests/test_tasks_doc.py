"""docs/tasks.md's Python example runs as written: a task from a list of dicts,
``find_task_circuit``, ``evaluate`` and ``write_outputs`` with the report, on a random-weight
GPT-2 built from a transformers config in ``./my-model`` (no network)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tasks.md"


def _block() -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_api_example_runs_and_writes_every_output(tmp_path, monkeypatch, capsys):
    from _checkpoints import gpt2

    block = _block()
    for name in ("find_task_circuit", "evaluate", "write_outputs", "tokenise", "import"):
        assert name in block, name
    gpt2(tmp_path / "my-model", seed=3)
    monkeypatch.chdir(tmp_path)
    env: dict = {}
    exec(compile(block, str(PAGE), "exec"), env)  # noqa: S102 - the page's own code
    res, check, written = env["res"], env["check"], env["written"]
    assert check["edges"] == res["circuit"]["edges"] == int(res["kept"].sum())
    out = tmp_path / "my-induction-circuit"
    names = {str(Path(p).relative_to(out)) if Path(p).is_absolute() else str(p)
             for p in written}
    for f in ("circuit.json", "circuit.dot", "circuit.graphml", "curve.csv", "summary.json",
              "report.html", "figures/circuit.png", "figures/faithfulness.png"):
        assert (out / f).is_file() and (out / f).stat().st_size > 0, f
        assert any(n.endswith(f) for n in names), (f, names)
    printed = capsys.readouterr().out
    assert "report.html" in printed
