"""Edge sets run together (rmtbase.circuits.core.forward.TaskModel.run_sets, the runner's
batches of sets) and the pruning's guard on a round's joint loss, against independent
computations.

- a batch of edge sets equals the transformers GPT-2 with plain torch hooks (no rmtbase
  code: ``test_circuits_task._hf_without``), set by set;
- resumed from a recorded run, a batch equals its sets run one by one from the start;
- the runner's metrics with sets batched equal those with one set a forward, under every
  counterfactual, on GPT-2, a GQA Llama and a post-norm Gemma-3 (float64: to 1e-10);
- the guard: on a metric where two edges back each other up (each alone idle), a round never
  removes both, so the top edge keeps the whole behaviour; without the guard it does.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_circuits_task import _gpt2, _hf_outputs, _hf_without, _task  # noqa: E402

from rmtbase.circuits.core import runner as R  # noqa: E402
from rmtbase.circuits.core.forward import TaskModel  # noqa: E402
from rmtbase.circuits.core.graph import Graph  # noqa: E402
from rmtbase.circuits.core.runner import Runner  # noqa: E402
from rmtbase.circuits.task import prune as P  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402


def _sets(n_edges: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random((k, n_edges)) < rng.random((k, 1))  # densities from 0 to 1


def test_a_batch_of_edge_sets_equals_plain_hooks():
    net, task = _gpt2(seed=3), _task(n=3, seed=3)
    tm = TaskModel(net)
    cf, _ = _hf_outputs(net, task.corrupted)
    names = tm.graph.edge_names()
    sets = _sets(tm.graph.n_edges, 5, 3)
    b = Runner(tm, task, batch=3).prepare(0, task.n)
    got = tm.run_sets(b["emb"], b["cf"], sets)
    assert got.shape[:2] == (5, task.n)
    for k, kept in enumerate(sets):
        want = _hf_without(net, task.clean, [names[i] for i in np.flatnonzero(~kept)], cf)
        err = float((got[k] - want).abs().max() / want.abs().max())
        assert err < 1e-6, (k, err)  # the tolerance of test_edge_sets_equal_plain_hooks
    with pytest.raises(InputError, match="batch of edge sets"):
        tm.run_sets(b["emb"], b["cf"], sets[0])


def test_a_resumed_batch_is_its_sets_run_from_the_start():
    net, task = _gpt2(seed=4, n_layer=3), _task(n=4, seed=4)
    tm = TaskModel(net)
    b = Runner(tm, task, batch=4).prepare(0, task.n)
    ck = tm.run(b["emb"], cf=b["cf"], kept=tm.graph.full(), record=True)["checkpoint"]
    for si, st in enumerate(tm.graph.stages):
        sets = _sets(tm.graph.n_edges, 4, si)
        sets[:, :st.offset] = True
        got = tm.run_sets(b["emb"], b["cf"], sets, resume=(ck, si) if si else None)
        want = torch.stack([tm.run(b["emb"], cf=b["cf"], kept=k)["logits"] for k in sets])
        err = float((got - want).abs().max() / want.abs().max())
        assert err < 1e-12, (si, err)


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    cfg = LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager")
    return LlamaForCausalLM(cfg).double().eval()


def _gemma3():
    from test_circuits_families import _net

    return _net("gemma3_text").double().eval()


@pytest.mark.parametrize("model", ["gpt2", "llama", "gemma3"])
@pytest.mark.parametrize("cf", ["corrupted", "mean", "resample", "zero"])
def test_batched_metrics_equal_one_set_a_forward(model, cf, monkeypatch):
    net = {"gpt2": lambda: _gpt2(seed=6), "llama": _llama, "gemma3": _gemma3}[model]()
    tm = TaskModel(net)
    task = _task(n=5, seed=6)
    sets = list(_sets(tm.graph.n_edges, 9, 6))
    base = sets[0].copy()
    near = [base.copy() for _ in range(6)]  # a pruning round: the base less one edge each
    for i, k in enumerate(near):
        k[np.flatnonzero(base)[i * 7 % base.sum()]] = False
    r = Runner(tm, task, counterfactual=cf, batch=3)
    assert r.sets_per_run(3) > 1
    got = [r.metrics(sets), r.metrics(near, base=base)]
    monkeypatch.setattr(R, "MAX_SETS", 1)
    assert r.sets_per_run(3) == 1
    want = [r.metrics(sets), r.metrics(near, base=base)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10 * np.abs(w).max())


class _Backup:
    """A runner stub whose per-prompt metric is 1 while edge 0 or edge 1 is kept (each backs
    the other up: alone each is idle), plus small independent contributions of the others."""

    def __init__(self, n_edges: int = 40, n: int = 16):
        self.tm = SimpleNamespace(graph=SimpleNamespace(
            n_edges=n_edges, full=lambda: np.ones(n_edges, bool),
            empty=lambda: np.zeros(n_edges, bool),
            alive=lambda kept, forward=True: np.asarray(kept, bool),  # no paths: all alive
            carrying=lambda kept, forward=True: np.ones(n_edges, bool)))
        self.task, self.counterfactual = SimpleNamespace(n=n), "corrupted"
        self.on_batch = None
        rng = np.random.default_rng(0)
        self.w = np.r_[0.0, 0.0, rng.uniform(0.001, 0.003, n_edges - 2)]
        self.noise = rng.normal(0, 1e-4, n)

    def metrics(self, kept_sets, desc: str = "", base=None, metric=None):
        kept = np.asarray(list(kept_sets), dtype=bool)
        v = (kept[:, 0] | kept[:, 1]).astype(float) + kept @ self.w
        return v[:, None] + self.noise[None, :] * (1 + kept.sum(1, keepdims=True))


def test_the_guard_never_removes_both_edges_that_back_each_other_up():
    r = _Backup()
    got = P.prune(r, fraction=0.5, tail=4, behaviour=1.0)
    top = got["order"][0]
    assert top in (0, 1)
    kept = np.zeros(40, bool)
    kept[top] = True
    assert r.metrics([kept])[0].mean() >= 1.0  # the top edge alone keeps the behaviour
    blind = P.prune(r, fraction=0.5, tail=4, behaviour=1.0, guard=0)
    assert set(blind["order"][:2]) != {0, 1} or blind["round"][0] == blind["round"][1]
    assert blind["order"][0] not in (0, 1)  # without the guard both went in one round


def test_sets_per_run_keeps_the_memory_bound():
    tm = TaskModel(_gpt2(seed=1))
    r = Runner(tm, _task(n=4, seed=1))
    per = R.set_bytes(tm, 4, r.task.length)
    assert r.sets_per_run(4) == min(R.MAX_SETS, R.SET_BATCH_BYTES // per)
    assert isinstance(tm.graph, Graph)
