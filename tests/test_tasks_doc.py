"""docs/tasks.md's Python example runs as written: a task from a list of dicts,
``find_task_circuit``, ``evaluate`` and ``write_outputs`` with the report, on a GPT-2 built
from a transformers config in ``./my-model`` (no network) whose weights copy the context's
tokens into the logits, so that it does the example's induction task."""

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
    block = _block()
    for name in ("find_task_circuit", "evaluate", "write_outputs", "tokenise", "import"):
        assert name in block, name
    _copying_gpt2(tmp_path / "my-model")
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


def _copying_gpt2(folder, d=128, vocab=50):
    """A one-layer GPT-2 that prefers the tokens its prompt holds: uniform attention (zero
    query and key), value and output the identity times 10, no MLP, no position embedding,
    orthogonal zero-mean token embeddings tied to the unembedding. The last position's logit
    of a token then grows with that token's share of the context: the example's answer
    ``A[5]`` is in the clean prompt and not in the corrupted one, its wrong token ``B[5]`` the
    other way round."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=d, n_head=4, n_layer=1, vocab_size=vocab, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    net = tf.GPT2LMHeadModel(cfg)
    block = net.transformer.h[0]
    with torch.no_grad():
        g = torch.randn(vocab, d)
        q, _ = torch.linalg.qr((g - g.mean(1, keepdim=True)).T)  # (d, vocab), columns zero-mean
        net.transformer.wte.weight.copy_(q.T)
        net.transformer.wpe.weight.zero_()
        block.attn.c_attn.weight.zero_()
        block.attn.c_attn.bias.zero_()
        block.attn.c_attn.weight[:, 2 * d:] = torch.eye(d)
        block.attn.c_proj.weight.copy_(10 * torch.eye(d))
        block.attn.c_proj.bias.zero_()
        for lin in (block.mlp.c_fc, block.mlp.c_proj):
            lin.weight.zero_()
            lin.bias.zero_()
    net.save_pretrained(folder)
    return folder
