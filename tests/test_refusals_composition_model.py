"""The circuit-search cases: ``find_circuits`` accepted another model's composition
when the layer and head counts matched (two random GPT-2s of one config: the per-head ‖W_OV‖
check allowed a log scatter of 0.2, theirs is 0.05), and its ``k`` and ``seed`` are checked as
types, not coerced (``k=2.5`` ran 2). The composition's per-head ‖W_QK‖_F and ‖W_OV‖_F are the
weights' fingerprint: two readers of one checkpoint agree to 6e-7 (every family below, in
float32), another model differs by percents."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rmtbase.errors import InputError


def _gpt2(seed: int):
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=50, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(cfg).eval()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two random GPT-2s of one config, and the composition of the first."""
    import rmtbase

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(tmp_path_factory.mktemp("cache")))
        a, b = _gpt2(0), _gpt2(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comp = rmtbase.composition(a, draws=20)
    return a, b, comp


@pytest.fixture
def no_search(monkeypatch):
    """The search's work (capturing the sequences) fails the test if it starts."""
    from rmtbase.circuits.head import run

    def forbidden(*a, **k):
        raise AssertionError("the search started")

    monkeypatch.setattr(run, "_captures", forbidden)


def test_another_models_composition_is_refused_before_the_search(models, no_search):
    from rmtbase.circuits import find_circuits

    a, b, comp = models
    with pytest.raises(InputError, match=r"^the composition is not this model's: \|W_(QK|OV)\| "
                                         r"of head L\dH\d") as info:
        find_circuits(b, comp, progress=False)
    assert "\n" not in str(info.value)


def test_the_composition_of_the_model_itself_passes_the_check(models):
    """The fingerprint of the model's own composition: every head within the tolerance (the
    readers agree to float rounding), and a copy with one head's W_V changed by 1 % is refused
    naming that head."""
    import torch

    from rmtbase.circuits.core.fingerprint import NORM_TOLERANCE, check_composition, head_norms
    from rmtbase.circuits.core.heads import HeadModel

    a, _, comp = models
    hm = HeadModel(a)
    check_composition(hm, comp)
    qk, ov = head_norms(hm)
    for name, got in (("qk_norm", qk), ("ov_norm", ov)):
        want = comp[name].transpose("layer", "head_to").values
        assert np.max(np.abs(np.log(want / got))) < 1e-5 < NORM_TOLERANCE
    edited = _gpt2(0)
    with torch.no_grad():  # c_attn columns 2d + 16 .. 2d + 32: W_V of head 1
        edited.transformer.h[1].attn.c_attn.weight[:, 128 + 16:128 + 32] *= 1.01
    with pytest.raises(InputError, match=r"\|W_OV\| of head L1H1 "):
        check_composition(HeadModel(edited), comp)


@pytest.mark.parametrize("kw, match", [
    ({"k": 2.5}, "k must be an integer"), ({"k": True}, "k must be an integer"),
    ({"k": 0}, "k must be at least 1"), ({"seed": 1.5}, "seed must be an integer"),
    ({"seed": -1}, r"seed must be an integer in \[0, 2\*\*32\)"),
    ({"seed": 2**70}, r"seed must be an integer in \[0, 2\*\*32\)"),
    ({"receivers_of_interest": [(1.5, 0)]}, r"receivers_of_interest: \(1.5, 0\) is not a pair"),
    ({"receivers_of_interest": [(1, True)]}, "receivers_of_interest: "),
])
def test_find_circuits_checks_k_and_seed_before_loading(models, monkeypatch, kw, match):
    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.core import loader as model

    def no_load(*a, **k):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(model, "load_model", no_load)
    with pytest.raises(InputError, match=match) as info:
        find_circuits("no/such/model", models[2], progress=False, **kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("argv, needle", [
    (["--k", "0"], "--k must be at least 1, got 0"),
    (["--draws", "1"], "--draws must be at least 20"),
    (["--draws", "0"], "--draws must be at least 20"),
    (["--draws", "19"], "--draws must be at least 20 (as rmtbase score --composition: fewer "
                        "leave every head pair undecided), got 19"),
])
def test_rmtbase_circuits_checks_k_and_draws_before_the_composition(argv, needle, tmp_path,
                                                                    capsys, monkeypatch):
    """``rmtbase circuits --k 0`` was refused by find_circuits after the whole composition and
    its null (18 s on the shared machine for a 2-layer model); ``--draws 0`` ran the default."""
    import rmtbase.scoring.composition.run as comp
    from rmtbase.cli import main

    def no_work(*a, **k):
        raise AssertionError("the composition started before the options were checked")

    monkeypatch.setattr(comp, "composition", no_work)
    _gpt2(0).save_pretrained(tmp_path / "g")
    capsys.readouterr()
    code = main(["circuits", str(tmp_path / "g"), *argv, "--quiet", "--out",
                 str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0], err


@pytest.mark.parametrize("draws", [2, 19])
def test_composition_refuses_draws_under_which_no_pair_can_be_flagged(draws):
    """``composition(draws=2)`` ran and left every pair open, and the circuit search's summary
    then said "no head pair differs from random"; now the same floor as ``rmtbase score``,
    before the model is read."""
    from rmtbase.scoring.composition.run import composition

    with pytest.raises(InputError, match=rf"^draws must be at least 20 .*got {draws}$"):
        composition("no/such/model", draws=draws)
