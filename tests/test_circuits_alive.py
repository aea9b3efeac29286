"""The edges of a set that carry something (``Graph.alive``) and the pruning tail that counts
them: against a path search written here, and against the forward itself (an edge off every
kept input-to-logits path changes no metric)."""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.circuits.core.graph import Graph, split_receiver

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _by_paths(g: Graph, kept, forward: bool = True) -> np.ndarray:
    """Edge ``e`` is alive iff a kept path runs input → … → its sender and its receiver → … →
    logits: every such path enumerated by depth-first search over the kept edges."""
    ends = [g.edge(i) for i in range(g.n_edges)]
    out = {}
    for i, (s, r) in enumerate(ends):
        if kept[i]:
            out.setdefault(s, []).append(split_receiver(r)[0])
    into = {}
    for s, targets in out.items():
        for t in targets:
            into.setdefault(t, []).append(s)

    def reaches(start, nbrs, goal):
        seen, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n == goal:
                return True
            if n not in seen:
                seen.add(n)
                todo += nbrs.get(n, [])
        return False

    return np.array([bool(kept[i]) and (not forward or reaches(s, into, "input"))
                     and reaches(split_receiver(r)[0], out, "logits")
                     for i, (s, r) in enumerate(ends)])


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("density", [0.03, 0.1, 0.3])
def test_alive_is_the_path_search(parallel, density):
    g = Graph(3, 2, parallel=parallel)
    rng = np.random.default_rng(int(density * 100) + parallel)
    for _ in range(20):
        kept = rng.random(g.n_edges) < density
        for forward in (True, False):
            got, want = g.alive(kept, forward), _by_paths(g, kept, forward)
            np.testing.assert_array_equal(got, want)  # exact: booleans
            carrying = g.carrying(kept, forward)  # each edge as if added: its own path search
            for e in rng.choice(g.n_edges, 8, replace=False):
                assert carrying[e] == _by_paths(g, np.where(np.arange(g.n_edges) == e, True,
                                                            kept), forward)[e], (e, forward)
    assert g.alive(g.full()).all() and not g.alive(g.empty()).any()


def _runner(cf: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.circuits.core.forward import TaskModel
    from rmtbase.circuits.core.runner import Runner
    from rmtbase.circuits.task.taskfile import induction_task

    torch.manual_seed(3)
    cfg = GPT2Config(vocab_size=40, n_positions=48, n_embd=32, n_layer=2, n_head=4,
                     tie_word_embeddings=False, initializer_range=0.2,
                     attn_implementation="eager", bos_token_id=0, eos_token_id=0)
    net = GPT2LMHeadModel(cfg).to(torch.float64).eval()
    return Runner(TaskModel(net), induction_task(6, 5, 40, seed=3), counterfactual=cf, batch=6)


@pytest.mark.parametrize("cf, forward", [("corrupted", True), ("resample", True),
                                         ("mean", False), ("zero", False)])
def test_an_edge_that_is_not_alive_changes_no_metric(cf, forward):
    """``m(C) = m(alive(C))`` per prompt, float64, where the counterfactual is a run's output
    (``forward``); under ``mean`` and ``zero`` only the receivers' side is claimed: a sender
    with no kept input sends its output on the counterfactual residual, not the counterfactual
    (under ``mean`` that differs, shown; under ``zero`` here it does not: this GPT-2's biases
    are zero, so a zero residual sends zero)."""
    r = _runner(cf)
    g = r.tm.graph
    rng = np.random.default_rng(1)
    sets = [rng.random(g.n_edges) < p for p in (0.05, 0.1, 0.2, 0.4)]
    alive = [g.alive(k, forward) for k in sets]
    assert all((a != k).any() for a, k in zip(alive, sets, strict=True))  # each set has dead edges
    idle = []  # one edge added alone where it would not carry: the pruning's skipped sets
    for k in alive:
        e = rng.choice(np.flatnonzero(~k & ~g.carrying(k, forward)))
        idle.append(np.where(np.arange(g.n_edges) == e, True, k))
    v = r.metrics([*sets, *alive, *idle])
    np.testing.assert_allclose(v[:4], v[4:8], rtol=0, atol=1e-9)
    np.testing.assert_allclose(v[8:], v[4:8], rtol=0, atol=1e-9)
    if cf == "mean":  # the sender side is not exact here: the check can fail
        w = r.metrics([g.alive(k, True) for k in sets])
        assert np.abs(w - v[:4]).max() > 1e-6


def test_a_tail_round_counts_a_two_edge_path_as_two_edges():
    """In the tail each round removes one edge, the one of least ``sign · δ`` (``loss``), where
    an edge whose removal leaves one other live edge carrying nothing (counted here by the
    path search: a two-edge path, each edge of which alone loses the whole path) costs half
    its loss; ``δ`` is the round's own exact effect."""
    from rmtbase.circuits.core.exact import patch_edges
    from rmtbase.circuits.task.prune import prune

    r = _runner("corrupted")
    g = r.tm.graph
    full, empty = r.metrics([g.full(), g.empty()]).mean(-1)
    sign = np.sign(full - empty)
    tail = 12
    res = prune(r, fraction=0.5, tail=tail, guard=0)
    checked = paths = 0
    for rd in range(res["rounds"]):
        circuit = res["round"] >= rd
        live = np.flatnonzero(circuit)
        if live.size > tail or live.size < 2:
            continue
        loss = sign * patch_edges(r, live, within=circuit)[0]  # one δ per edge asked
        gone = np.flatnonzero(res["round"][live] == rd)
        assert gone.size == 1
        now, pair = _by_paths(g, circuit).sum(), np.zeros(live.size, dtype=bool)
        for i, e in enumerate(live):
            k = circuit.copy()
            k[e] = False
            pair[i] = now - _by_paths(g, k).sum() == 2
        cost = np.where((loss > 0) & pair, loss / 2, loss)
        assert cost[gone[0]] <= cost.min() + 1e-9, rd
        checked += 1
        paths += int(loss[gone[0]] > loss.min() + 1e-9)  # δ alone would have taken another
    assert checked == tail - 1 and paths >= 1, (checked, paths)
