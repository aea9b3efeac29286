"""Every bad value is refused before any work, in one line, by the Python API and the CLI
alike (:mod:`rmtbase.checks`): types checked, not coerced (``draws=2.7`` ran 2 draws,
``seed=1.5`` ran seed 1, ``seed=-1`` was accepted, ``alpha="0.05"`` read as 0.05); ``--draws``
below the omnibus calibration's 20 (it passed the CLI's check and ended in a traceback); an
``--out`` that is a file refused at start-up speed, before the heavy imports; a ``--text``
larger than the probe reads; a head with an all-zero factor named (``L<l>H<h>``), without a
raw numpy warning; a model the probe cannot read refused without first saying how it would
be probed; a NaN in an MLP weight refused before the score when the probe or the circuit
search will run the whole model (before, after the heads' score and the composition). Scoring
is replaced by a function that fails the test if called
(:mod:`_no_scoring`), so each refusal comes before any scoring."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from _no_scoring import forbid

from rmtbase.checks import MIN_NULL_DRAWS, check_int, check_probability, check_seed
from rmtbase.cli import main
from rmtbase.errors import InputError
from rmtbase.scoring.score import score_model  # the real one: no_scoring replaces it

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def no_scoring(monkeypatch):
    """Reading a model, scoring it or drawing a null fails the test."""
    import rmtbase.baseline.cache as cache
    import rmtbase.models as models
    import rmtbase.probe as probe
    import rmtbase.scoring.score as score

    forbid(monkeypatch, (score, "score_model"), (score, "score_heads"), (models, "model_info"),
           (models, "load_heads"), (cache, "null_table"), (probe, "probe_model"))


def _refused(capsys, argv) -> str:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("rmtbase: error: ")
    return err[0]


# ------------------------------------------------------------------ the shared checks


def test_the_least_draws_are_what_the_omnibus_calibration_needs():
    import numpy as np

    from rmtbase.decision.omnibus import calibrated_p
    from rmtbase.decision.tails import MIN_EXCEEDANCES

    assert MIN_NULL_DRAWS == 2 * MIN_EXCEEDANCES
    null = np.arange(MIN_NULL_DRAWS, dtype=float)
    calibrated_p([1.0], null)  # enough
    with pytest.raises(ValueError, match="at least"):
        calibrated_p([1.0], null[1:])


@pytest.mark.parametrize("value", [2.7, 2.0, True, "3", None, 19])
def test_check_int_refuses_what_is_not_an_integer_or_too_small(value):
    with pytest.raises(InputError, match=r"^draws must be"):
        check_int("draws", value, minimum=20)


def test_check_int_takes_integers_numpy_included():
    import numpy as np

    assert check_int("k", np.int64(3), minimum=1) == 3 and type(check_int("k", 3)) is int
    with pytest.raises(InputError, match="at most 5"):
        check_int("k", 6, maximum=5)


@pytest.mark.parametrize("value", [1.5, -1, 2**32, 2**70, "a", True, None])
def test_check_seed_refuses(value):
    with pytest.raises(InputError, match=r"^seed must be an integer in \[0, 2\*\*32\)"):
        check_seed(value)


@pytest.mark.parametrize("value", ["0.05", 0, 1, 1.0, -0.1, float("nan"), True, None])
def test_check_probability_refuses(value):
    with pytest.raises(InputError, match=r"^alpha must be a number in \(0, 1\)"):
        check_probability("alpha", value)


def test_accepted_values_come_back_as_plain_python_types():
    import numpy as np

    assert check_seed(np.uint32(7)) == 7 and check_seed(2**32 - 1) == 2**32 - 1
    assert check_probability("alpha", np.float32(0.25)) == 0.25
    assert type(check_probability("alpha", np.float64(0.05))) is float


# ------------------------------------------------------------------ the Python API


@pytest.mark.parametrize("kwargs, name", [
    ({"draws": 2.7}, "draws"), ({"draws": 19}, "draws"), ({"draws": True}, "draws"),
    ({"seed": 1.5}, "seed"), ({"seed": -1}, "seed"), ({"seed": 2**70}, "seed"),
    ({"seed": "a"}, "seed"), ({"seed": True}, "seed"),
    ({"alpha": "0.05"}, "alpha"), ({"alpha": 1.0}, "alpha"),
    ({"max_draws": 2.5}, "max_draws"), ({"element_draws": 1.5}, "element_draws"),
    ({"spectrum_draws": 2.5}, "spectrum_draws"),
])
def test_score_model_refuses_bad_values_before_reading_the_model(kwargs, name, no_scoring):
    with pytest.raises(InputError, match=rf"^{name} must be") as info:
        score_model("no/such/model", **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs, name", [
    ({"draws": 19}, "draws"), ({"draws": 2.7}, "draws"), ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"), ({"alpha": "0.05"}, "alpha"),
])
def test_score_components_refuses_bad_values_before_reading_the_model(kwargs, name,
                                                                     no_scoring):
    from rmtbase.scoring.matrices.components import score_components

    with pytest.raises(InputError, match=rf"^{name} must be"):
        score_components("no/such/model", **kwargs)


def test_score_model_draws_minimum_is_stated(no_scoring):
    with pytest.raises(InputError, match=f"at least {MIN_NULL_DRAWS} .*omnibus calibration"):
        score_model("no/such/model", draws=5)


# ------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("draws", [2, 19])
def test_cli_draws_below_the_calibration_minimum(draws, tmp_path, capsys, no_scoring):
    line = _refused(capsys, ["score", "--draws", draws, "--out", tmp_path / "o"])
    assert f"--draws must be at least {MIN_NULL_DRAWS}" in line and f"got {draws}" in line
    line = _refused(capsys, ["score", "--components", "q", "--component-draws", draws,
                             "--out", tmp_path / "o"])
    assert f"--component-draws must be at least {MIN_NULL_DRAWS}" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, needle", [
    (["--seed", "-1"], "--seed must be an integer in [0, 2**32)"),
    (["--seed", str(2**32)], "--seed must be an integer in [0, 2**32)"),
    (["--alpha", "nan"], "--alpha must be in (0, 1)"),
])
def test_cli_single_values(argv, needle, tmp_path, capsys, no_scoring):
    assert needle in _refused(capsys, ["score", *argv, "--out", tmp_path / "o"])


def _startup(argv) -> tuple[int, str, list]:
    """Run the ``rmtbase`` executable's entry (:func:`rmtbase.cli.console_main`) in a fresh
    interpreter: (exit status, stderr, the heavy modules it imported)."""
    code = ("import sys\n"
            f"sys.argv = ['rmtbase', *{[str(a) for a in argv]!r}]\n"
            "from rmtbase.cli import console_main\n"
            "rc = console_main()\n"
            "heavy = [m for m in ('numpy', 'scipy', 'xarray', 'jax', 'torch') "
            "if m in sys.modules]\n"
            "print(rc, *heavy)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=SRC,
                                             RMTBASE_NO_JIT_CACHE="1"))
    rc, *heavy = r.stdout.split()
    return int(rc), r.stderr, heavy


@pytest.mark.parametrize("command", ["score", "probe", "compare", "combine"])
def test_an_out_that_is_a_file_is_refused_at_start_up(command, tmp_path):
    """Refused before the command's heavy imports (numpy, JAX, xarray: about 1 CPU-s, 4 s
    wall on 2 loaded cores), as fast as ``rmtbase --help``."""
    f = tmp_path / "a-file"
    f.write_text("x")
    entries = [tmp_path, tmp_path] if command in ("compare", "combine") else []
    rc, err, heavy = _startup([command, *entries, "--out", f])
    assert rc == 2 and err == f"rmtbase: error: {f} exists and is not a folder; give a folder " \
                              "for the output\n"
    assert heavy == []


def test_draws_and_seed_are_refused_at_start_up():
    rc, err, heavy = _startup(["score", "--draws", "5"])
    assert rc == 2 and err.count("\n") == 1 and "at least 20" in err and heavy == []
    rc, err, heavy = _startup(["score", "--seed", "-1"])
    assert rc == 2 and err.count("\n") == 1 and "--seed" in err and heavy == []


def test_a_text_larger_than_the_probe_reads_is_refused_unread(tmp_path, capsys, no_scoring):
    from rmtbase.probe.text import MAX_TEXT_BYTES, read_text

    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(MAX_TEXT_BYTES + 1)  # sparse: its size is what is refused
    line = _refused(capsys, ["score", "--probe", "--text", big, "--out", tmp_path / "o"])
    assert f"{MAX_TEXT_BYTES + 1:,} bytes" in line and f"at most {MAX_TEXT_BYTES:,}" in line
    small = tmp_path / "small.txt"
    small.write_text("one two three four five six")
    assert read_text(small).text.startswith("one")
    with pytest.raises(InputError, match="at most 10 "):
        read_text(small, max_bytes=10)
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ the model's heads


def _gpt2(folder, edit=None, n_positions=32):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_embd=64, n_head=4, n_layer=2, vocab_size=50, n_positions=n_positions,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    if edit is not None:
        with torch.no_grad():
            edit(model)
    model.save_pretrained(folder)
    return folder


def test_a_zero_head_is_named_without_a_numpy_warning(tmp_path, capsys, module_cache):
    """Head 2 of layer 0 has W_Q = 0 (the first 64 columns of c_attn are W_Q, 16 per head):
    refused naming L0H2, before the layer is measured; before, a raw 'invalid value
    encountered in divide' and then 'a head has zero ... entries' without its name."""

    def zero(model):
        model.transformer.h[0].attn.c_attn.weight[:, 32:48] = 0

    folder = _gpt2(tmp_path / "zero", zero)
    capsys.readouterr()  # transformers' "Writing model shards" bar
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        line = _refused(capsys, ["score", folder, "--stats", "spectral", "--no-figures",
                                 "--quiet", "--out", tmp_path / "o"])
    assert "head L0H2 of" in line and "all zero" in line
    assert not (tmp_path / "o").exists()


def test_a_model_the_probe_cannot_read_is_refused_in_one_line(tmp_path, capsys, no_scoring):
    """A BERT folder without tokenizer files, ``--composition --probe``: one line (before,
    first 'heads are labelled from the text probe', then 'needs a tokenizer')."""
    import transformers as tf

    cfg = tf.BertConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                        intermediate_size=128, vocab_size=50, max_position_embeddings=128)
    tf.BertModel(cfg).save_pretrained(tmp_path / "bert")
    capsys.readouterr()
    line = _refused(capsys, ["score", tmp_path / "bert", "--composition", "--probe",
                             "--out", tmp_path / "o"])
    assert "--probe needs a tokenizer" in line


def test_a_nan_the_score_never_reads_is_refused_before_the_score_with_probe(tmp_path, capsys,
                                                                           no_scoring):
    """NaN in layer 0's MLP (c_fc), ``--composition --probe``: the circuit search runs the
    whole model; refused naming the tensor before any scoring."""

    def nan(model):
        model.transformer.h[0].mlp.c_fc.weight[0, 0] = float("nan")

    folder = _gpt2(tmp_path / "nan", nan, n_positions=128)
    capsys.readouterr()
    line = _refused(capsys, ["score", folder, "--composition", "--probe", "--quiet",
                             "--out", tmp_path / "o"])
    assert "'transformer.h.0.mlp.c_fc.weight'" in line and "non-finite" in line


def test_ov_names_a_head_with_a_zero_value_factor_before_the_qk_pass(tmp_path, capsys,
                                                                     no_scoring):
    """W_V of head 1 of layer 0 is zero (c_attn's columns 2d + d_h ... 2d + 2 d_h): ``--ov``
    refuses naming L0H1 and W_V/W_O before any scoring (before, after the whole QK pass, as
    'W_Q/W_K' would be named)."""

    def zero_v(model):
        model.transformer.h[0].attn.c_attn.weight[:, 128 + 16:128 + 32] = 0

    folder = _gpt2(tmp_path / "zv", zero_v)
    capsys.readouterr()
    line = _refused(capsys, ["score", folder, "--ov", "--quiet", "--out", tmp_path / "o"])
    assert "head L0H1 of" in line and "all zero (W_O or W_V)" in line
