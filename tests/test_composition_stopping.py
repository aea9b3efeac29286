"""The composition and QK-overlap nulls drawn only as far as a flag needs
(:mod:`rmtbase.scoring.composition.stopping`), in chunks that an interrupt can stop, with the
arguments refused in one line before any work.

The error bound relied on: with probability ≥ 1 − STOP_ERROR (0.01; union bound over the
pairs' count intervals at every look) every flag at the stop is the flag of the full N-draw
table. The tests use fixed seeds; at these seeds the stopped and full flags must agree exactly.
"""

from __future__ import annotations

import os
import signal
import threading
import warnings

import jax
import numpy as np
import pytest

from rmtbase.errors import InputError


def _gpt2(path, n_layer=3, n_head=2, n_embd=32, seed=0, zero_v=None):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    if zero_v is not None:  # (layer, head): its V weights zero
        layer, head = zero_v
        d_h = n_embd // n_head
        with torch.no_grad():
            w = model.transformer.h[layer].attn.c_attn.weight
            w[:, 2 * n_embd + head * d_h:2 * n_embd + (head + 1) * d_h] = 0
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _gpt2(tmp_path_factory.mktemp("tiny") / "m")


def _same(a, b):
    """Every variable byte-identical and every attr equal but the time stamp."""
    assert set(a.data_vars) == set(b.data_vars)
    for k in a.data_vars:
        x, y = a[k].values, b[k].values
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), k
    drop = {"history"}
    assert {k: v for k, v in a.attrs.items() if k not in drop} == {
        k: v for k, v in b.attrs.items() if k not in drop}


def _full_schedule(monkeypatch):
    """The rule off: every null drawn to its cap at once (the reference of the stopped run)."""
    import rmtbase.scoring.composition.stopping as S

    monkeypatch.setattr(S, "schedule", lambda draws: (int(draws),))


def test_stopped_flags_are_the_full_nulls_flags():
    """settle() on real composition-null draws (d 32, d_h 4): values far beyond the null, in
    it and near the smallest BH thresholds; its flags equal those of all 18,000 draws, and it
    stops early where every value is far from its threshold."""
    from rmtbase.decision.significance import benjamini_hochberg
    from rmtbase.scoring.composition.dataset import tail_p
    from rmtbase.scoring.composition.pairs import score_draws
    from rmtbase.scoring.composition.stopping import continued, settle

    key = jax.random.key(3)
    raw = score_draws(key, 32, 4, 4, 0, 18_000)
    full = np.sort(raw)
    drawn = []

    def draw(_, n, previous):
        start = 0 if previous is None else previous.size
        drawn.append((start, n))
        return continued(previous, score_draws(key, 32, 4, 4, start, n))

    rng = np.random.default_rng(0)
    q = np.quantile(full, [0.5, 0.99, 0.999, 0.9995])
    far = np.full(100, full[-1] * 3)  # beyond every draw: flagged at any size
    for values, early in ((np.concatenate([rng.choice(full[1800:16200], 300), far]), True),
                          (np.concatenate([rng.choice(full, 300), q, far[:5]]), False)):
        drawn.clear()
        nulls, size = settle({"c": values}, draw, 18_000, alpha=0.05)
        # the first n draws, sorted, continued through the sizes: the bytes of one sort
        assert nulls["c"].tobytes() == np.sort(raw[:size["c"]]).tobytes()
        stopped = benjamini_hochberg(tail_p(values, nulls["c"]), 0.05)[0]
        reference = benjamini_hochberg(tail_p(values, full), 0.05)[0]
        # exact: booleans (flags)
        assert np.array_equal(stopped, reference)
        assert all(a < b for a, b in drawn) and drawn[0][0] == 0  # each size continues
        if early:
            assert size["c"] == 2_000, size


def test_a_longer_table_has_the_same_first_draws():
    """Draw i is the same in every table and in every call: draws 2,000 … 4,999 continued from
    the sorted first 2,000 give the bytes of the sorted 5,000 (composition and overlap;
    chunks not aligned with 2,000)."""
    from rmtbase.scoring.composition.overlap import overlap_draws
    from rmtbase.scoring.composition.pairs import null_scores, score_draws
    from rmtbase.scoring.composition.stopping import continued

    key = jax.random.key(11)
    first = np.sort(score_draws(key, 48, 8, 8, 0, 2000))
    assert continued(first, score_draws(key, 48, 8, 8, 2000, 5000)).tobytes() == \
        null_scores(key, 48, 8, 8, 5000).tobytes()
    a = overlap_draws(key, 48, 8, 0, 5000, True)
    b = np.concatenate([overlap_draws(key, 48, 8, 0, 1999, True),
                        overlap_draws(key, 48, 8, 1999, 5000, True)])
    assert a.tobytes() == b.tobytes()


def test_same_output_whatever_the_cache_holds(tiny, tmp_path, monkeypatch):
    """A cold run, a run over the cache it left, and a run over a cache holding only the
    longer (18,000-draw) tables give byte-identical composition files; the cold run stops
    before 18,000 on this random model (2 heads, 3 layers: 12 pairs per kind)."""
    import rmtbase

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "a"))
    cold = rmtbase.composition(tiny, seed=5)
    again = rmtbase.composition(tiny, seed=5)
    with monkeypatch.context() as m:
        m.setenv("RMTBASE_CACHE", str(tmp_path / "b"))
        _full_schedule(m)
        full = rmtbase.composition(tiny, seed=5)  # fills cache b with 18,000-draw tables
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "b"))
    longer = rmtbase.composition(tiny, seed=5)
    _same(cold, again)
    _same(cold, longer)
    assert cold.attrs["draws"] < 18_000 and cold.attrs["composition_draws_cap"] == 18_000
    assert full.attrs["draws"] == 18_000
    for name in ("composition_flag", "qk_overlap_flag"):
        # exact: the same draws of one program whatever the cache held
        assert np.array_equal(cold[name].values, full[name].values), name


@pytest.mark.parametrize("kw,match", [
    ({"draws": 1}, "draws must be at least 2"),
    ({"draws": True}, "draws must be an integer"),
    ({"draws": 2.7}, "draws must be an integer"),
    ({"seed": 2**70}, r"seed must be an integer in \[0, 2\*\*32\)"),
    ({"seed": "a"}, "seed must be an integer"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"seed": -1}, "seed must be an integer"),
    ({"alpha": "0.05"}, r"alpha must be a number in \(0, 1\)"),
    ({"alpha": 1.5}, r"alpha must be a number in \(0, 1\)"),
    ({"ln_gains": np.ones((3, 32))}, "only with fold_ln=True"),
])
def test_bad_arguments_are_one_line_before_any_work(tiny, monkeypatch, kw, match):
    import rmtbase
    import rmtbase.scoring.composition.run as comp

    def no_work(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(comp, "check_model", no_work)
    monkeypatch.setattr(comp, "_layers", no_work)
    with pytest.raises(InputError, match=match) as exc:
        rmtbase.composition(tiny, **kw)
    assert "\n" not in str(exc.value)


def test_interrupt_is_honoured_between_chunks(monkeypatch):
    """SIGINT while the null is drawn ends the drawing after the compiled call under way,
    and a call holds few draws at a large d_h: the draws asked of JAX stop far short of the
    table (before, calls of 1,024 draws: 10 ms of CPU each at 640 × 256, tens of seconds of
    wall on a busy machine, during which SIGINT waited)."""
    import rmtbase.baseline.composition_null as C

    run = C._reduced(256, 96, 96, "float32")
    for size in {getattr(C, "chunk_size", lambda f: 1024)(6 * 96**2), 1024}:  # compiled first
        np.asarray(run(jax.random.key(0), jax.numpy.arange(size)))
    asked = []

    def counted(key, idx):
        asked.append(int(idx.shape[0]))
        if len(asked) == 1:
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        return run(key, idx)

    monkeypatch.setattr(C, "_reduced", lambda *a: counted)
    n = 4096
    with pytest.raises(KeyboardInterrupt):
        C.null_squares(jax.random.key(0), 256, 96, 96, n)
    assert sum(asked) <= 256, asked  # before: one call of 1,024 draws (35 s wall at d_h 256)
    # a call's work at Gemma-3's d_h 256: 8 draws (≈ 35 ms of CPU), never 1,024
    assert C.chunk_size(6 * 256**2) == 8 and C.chunk_size(8 * 256**2) == 8


def test_plan_counts_the_null_draws(tiny, capsys):
    """The plan line states the null draws' work (12 d_h³ FLOPs a composition draw, 10 d_h³ a
    shared-key overlap draw, 16 d_h³ a distinct-key one)."""
    from rmtbase.pipeline.checks import check_composition
    from rmtbase.scoring.composition.run import check_model
    from rmtbase.scoring.settings import CompositionSettings

    pl = check_model(tiny, draws=18_000)
    assert pl["null_flops"] == (12 + 16) * 16**3 * 18_000 and pl["null_draws"] == 18_000
    check_composition(tiny, None, CompositionSettings(), False, quiet=False)
    line = [x for x in capsys.readouterr().err.splitlines() if "composition:" in x]
    assert "of them the null draws, at most 18,000 a null" in line[0]


def test_zero_head_is_named_once(tmp_path, capsys, monkeypatch):
    """A head with zero V weights: one warning naming it, NaN composition for its pairs, no
    raw numpy warning; the null draws show a progress line (a line per update here)."""
    import rmtbase

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RMTBASE_PROGRESS_INTERVAL", "0")
    m = _gpt2(tmp_path / "z", zero_v=(1, 0))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        ds = rmtbase.composition(m, draws=2000, progress=True)
    text = [str(w.message) for w in got]
    assert sum("L1H0 (W_OV = 0)" in t for t in text) == 1, text
    assert not any("invalid value" in t or "divide" in t for t in text), text
    assert np.isnan(ds.composition.sel(kind="v", layer_from=1, head_from=0).values).all()
    assert np.isfinite(ds.composition.sel(kind="v", layer_from=0, head_from=0,
                                          layer_to=1, head_to=1).values)
    assert "rmtbase composition null" in capsys.readouterr().err
