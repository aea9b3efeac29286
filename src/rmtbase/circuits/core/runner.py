"""A task on a :class:`.forward.TaskModel`, in batches of prompts: the counterfactual, the
per-prompt metric of any edge set, and the memory bound.

Counterfactuals (what a removed edge carries, :mod:`.forward`): ``corrupted`` (default; each
sender's output on the prompt's corrupted twin, Wang et al. 2022), ``mean`` (its mean at each
position over the task's other clean prompts, leaving the prompt's own output out, so that a
removed edge never carries a share of the value it replaces), ``resample`` (its output on the
next clean prompt, ``(i + 1) mod N``) or ``zero``. A batch holds its
senders' clean and counterfactual outputs, ``2 · S · n · T · d`` floats (``S`` senders): :func:`batch_bytes`; the
counterfactual outputs of the batches are kept between passes up to :data:`CACHE_BYTES`."""

from __future__ import annotations

import time

import numpy as np

from ...errors import InputError
from .counterfactual import DEFAULT_TASK, TASK, check_kind, leave_one_out, partners
from .edge_sets import copies
from .metric import METRICS, check_metric, metric
from .prompts import Task

#: The task search's counterfactuals, the default first (:mod:`.counterfactual`).
COUNTERFACTUALS = TASK
#: Prompts per batch at least, by default (:func:`auto_batch`).
BATCH = 8
#: A default batch grows above :data:`BATCH` prompts while its :func:`batch_bytes` stay
#: within this: on a small model one pass over few prompts costs mostly per-call overhead.
BATCH_BYTES = 64 << 20
#: Bytes the edge sets of one batched forward hold (:meth:`Runner.sets_per_run`), and the
#: most sets one forward runs.
SET_BATCH_BYTES = 128 << 20
MAX_SETS = 64
#: Bytes of counterfactual outputs kept between passes over the prompts (:meth:`Runner.prepared`).
CACHE_BYTES = 1 << 30


def batch_bytes(tm, n: int, t: int) -> int:
    """Bytes of a batch's sender outputs and gradients (module docstring), float32."""
    g = tm.graph
    receivers = sum(len(st.receivers) for st in g.stages)
    return 4 * n * t * tm.hm.d * (2 * len(g.senders) + receivers)


def set_bytes(tm, n: int, t: int) -> int:
    """Bytes one edge set of a batched run holds on ``n`` prompts of ``t`` tokens, float32:
    its senders' ``o_s − c_s`` and a stage's receiver inputs, twice (their norms)."""
    g = tm.graph
    widest = max(len(st.receivers) for st in g.stages)
    return 4 * n * t * tm.hm.d * (len(g.senders) + 2 * widest)


def auto_batch(tm, task: Task) -> int:
    """The default batch: :data:`BATCH` prompts, more (up to all) while a batch's
    :func:`batch_bytes` stay within :data:`BATCH_BYTES`."""
    per = max(1, batch_bytes(tm, 1, int(task.clean.shape[1])))
    return int(min(task.n, max(BATCH, BATCH_BYTES // per)))


class Runner:
    """``task`` on ``tm`` with ``metric`` and ``counterfactual`` (module docstring), ``batch``
    prompts at a time (None: :func:`auto_batch`)."""

    def __init__(self, tm, task: Task, *, metric: str = "logit_diff",
                 counterfactual: str = DEFAULT_TASK, batch: int | None = None,
                 progress: bool = False, cache_bytes: int = CACHE_BYTES):
        check_kind(counterfactual, task=True)
        if task.n < 2:
            raise InputError("a task needs at least 2 prompt pairs (an se over prompts)")
        self.tm, self.task, self.metric = tm, task, check_metric(metric)
        self.counterfactual = counterfactual
        self.batch = auto_batch(tm, task) if batch is None else int(batch)
        self.progress = bool(progress)
        self._sums = None
        self._cache: dict = {}
        self._cache_left = int(cache_bytes)
        #: None, or called ``(set-prompts, seconds)`` after each batch :meth:`metrics` runs.
        self.on_batch = None

    # batches ---------------------------------------------------------------------------
    def batches(self):
        """(lo, hi) of each batch."""
        for lo in range(0, self.task.n, self.batch):
            yield lo, min(lo + self.batch, self.task.n)

    def _output_sums(self):
        """Each sender's clean output summed over the task's prompts, ``(T, d)``."""
        if self._sums is None:
            total = None
            for lo, hi in self.batches():
                outs = self.tm.run(self.tm.embed(self.task.clean[lo:hi]))["outs"]
                s = [o.sum(0) for o in outs]
                total = s if total is None else [a + b for a, b in zip(total, s, strict=True)]
            self._sums = total
        return self._sums

    def prepare(self, lo: int, hi: int) -> dict:
        """Batch ``lo:hi``: clean embeddings ``emb``, counterfactual outputs ``cf``, their
        embeddings ``cf_emb``, ``answer``, ``wrong``, clean log-probabilities ``ref``, the full
        model's metrics ``full`` (``{name: (n,)}``, each of :data:`.metric.METRICS`)."""
        import torch

        tm = self.tm
        emb = tm.embed(self.task.clean[lo:hi])
        clean = tm.run(emb)
        if self.counterfactual == "corrupted":
            cf = tm.run(tm.embed(self.task.corrupted[lo:hi]))["outs"]
        elif self.counterfactual == "resample":  # the next prompt's clean run
            nxt = partners(np.arange(lo, hi), self.task.n)
            cf = tm.run(tm.embed(self.task.clean[nxt]))["outs"]
        elif self.counterfactual == "mean":
            with torch.no_grad():
                cf = [leave_one_out(s, o, self.task.n)
                      for s, o in zip(self._output_sums(), clean["outs"], strict=True)]
        else:
            cf = [torch.zeros_like(emb)] * len(tm.graph.senders)
        b = {"emb": emb, "cf": cf, "cf_emb": cf[0],
             "answer": torch.as_tensor(self.task.answer[lo:hi]),
             "wrong": torch.as_tensor(self.task.wrong[lo:hi]),
             "ref": torch.log_softmax(clean["logits"].double(), -1), "clean_outs": clean["outs"]}
        b["full"] = {m: self.value(b, clean["logits"], m) for m in METRICS}
        return b

    def prepared(self, lo: int, hi: int) -> dict:
        """:meth:`prepare` of batch ``lo:hi`` without its clean outputs, kept for the next
        call while the kept batches fit ``cache_bytes`` (their counterfactual outputs)."""
        if (lo, hi) in self._cache:
            return self._cache[(lo, hi)]
        b = self.prepare(lo, hi)
        del b["clean_outs"]
        size = sum(c.numel() * c.element_size() for c in b["cf"] if c.is_contiguous())
        if size <= self._cache_left:
            self._cache[(lo, hi)] = b
            self._cache_left -= size
        return b

    def value(self, b: dict, logits, name: str | None = None):
        """``(n,)`` metric ``name`` (None: the runner's) of ``logits`` on batch ``b``."""
        return metric(name or self.metric, logits, b["answer"], b["wrong"], b["ref"])

    # edge sets -------------------------------------------------------------------------
    def bar(self, total: int, desc: str):
        """A :func:`rmtbase.progress.progress_bar` of ``total`` prompts (silent unless
        ``progress``)."""
        from ...progress import progress_bar

        return progress_bar(total, desc=f"rmtbase circuits: {desc}", unit="prompt",
                            enabled=self.progress)

    def metrics(self, kept_sets, *, desc: str = "edge sets", base=None,
                metric: str | None = None) -> np.ndarray:
        """``(K, N)`` float64: ``metric`` (None: the runner's) per prompt with each edge set of
        ``kept_sets`` (``(n_edges,)`` bools) kept and the rest counterfactual, on the batches
        :meth:`prepared` once for every metric. ``base``: an edge set the
        sets differ from in a few edges (None: every edge); each batch's run of ``base`` is
        recorded once and a set's run starts at the first stage where it differs from
        ``base`` (:meth:`.forward.TaskModel.run`'s ``resume``): the same numbers, fewer
        stages run."""
        kept_sets = list(kept_sets)
        out = np.empty((len(kept_sets), self.task.n))
        with self.bar(len(kept_sets) * self.task.n, desc) as bar:
            self._metrics(kept_sets, out, bar, base, check_metric(metric or self.metric))
        return out

    def _metrics(self, kept_sets, out, bar, base, name) -> None:
        tm = self.tm
        n_stages = len(tm.graph.stages)
        full = base is None
        base = tm.graph.full() if full else np.asarray(base, dtype=bool)
        starts = [tm.first_difference(k, base) for k in kept_sets]
        record = sum(s / n_stages for s in starts if s < n_stages) > 1
        for lo, hi in self.batches():
            b, t0 = self.prepared(lo, hi), time.perf_counter()
            ck, at_base = None, b["full"][name] if full else None
            if record or at_base is None:
                run = tm.run(b["emb"], cf=b["cf"], kept=base, record=record)
                ck = run.get("checkpoint")
                at_base = at_base if full else self.value(b, run["logits"], name)
                del run
            for idx, s in self._groups(kept_sets, starts, n_stages, hi - lo):
                resume = (ck, s) if ck is not None and 0 < s < n_stages else None
                if s == n_stages:
                    v = at_base.expand(len(idx), -1)
                elif len(idx) == 1:
                    v = self.value(b, tm.run(b["emb"], cf=b["cf"], kept=kept_sets[idx[0]],
                                             resume=resume)["logits"], name)[None]
                else:
                    v = self._values(b, name, tm.run_sets(
                        b["emb"], b["cf"], np.stack([kept_sets[i] for i in idx]),
                        resume=resume))
                out[idx, lo:hi] = v.detach().double().numpy()
                bar.update(len(idx) * (hi - lo))
            del ck
            if self.on_batch is not None:
                self.on_batch(len(kept_sets) * (hi - lo), time.perf_counter() - t0)

    def _groups(self, kept_sets, starts, n_stages: int, n: int):
        """(set indices, start stage) of the edge sets run together on a batch of ``n``
        prompts: sets of one start stage, in order, at most :meth:`sets_per_run` at a time;
        a per-position set alone."""
        size = self.sets_per_run(n)
        order = sorted(range(len(starts)), key=lambda i: starts[i])
        group, at = [], None
        for i in order:
            alone = np.ndim(kept_sets[i]) != 1
            if group and (starts[i] != at or len(group) >= size or alone):
                yield group, at
                group = []
            group.append(i)
            at = starts[i]
            if alone:
                yield group, at
                group = []
        if group:
            yield group, at

    def sets_per_run(self, n: int) -> int:
        """Edge sets one forward runs together on ``n`` prompts (:meth:`.forward.TaskModel
        .run_sets`): as many as keep their :func:`set_bytes` within :data:`SET_BATCH_BYTES`,
        at most :data:`MAX_SETS`."""
        per = max(1, set_bytes(self.tm, n, self.task.length))
        return int(max(1, min(MAX_SETS, SET_BATCH_BYTES // per)))

    def _values(self, b: dict, name: str, logits):
        """``(K, n)`` metric ``name`` of a batch of sets' logits ``(K, n, …)`` on batch ``b``."""
        k = logits.shape[0]
        flat = logits.reshape(-1, *logits.shape[2:])
        return metric(name, flat, *(copies(b[x], k) for x in ("answer", "wrong", "ref"))
                      ).view(k, -1)


__all__ = ["BATCH", "BATCH_BYTES", "CACHE_BYTES", "COUNTERFACTUALS", "MAX_SETS", "Runner",
           "SET_BATCH_BYTES", "auto_batch", "batch_bytes", "set_bytes"]
