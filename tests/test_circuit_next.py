"""A score with composition or probe data points to the circuit searches its model can run,
with their commands (rmtbase.report.circuit_next): both searches for a pre-norm causal LM, the
head search alone for a post-norm one, none for an encoder; in summary.txt and report.html."""

from __future__ import annotations

import pytest

from rmtbase.report.circuit_next import HEADING, next_lines


@pytest.mark.parametrize("arch, head_search, task_search", [
    ("gpt2", True, True), ("llama", True, True), ("gemma3_text", True, False),
    ("gemma2", True, False), ("mpnet", False, False), ("bert", False, False),
])
def test_the_commands_follow_what_each_search_runs(arch, head_search, task_search):
    from rmtbase.circuits.families import SUPPORTED
    from rmtbase.circuits.task.forward import FAMILIES

    assert (arch in SUPPORTED, arch in FAMILIES) == (head_search, task_search)
    text = "\n".join(next_lines({"model": "m", "architecture": arch}))
    assert text.startswith(HEADING)
    assert ("rmtbase circuits MODEL " in text) == head_search
    assert ("--task ioi" in text) == task_search
    if not head_search:
        assert "encoder" in text and "none" in text


def test_score_with_composition_says_them_and_a_plain_score_does_not(tmp_path, capsys):
    pytest.importorskip("torch")
    from _checkpoints import gpt2

    from rmtbase.cli import main

    m = gpt2(tmp_path / "g", seed=4)
    out, plain = tmp_path / "out", tmp_path / "plain"
    assert main(["score", str(m), "--composition", "--draws", "200", "--stats", "spectral",
                 "--out", str(out), "--quiet", "--no-figures"]) == 0
    assert main(["score", str(m), "--stats", "spectral", "--out", str(plain), "--quiet",
                 "--no-figures"]) == 0
    capsys.readouterr()
    summary = (out / "summary.txt").read_text()
    block = summary[summary.index(HEADING):]
    for cmd in ("rmtbase circuits MODEL ", "rmtbase circuits MODEL --task ioi",
                "rmtbase circuits MODEL --task FILE"):
        assert cmd in block, block
    assert "(g)" in block.splitlines()[0]  # the model as the score names it
    page = (out / "report.html").read_text()
    assert page.count('<section id="circuits-next">') == 1
    assert "rmtbase circuits MODEL --task ioi" in page
    assert HEADING not in (plain / "summary.txt").read_text()
    assert 'id="circuits-next"' not in (plain / "report.html").read_text()
