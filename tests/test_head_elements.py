"""The CPU null tables' element statistics through scoring's compiled programs
(rmtbase.baseline.null_elements, rmtbase.stats.head_elements; issue 59 item 4) give the bytes of
the draw program that inlines them, and scoring's one head a call the bytes of several a call.

Exact comparisons (bytes), fixed keys; XLA does not promise that a computation compiled alone
and inlined in a larger program round alike, so these tests keep checking it."""

import jax
import numpy as np
import pytest

from rmtbase.baseline import null_elements
from rmtbase.baseline.null import null_draws
from rmtbase.stats.head_elements import compiled, factor_elements


def _draws(monkeypatch, together: bool, **kw):
    with monkeypatch.context() as m:
        if together:
            m.setattr(null_elements, "apart", lambda req, use_map: False)
        return null_draws(jax.random.key(7), 128, 32, 21, **kw)


@pytest.mark.parametrize("storage,stats", [("q4_1", "all"), ("bfloat16", "elementwise"),
                                           ("q5_0", "all")])
def test_apart_draws_have_the_inlined_bytes(monkeypatch, storage, stats):
    if jax.default_backend() != "cpu":
        pytest.skip("the apart path is the CPU loop's")
    calls = []
    real = null_elements.draw_apart
    monkeypatch.setattr(null_elements, "draw_apart",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    kw = dict(stats=stats, storage=storage, return_lambda=stats == "all", chunk_size=8)
    apart = _draws(monkeypatch, False, **kw)
    assert calls, "the apart path was not taken"
    together = _draws(monkeypatch, True, **kw)
    assert list(apart) == list(together)  # the same variables in the same order
    assert "k.weibull_k" in apart and "qk.excess_kurtosis" in apart
    for k in together:
        assert apart[k].dtype == together[k].dtype and apart[k].shape == together[k].shape, k
        assert apart[k].tobytes() == together[k].tobytes(), k


def test_one_head_a_call_has_the_bytes_of_several():
    rng = np.random.default_rng(3)
    wq, wk = (rng.standard_normal((3, 32, 128)).astype(np.float32) for _ in range(2))
    scale = np.full(3, 1.5, np.float32)
    fn = compiled(("q",), "q4_0")
    st3, h3 = fn(wq, wk, scale)
    for i in range(3):
        st1, h1 = fn(wq[i:i + 1], wk[i:i + 1], scale[i:i + 1])
        assert np.asarray(h1)[0].tobytes() == np.asarray(h3)[i].tobytes()
        for k in st3:
            assert np.asarray(st1[k])[0].tobytes() == np.asarray(st3[k])[i].tobytes(), k
    from rmtbase.stats import element_stats

    rows = element_stats(wk, storage="q4_0")
    one = factor_elements(wk, "q4_0")
    for k in rows:
        assert np.asarray(rows[k]).tobytes() == one[k].tobytes(), k


@pytest.mark.parametrize("storage", ["float32", "fp8_e4m3", "fp8_e4m3_channel"])
def test_float32_and_fp8_keep_the_inlined_program(monkeypatch, storage):
    """Their factors' statistics differ in the last bits between the two programs
    (null_elements.apart's docstring), so these tables keep the inlined draw program."""
    called = []
    monkeypatch.setattr(null_elements, "draw_apart", lambda *a, **k: called.append(1))
    out = null_draws(jax.random.key(7), 128, 32, 3, stats="elementwise", storage=storage)
    assert not called and "k.std" in out
