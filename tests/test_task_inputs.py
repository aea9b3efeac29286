"""What a task circuit accepts (rmtbase.circuits.task): task files, circuit files, the
composition attached to the edges, ``induction_task``'s arguments, the JSON it prints.

- every malformed task or circuit file is one InputError line, before the model is read, and
  a task whose metric cannot move (answer = wrong, clean = corrupted, by text or by id) is
  refused naming the pair;
- a task over MAX_TASK_TOKENS token positions is refused with its size stated;
- a composition of another model of the same shape is refused by the heads' norms;
- ``--evaluate``'s JSON names its metric and is strict JSON;
- property tests (hypothesis, derandomised, few examples): ``induction_task``, the task-file
  reader and the circuit-file reader either return a well-formed result or raise InputError,
  never another exception."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmtbase.circuits.task.taskfile import induction_task, read_records, tokenise
from rmtbase.errors import InputError

PROPS = settings(derandomize=True, max_examples=40, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])
LINE = {"clean": [0, 1, 2], "corrupted": [0, 3, 2], "answer": 4, "wrong": 5}


def _file(tmp_path, *lines, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return p


class _Tok:
    """A word tokenizer: known words their ids, any other word the unknown id 9; blank text no
    tokens."""

    WORDS = {"a": 1, "b": 2, "c": 3, "x": 4, "y": 5}

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.WORDS.get(w, 9) for w in text.split()]}


# task files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("change, match", [
    ({"wrong": 4}, "answer and wrong are the same token"),
    ({"answer": "x", "wrong": "x"}, "answer and wrong are the same token"),
    ({"corrupted": [0, 1, 2]}, "clean and corrupted are the same prompt"),
    ({"clean": "a b", "corrupted": "a b"}, "clean and corrupted are the same prompt"),
    ({"answer": 2**64}, "answer must be a token's text or an id"),
    ({"clean": [0, 2**64, 1]}, "clean must be a text or a non-empty list"),
    ({"answer": 4.0}, "answer must be a token's text or an id"),
])
def test_a_bad_task_line_is_refused_naming_it(tmp_path, change, match):
    p = _file(tmp_path, LINE, {**LINE, **change})
    with pytest.raises(InputError, match=f"line 2: {match}"):
        read_records(p)


def test_one_pair_repeated_is_refused_before_the_model(tmp_path):
    with pytest.raises(InputError, match="t.jsonl: 3 prompt pairs, 1 distinct; a task needs "
                                         "at least 2 distinct pairs"):
        read_records(_file(tmp_path, LINE, LINE, LINE))


def test_huge_integers_and_deep_nesting_are_one_line(tmp_path):
    """A 5,000-digit integer and JSON nested 100,000 deep: InputError, not ValueError or
    RecursionError."""
    p = _file(tmp_path, '{"clean": [0, 1], "corrupted": [0, 2], "answer": ' + "7" * 5000
              + ', "wrong": 1}')
    with pytest.raises(InputError, match="line 1: not a task line"):
        read_records(p)
    p = _file(tmp_path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="line 1: not"):
        read_records(p)


def test_tokenising_to_the_same_id_or_to_nothing_is_refused():
    """Two words the tokenizer maps to one unknown id, texts that become the same ids, and a
    prompt of no tokens are refused naming the pair; so is a task of one pair repeated."""
    ok = {"clean": "a b", "corrupted": "c b", "answer": "x", "wrong": "y"}
    tokenise([ok, {**ok, "answer": "y", "wrong": "x"}], _Tok())
    with pytest.raises(InputError, match="task: 3 prompt pairs, 1 distinct; a task needs at "
                                         "least 2 distinct pairs"):
        tokenise([ok] * 3, _Tok())  # the same pair repeated: no standard error
    for change, match in [({"answer": "foo", "wrong": "bar"}, "answer and wrong are the same"),
                          ({"clean": "foo b", "corrupted": "bar b"}, "clean and corrupted are"),
                          ({"clean": " ", "corrupted": " "}, "clean ' ' is no tokens")]:
        with pytest.raises(InputError, match=f"pair 2 .*{match}|pair 2: {match}"):
            tokenise([ok, {**ok, **change}], _Tok())


def test_a_task_too_large_is_refused_with_its_size(tmp_path, monkeypatch):
    """Pairs x tokens over MAX_TASK_TOKENS is refused before the model, the size stated; text
    prompts count one token at least before tokenising, their tokens after."""
    from rmtbase.circuits.task import taskfile

    monkeypatch.setattr(taskfile, "MAX_TASK_TOKENS", 10)
    p = _file(tmp_path, *[LINE] * 4)  # 4 pairs x 3 tokens
    with pytest.raises(InputError, match="4 prompt pairs x 3 tokens = 12 token positions; a "
                                         "task takes at most 10"):
        read_records(p)
    recs = [{"clean": "a b c", "corrupted": w, "answer": "x", "wrong": "y"}
            for w in ("a b x", "a b y", "a c x", "a c y")]
    read_records(_file(tmp_path, *recs))  # 4 pairs x at least 1 token: not known to be over
    with pytest.raises(InputError, match="4 prompt pairs x 3 tokens"):
        tokenise(recs, _Tok())
    with pytest.raises(InputError, match="induction_task: 2 prompt pairs x 8 tokens"):
        induction_task(2, 4, 16, seed=0)


# induction_task -----------------------------------------------------------------------------

@pytest.mark.parametrize("kw, match", [
    ({"n": 0}, "n must be at least 1"), ({"n": 10**30}, "n must be at most"),
    ({"n": 2.0}, "n must be an integer"), ({"n": True}, "n must be an integer"),
    ({"half": 1}, "half must be at least 2"), ({"half": "8"}, "half must be an integer"),
    ({"vocab": 2}, "vocab must be at least 3"), ({"vocab": 10**12}, "vocab must be at most"),
    ({"seed": -1}, "seed must be an integer in"), ({"seed": None}, "seed must be an integer"),
    ({"prefix": 8}, "1 <= prefix < half"), ({"prefix": 0}, "prefix must be at least 1"),
    ({"bos": 32}, "bos must be at most 31"), ({"low": -1}, "low must be at least 0"),
    ({"half": 40}, "half \\+ 1 distinct"),
    ({"n": 10**6, "vocab": 10**6, "half": 2}, "ids to permute"),
])
def test_induction_task_checks_its_arguments(kw, match):
    args = {"n": 4, "half": 8, "vocab": 32, "seed": 0, **kw}
    with pytest.raises(InputError, match=match):
        induction_task(args.pop("n"), args.pop("half"), args.pop("vocab"), **args)


@PROPS
@given(n=st.integers(-3, 12), half=st.integers(-2, 12), vocab=st.integers(-2, 40),
       seed=st.integers(-2, 2**33), prefix=st.one_of(st.none(), st.integers(-2, 12)),
       bos=st.one_of(st.none(), st.integers(-2, 45)), low=st.integers(-2, 6))
def test_induction_task_is_a_task_or_one_input_error(n, half, vocab, seed, prefix, bos, low):
    try:
        t = induction_task(n, half, vocab, seed=seed, prefix=prefix, bos=bos, low=low)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    k = half - 1 if prefix is None else prefix
    assert t.clean.shape == t.corrupted.shape == (n, (bos is not None) + half + k)
    assert t.answer.shape == t.wrong.shape == (n,)
    assert (t.answer != t.wrong).all()
    ids = np.concatenate([t.clean.ravel(), t.answer, t.wrong])
    assert ids.min() >= 0 and ids.max() < vocab


_VALUE = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2, 2**70),
                                st.floats(allow_nan=False), st.text(max_size=4)),
                      lambda v: st.lists(v, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                          v, max_size=4),
                      max_leaves=8)


@PROPS
@given(rec=st.dictionaries(st.sampled_from(["clean", "corrupted", "answer", "wrong", "x"]),
                           _VALUE, max_size=5))
def test_the_task_reader_returns_pairs_or_one_input_error(tmp_path, rec):
    p = _file(tmp_path, rec, LINE, name="prop.jsonl")
    try:
        got = read_records(p)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert got == [rec, LINE]


# circuit files ------------------------------------------------------------------------------

@pytest.mark.parametrize("doc, match", [
    ({"edges": {"input->logits": {"in_graph": "false"}}}, "in_graph must be true or false"),
    ({"edges": {"input->logits": {"in_graph": 1}}}, "in_graph must be true or false"),
    ({"cfg": {"n_layers": 2.5}, "edges": {}}, "cfg n_layers must be a non-negative integer"),
    ({"cfg": {"n_heads": "4"}, "edges": {}}, "cfg n_heads must be a non-negative integer"),
    ({"cfg": [2, 4], "edges": {}}, "cfg must be a JSON object"),
    ({"cfg": 7, "edges": {}}, "cfg must be a JSON object"),
    ({"edges": {"input->logits": [True]}}, "has no in_graph"),
    ([1, 2], "a list of edge names"),
])
def test_a_bad_circuit_file_is_one_line(tmp_path, doc, match):
    from rmtbase.circuits.core.graph import Graph
    from rmtbase.circuits.task.export import read_circuit, read_circuit_file

    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=match):
        read_circuit_file(p)
    with pytest.raises(InputError, match=match):
        read_circuit(p, Graph(2, 4))


@pytest.mark.bad_json_input
def test_a_circuit_file_of_huge_numbers_or_deep_nesting_is_one_line(tmp_path):
    from rmtbase.circuits.task.export import read_circuit_file

    p = tmp_path / "c.json"
    for text in ('{"cfg": {"n_layers": ' + "9" * 5000 + '}, "edges": {}}',
                 '{"cfg": ' + "[" * 100_000 + "]" * 100_000 + ', "edges": {}}'):
        p.write_text(text)
        with pytest.raises(InputError, match="not a JSON circuit"):
            read_circuit_file(p)


@PROPS
@given(doc=st.one_of(_VALUE, st.fixed_dictionaries(
    {"cfg": _VALUE, "edges": st.dictionaries(st.sampled_from(["input->logits", "a0.h1->m0",
                                                              "nope"]),
                                             st.fixed_dictionaries({"in_graph": _VALUE}))})))
def test_the_circuit_reader_returns_edges_or_one_input_error(tmp_path, doc):
    from rmtbase.circuits.core.graph import Graph
    from rmtbase.circuits.task.export import read_circuit

    p = tmp_path / "prop.json"
    p.write_text(json.dumps(doc))
    g = Graph(2, 4)
    try:
        kept = read_circuit(p, g)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    assert kept.dtype == bool and kept.shape == (g.n_edges,)
    if isinstance(doc, dict) and isinstance(doc.get("edges"), dict):
        want = sorted(n for n, r in doc["edges"].items() if r["in_graph"] is True)
        assert sorted(np.asarray(g.edge_names())[kept]) == want


# the composition beside the edges, the evaluate document --------------------------------------

def _gpt2(seed, n_layer=2):
    torch = pytest.importorskip("torch")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=40, n_positions=48, n_embd=32, n_layer=n_layer, n_head=4,
                     tie_word_embeddings=False, initializer_range=0.2,
                     attn_implementation="eager", bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(cfg).eval()


def test_a_composition_of_another_model_of_the_same_shape_is_refused():
    """The weights screen checks the composition's heads' norms against the model's (the head
    search's fingerprint): this model's passes, another random model of its shape is
    refused."""
    import xarray as xr

    from rmtbase.circuits.core.fingerprint import head_norms
    from rmtbase.circuits.core.forward import TaskModel
    from rmtbase.circuits.task.weights import head_edge_columns

    mine, other = TaskModel(_gpt2(0)), TaskModel(_gpt2(1))
    qk, ov = head_norms(mine.hm)
    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    shape = (3, 2, 4, 2, 4)
    rng = np.random.default_rng(0)
    comp = xr.Dataset(
        {"composition_rank_source": (dims, rng.integers(1, 9, shape).astype(float)),
         "composition_p": (dims, rng.random(shape)), "composition_q": (dims, rng.random(shape)),
         "qk_norm": (("layer", "head_to"), qk), "ov_norm": (("layer", "head_to"), ov)},
        coords={"kind": ["q", "k", "v"]})
    assert len(head_edge_columns(mine.graph, comp)) == 3 * 4 * 4
    with pytest.raises(InputError, match="the composition is not this model's"):
        head_edge_columns(other.graph, comp)


def test_evaluate_names_its_metric_and_writes_strict_json(tmp_path, capsys):
    """``--evaluate``: the task's size said first, the metric's name under "metric", the
    circuit's value under "circuit_metric"; ``--quiet`` writes nothing to stderr; a degenerate task is refused before the model is
    read; a circuit file with in_graph "false" is refused in one line."""
    from rmtbase.circuits.task.taskfile import write_task
    from rmtbase.cli import main

    folder = tmp_path / "m"
    _gpt2(0).save_pretrained(folder)
    task = tmp_path / "ind.jsonl"
    write_task(induction_task(4, 4, 40, seed=0), task)
    circ = tmp_path / "c.json"
    circ.write_text(json.dumps(["input->logits", "a1.h0->logits"]))
    assert main(["circuits", str(folder), "--task", str(task), "--evaluate", str(circ),
                 "--metric", "logprob"]) == 0
    out, err = capsys.readouterr()
    assert ("rmtbase: task ind: 4 prompt pairs x 8 tokens = 32 token positions (at most "
            "4194304)") in err.splitlines()  # the size, said before the model is read
    doc = json.loads(out, parse_constant=pytest.fail)
    assert doc["metric"] == "logprob"
    assert isinstance(doc["circuit_metric"], float) and doc["edges"] == 2
    assert main(["circuits", str(folder), "--task", str(task), "--evaluate", str(circ),
                 "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # nor transformers' "Loading weights" bar
    circ.write_text(json.dumps({"edges": {"input->logits": {"in_graph": "false"}}}))
    assert main(["circuits", str(folder), "--task", str(task), "--evaluate", str(circ)]) == 2
    assert "in_graph must be true or false" in capsys.readouterr().err
    bad = _file(tmp_path, LINE, {**LINE, "wrong": 4}, name="same.jsonl")
    assert main(["circuits", str(folder), "--task", str(bad), "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "line 2: answer and wrong are the same token" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_the_printed_json_has_no_nan():
    from rmtbase.cli.circuits_task import _json, evaluate_document

    doc = evaluate_document({"model": "m", "metric": float("nan"), "ratio": float("inf"),
                             "faithfulness": np.float64("nan"), "edges": 0}, "kl")
    got = json.loads(_json(doc), parse_constant=pytest.fail)
    assert got["metric"] == "kl"
    assert got["circuit_metric"] is None and got["ratio"] is None
    assert got["faithfulness"] is None
