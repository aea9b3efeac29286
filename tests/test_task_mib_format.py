"""The task circuit's JSON against an independent reader and writer of MIB's circuit format:
EAP-IG's ``Graph`` (``tests/_eap_ig``, vendored unedited), which MIB's circuit track uses.

- EAP-IG's ``Graph.from_json`` reads rmtbase's ``circuit_json`` (sequential and parallel
  blocks, and the file ``rmtbase circuits --task`` writes): the same edges, the same kept
  edges, the scores to float32 rounding (EAP-IG keeps them in float32 tensors);
- rmtbase's ``read_circuit`` reads the circuit EAP-IG's ``apply_topn`` chose and ``to_json``
  wrote: the same kept edges."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _eap_ig import eap_graph  # noqa: E402

from rmtbase.circuits.core.graph import (  # noqa: E402
    Graph,
    head_name,
    parse,
    receiver_hook,
    sender_hook,
    split_receiver,
)
from rmtbase.circuits.task.export import circuit_json, read_circuit  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402


@pytest.fixture(scope="module")
def eap():
    return eap_graph()


def _read_by_eap_ig(eap, doc, tmp_path):
    p = tmp_path / "circuit.json"
    p.write_text(json.dumps(doc))
    return eap.Graph.from_json(str(p))


@pytest.mark.parametrize("parallel", [False, True])
def test_eap_igs_reader_reads_rmtbases_circuit(eap, tmp_path, parallel):
    g = Graph(3, 2, parallel=parallel, d_model=16)
    rng = np.random.default_rng(1)
    score = rng.normal(size=g.n_edges)
    kept = rng.random(g.n_edges) < 0.2
    back = _read_by_eap_ig(eap, circuit_json(g, kept, score, np.abs(score) / 10), tmp_path)
    assert sorted(back.edges) == sorted(g.edge_names())
    names = g.edge_names()
    assert sorted(n for n, e in back.edges.items() if e.in_graph) == \
        sorted(names[i] for i in np.flatnonzero(kept))
    got = np.array([back.edges[n].score.item() for n in names])
    np.testing.assert_allclose(got, score, rtol=2 ** -23)   # float32 tensors in EAP-IG
    assert back.count_included_edges() == int(kept.sum())


def test_eap_ig_reads_the_file_the_command_writes(eap, tmp_path, capsys):
    """``rmtbase circuits --task``'s circuit.json, read by EAP-IG: its config (with
    ``d_model``, which EAP-IG's reader needs) and kept edges."""
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.circuits.task.taskfile import induction_task, write_task
    from rmtbase.cli import main

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=40, n_positions=48, n_embd=32, n_layer=2, n_head=4,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path / "m")
    write_task(induction_task(4, 5, 40, seed=0), tmp_path / "t.jsonl")
    assert main(["circuits", str(tmp_path / "m"), "--task", str(tmp_path / "t.jsonl"),
                 "--out", str(tmp_path / "out"), "--top", "2", "--quiet",
                 "--force"]) == 0  # a random model: no behaviour
    capsys.readouterr()
    doc = json.loads((tmp_path / "out" / "circuit.json").read_text())
    assert doc["cfg"]["d_model"] == 32
    back = eap.Graph.from_json(str(tmp_path / "out" / "circuit.json"))
    assert (back.cfg["n_layers"], back.cfg["n_heads"]) == (2, 4)
    assert sorted(n for n, e in back.edges.items() if e.in_graph) == \
        sorted(n for n, e in doc["edges"].items() if e["in_graph"])


def test_rmtbase_reads_the_circuit_eap_ig_writes(eap, tmp_path):
    cfg = {"n_layers": 3, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 16}
    theirs = eap.Graph.from_model(cfg)
    gen = torch.Generator().manual_seed(0)
    theirs.scores[:] = torch.randn(theirs.scores.shape, generator=gen)
    theirs.apply_topn(12, absolute=True)
    p = tmp_path / "eap.json"
    theirs.to_json(str(p))
    g = Graph(3, 2, d_model=16)
    kept = read_circuit(p, g)
    names = g.edge_names()
    want = sorted(n for n, e in theirs.edges.items() if e.in_graph)
    assert 0 < len(want) <= 12
    assert sorted(names[i] for i in np.flatnonzero(kept)) == want


def test_every_name_is_its_nodes_and_reads_back():
    """Each sender's and receiver's name parses to its node and that node names it again; the
    other namings (``L1H0``, TransformerLens hooks), written out by hand, are the node's."""
    g = Graph(3, 4)
    names = [*g.senders, *(r for st in g.stages for r in st.receivers)]
    assert [parse(n).name for n in names] == names
    assert split_receiver("a2.h3<k>") == ("a2.h3", "k") and split_receiver("m1") == ("m1", "")
    assert parse("a12.h3").head_name == head_name(12, 3) == "L12H3"
    assert sender_hook("input") == "blocks.0.hook_resid_pre"
    assert sender_hook("a2.h3") == "blocks.2.attn.hook_result[3]"
    assert sender_hook("m1") == "blocks.1.hook_mlp_out"
    assert receiver_hook("a2.h3<k>", 3) == "blocks.2.hook_k_input[3]"
    assert receiver_hook("m1", 3) == "blocks.1.hook_mlp_in"
    assert receiver_hook("logits", 3) == "blocks.2.hook_resid_post"
    for bad in ("a1.h", "a1.h0<x>", "m", "x1", "a1h0", "", "logits<q>", "a-1.h0"):
        with pytest.raises(InputError, match="not a node"):
            parse(bad)
    with pytest.raises(InputError):
        sender_hook("logits")
    with pytest.raises(InputError):
        receiver_hook("a1.h0", 3)
