"""A scored layer's W_Q and W_K element statistics come from one compiled program of their own
(``scoring.measures.layer_stats._factor_elements``), apart from W_QK's (W_QK's program does
not compile the factors' estimator a second time), and W_QK's statistics are finished by a
second program (``scoring.measures.qk_elements._compiled``). Checked against independent calls:
``element_stats`` on each head's factor by itself (its own program) and W_QK's statistics and
histogram in one program (``qk_histogram.elements_and_histogram``), floats to 1e-5 relative or
1e-6 absolute (tests/test_compiler_options.py says why), for grouped-query and multi-head
layers; and that one program, at one shape, serves both factors of a layer."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rmtbase.scoring.measures.layer_stats import _compiled_factor_elements, layer_stats
from rmtbase.scoring.measures.qk_elements import qk_elements
from rmtbase.scoring.measures.qk_histogram import elements_and_histogram
from rmtbase.stats import ELEMENT_STATS, element_stats


def _layer(n: int, n_kv: int, d_h: int = 32, d: int = 128, seed: int = 0):
    rng = np.random.default_rng(seed)
    wq = (0.02 * rng.standard_normal((n, d_h, d))).astype(np.float32)
    wk = (0.03 * rng.standard_normal((n_kv, d_h, d))).astype(np.float32)
    return wq, np.repeat(wk, n // n_kv, axis=0)


@pytest.mark.parametrize("n,n_kv", [(6, 2), (4, 4)])
def test_factor_statistics_are_each_heads_own(n, n_kv):
    wq, wk = _layer(n, n_kv)
    st, _, _ = layer_stats(wq, wk, "all", "float32", n // n_kv)
    for m, w in (("q", wq), ("k", wk)):
        for i in range(n):
            ref = element_stats(w[i])
            for s in ELEMENT_STATS:
                assert np.allclose(st[f"{m}.{s}"][i], np.asarray(ref[s], np.float64),
                                   rtol=1e-5, atol=1e-6, equal_nan=True), (m, i, s)


@pytest.mark.parametrize("n,n_kv", [(6, 2), (4, 4)])
def test_one_factor_program_and_the_former_key_order(n, n_kv):
    storage = "q8_0"  # a name no other test gives this program
    _compiled_factor_elements.cache_clear()
    wq, wk = _layer(n, n_kv, seed=1)
    st, _, _ = layer_stats(wq, wk, "all", storage, n // n_kv)
    assert _compiled_factor_elements(storage)._cache_size() == 1  # one shape: (n_kv, d_h, d)
    keys = [k for k in st if k.split(".", 1)[1] in ELEMENT_STATS]
    # the order the variables had when W_Q's (and, without GQA, W_K's) statistics came out of
    # W_QK's program as a jit's sorted dict, GQA's W_K statistics appended after them
    own = sorted(k for k in keys if not (n_kv < n and k.startswith("k.")))
    assert keys == own + [k for k in keys if n_kv < n and k.startswith("k.")]


def test_qk_statistics_finished_apart_are_the_one_programs():
    wq, wk = _layer(5, 5, seed=2)
    scale = np.full(5, 0.02 * 0.03 * np.sqrt(32), np.float32)
    st, hist = qk_elements(wq, wk, scale, threads=2)
    one = jax.jit(lambda q, k, s: elements_and_histogram(q, k, s))
    for i in range(5):
        ref, ref_hist = one(wq[i], wk[i], scale[i])
        assert np.allclose(hist[i], ref_hist, rtol=1e-5, atol=1e-6)
        for s in ELEMENT_STATS:
            assert np.allclose(st[f"qk.{s}"][i], ref[s], rtol=1e-5, atol=1e-6,
                               equal_nan=True), (i, s)
