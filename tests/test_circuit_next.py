"""A score with composition or probe data points to the circuit searches its model can run,
with their commands (rmtbase.report.circuit_next): both searches for a causal LM of a
supported family (pre-norm, post-norm, OPT, Bloom, Granite alike), none for an encoder. That a score's summary.txt and
report.html carry the block, and a plain score's do not: tests/test_composition_report.py."""

from __future__ import annotations

import pytest

from rmtbase.report.circuit_next import HEADING, next_lines


@pytest.mark.parametrize("arch, head_search, task_search", [
    ("gpt2", True, True), ("llama", True, True), ("gemma3_text", True, True),
    ("gemma2", True, True), ("granite", True, True), ("opt", True, True), ("bloom", True, True),
    ("mpnet", False, False), ("bert", False, False),
])
def test_the_commands_follow_what_each_search_runs(arch, head_search, task_search):
    from rmtbase.circuits.core.families import SUPPORTED

    assert (arch in SUPPORTED) == head_search == task_search
    text = "\n".join(next_lines({"model": "m", "architecture": arch}))
    assert text.startswith(HEADING)
    assert ("rmtbase circuits MODEL " in text) == head_search
    assert ("--task ioi" in text) == task_search
    if not head_search:
        assert "encoder" in text and "none" in text
