"""Every line the screen and ``summary.txt`` write is at most 200 characters
(rmtbase.report.line_width): a list too long for a line cut to ``+N more`` and where all of it
is, longer prose wrapped without losing a word. Here: the helpers against their definitions, a
synthetic search large enough to need every cut, and ``rmtbase circuits`` in both modes on a
tiny random model. The trained models (SmolLM2, MiniLM,
the zoo) are in tests/test_line_width_models.py (slow) and the tour (tests/test_tour.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from test_circuit_lines import _row

from rmtbase.report.circuit_lines import found_lines
from rmtbase.report.line_width import MAX_LINE, fit_text, listed, wrap_line

WORDS = [f"item{i:03d} " + "x" * (i % 17) for i in range(90)]


def long_lines(text: str, limit: int = MAX_LINE) -> list[str]:
    """The lines of ``text`` longer than ``limit`` characters (shared with the slow tests)."""
    return [t for t in text.splitlines() if len(t) > limit]


def test_listed_keeps_what_fits_and_counts_the_rest():
    """The first items that fit in ``width`` (the most that do: one more would not), then
    ``+N more (where)``; N + shown = all; a list that fits is joined whole; one item too long
    for the line is still shown (something is named)."""
    for width in (60, 120, 198):
        line = listed("head: ", WORDS, where="all in f.txt", width=width)
        shown = line.removeprefix("head: ").split(" +", 1)[0].split("; ")
        n_more = int(re.search(r" \+(\d+) more \(all in f\.txt\)$", line).group(1))
        assert len(line) <= width and shown == WORDS[:len(shown)]
        assert len(shown) + n_more == len(WORDS)
        one_more = "head: " + "; ".join(WORDS[:len(shown) + 1]) + \
            f" +{n_more - 1} more (all in f.txt)"
        assert len(one_more) > width
    assert listed("h: ", WORDS[:3]) == "h: " + "; ".join(WORDS[:3])
    assert listed("h: ", ["y" * 300, "z"], width=50).startswith("h: " + "y" * 300 + " +1 more")


def test_a_wrapped_line_loses_no_word_and_keeps_its_indent():
    line = "  " + " ".join(WORDS)
    rows = wrap_line(line)
    assert all(len(r) <= MAX_LINE for r in rows) and len(rows) > 1
    assert rows[0].startswith("  item000") and all(r.startswith("      ") for r in rows[1:])
    assert " ".join(r.strip() for r in rows) == line.strip()
    assert wrap_line("short") == ["short"]
    assert max(map(len, wrap_line("a" * 450))) <= MAX_LINE  # one word longer than a row
    text = "x\n" + line + "\n\nlast\n"
    fitted = fit_text(text)
    assert fitted.endswith("last\n") and fitted.startswith("x\n  item000")
    assert " ".join(fitted.split()) == " ".join(text.split())


def test_a_long_stage_line_is_wrapped():
    """A stage line (rmtbase.progress.stage) over 200 characters: rows within 200, every word
    kept, the rows after the first indented."""
    import io

    from rmtbase.progress import stage

    buf = io.StringIO()
    stage("rmtbase circuits", " ".join(WORDS), stream=buf)
    rows = buf.getvalue().splitlines()
    assert len(rows) > 1 and max(map(len, rows)) <= MAX_LINE
    assert all(r.startswith("  ") for r in rows[1:])
    assert " ".join(buf.getvalue().split()) == "rmtbase circuits: " + " ".join(" ".join(
        WORDS).split())


def _search_rows(n_receivers=40):
    """Rows of a large search: every receiver with a confirmed K source, 12 rows depending on
    zero ablation only, 3 on the counterfactual; redundant V; every fourth receiver with nothing
    confirmed; 30 unlabelled receivers with a dependency."""
    rows = []
    for i in range(n_receivers):
        to = f"L{10 + i // 8}H{i % 8}"
        if i % 4:
            rows.append(_row("k", "L1H0", to, 0.3 + i / 1000))
        rows += [_row("v", f"L{2 + j % 7}H{j}", to, 0.1, confirmed=False, depends="zero",
                      effect_zero=0.2, effect_mean=0.05, metric="output_change")
                 for j in range(12)]
        rows += [_row("q", f"L9H{j}", to, 0.05, confirmed=False, depends="counterfactual",
                      effect_zero=0.01, effect_resample=-0.03, effect_mean=0.05)
                 for j in range(3)]
        rows.append(_row("v", "L3H3", to, 0.2, confirmed=False, redundant=True,
                         joint_effect=0.3, joint_se=0.01, metric="output_change"))
    rows += [_row("k", "L2H1", f"L{30 + i}H0", 0.2, confirmed=False, dependency=True,
                  label_to="none", metric="attention_tv") for i in range(30)]
    return rows


def test_a_large_search_writes_no_line_over_200_and_lists_every_item_once():
    """The found lines of a large search stay within 198 characters (two of indent in
    summary.txt); a cut list says where the rest is, and every item it leaves out is in
    summary.txt's lines by receiver; summary.txt has no line over 200 characters and every
    receiver's lines whole (wrapped, not cut)."""
    import xarray as xr

    from rmtbase.report.circuit_lines import EVERY, receiver_lines
    from rmtbase.report.circuits_report import summary_text

    rows = _search_rows()
    found = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    assert max(map(len, found)) <= MAX_LINE - 2
    cut = [t for t in found if t.endswith(f"more ({EVERY})")]
    assert {t.split(" (not confirmed)")[0].split(":")[0] for t in cut} >= {
        "depends on zero ablation only", "depends on the counterfactual",
        "no behaviour label (dependencies, not circuits)"}
    cds = xr.Dataset({"label": (("layer", "head"), np.full((3, 2), "none")),
                      "label_score": (("layer", "head"), np.zeros((3, 2)))},
                     attrs={"ablation": "mean"})
    text = summary_text({"found": found, "circuits": rows}, cds)
    assert not long_lines(text)
    flat = " ".join(text.split())
    by_to: dict = {}
    for r in rows:
        by_to.setdefault(r["to"], []).append(r)
    for mine in by_to.values():
        for t in receiver_lines(mine, ablation="mean"):
            assert " ".join(t.split()) in flat, t[:80]


def _gpt2(path, seed=0):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=40, n_positions=48,
                     bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return path


def test_the_circuit_searches_write_no_line_over_200_on_a_tiny_random_model(tmp_path, capsys):
    """``rmtbase circuits`` (head search and ``--task``) on a random 2-layer GPT-2 whose task
    file has a 230-character name: every line of stdout, stderr and summary.txt within 200
    characters; the head search's folder has report.html with the task search's sections
    (``rmtbase score``'s lines: tests/test_cli_score.py)."""
    pytest.importorskip("transformers")
    from rmtbase.circuits.task.taskfile import induction_task, write_task
    from rmtbase.cli import main

    model = _gpt2(tmp_path / "m")
    task = tmp_path / ("t" * 230 + ".jsonl")
    write_task(induction_task(4, 5, 40, seed=0), task)
    runs = {"head": ["circuits", model, "--draws", "200"],
            "task": ["circuits", model, "--task", task, "--top", "3", "--force"]}
    capsys.readouterr()
    for name, argv in runs.items():
        out = tmp_path / name
        assert main([str(a) for a in (*argv, "--out", out)]) == 0, name
        said = capsys.readouterr()
        for where, text in (("stdout", said.out), ("stderr", said.err),
                            ("summary.txt", (out / "summary.txt").read_text("utf-8"))):
            assert not long_lines(text), (name, where, long_lines(text)[:1])
    page = (tmp_path / "head" / "report.html").read_text("utf-8")
    task_page = (tmp_path / "task" / "report.html").read_text("utf-8")
    def sections(html):  # "The circuits' strongest edges" as "The circuit's strongest edges"
        return [h.replace("circuits'", "circuit's").replace("circuits", "circuit")
                for h in re.findall(r"<h2>([^<]+)</h2>", html)]

    assert sections(page) == sections(task_page) and len(sections(page)) == 4
    assert "<summary>summary.txt</summary>" in page and "output loss" in page
    assert json.loads((tmp_path / "head" / "manifest.json").read_text())
