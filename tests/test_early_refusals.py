"""Every option's preconditions are checked before the score starts.

The red team's cases: ``score <GGUF without tokenizer> --probe`` was refused only after the
whole score, ``score <GGUF with q/k only> --ov`` only after the whole QK pass and with the
Hugging Face tensor name (``model.layers.0.self_attn.v_proj.weight``) where the file says
``blk.0.attn_v.weight``. Here the scoring functions are replaced by ones that fail the test if
called, so a refusal must come before any scoring (no timing is asserted); the refusal is one
line, exit 2, names the GGUF file's own tensor name and leaves no output folder.
"""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.cli import main
from rmtbase.errors import ModelError

gguf = pytest.importorskip("gguf")
import _gguf  # noqa: E402
from _no_scoring import forbid  # noqa: E402

D, HEADS, KV = 64, 4, 2
D_H = D // HEADS


def _layers(parts, n_layers=2, seed=0):
    rng = np.random.default_rng(seed)
    rows = {"q": HEADS * D_H, "k": KV * D_H, "v": KV * D_H}
    out = []
    for _ in range(n_layers):
        layer = {}
        for p in parts:
            shape = (D, HEADS * D_H) if p == "o" else (rows[p], D)
            layer[p] = rng.normal(0.0, 0.02, size=shape)
        out.append(layer)
    return out


@pytest.fixture(scope="module")
def qk_only(tmp_path_factory):
    """A llama GGUF whose layers hold W_Q and W_K only (no attn_v, attn_output)."""
    path = tmp_path_factory.mktemp("gguf") / "qk.gguf"
    return _gguf.write_llama(path, _layers("qk"), d=D, n_heads=HEADS, n_kv_heads=KV)


@pytest.fixture(scope="module")
def no_tokenizer(tmp_path_factory):
    """A complete (q, k, v, o) llama GGUF with no tokenizer in its header."""
    path = tmp_path_factory.mktemp("gguf") / "notok.gguf"
    return _gguf.write_llama(path, _layers("qkvo"), d=D, n_heads=HEADS, n_kv_heads=KV)


def _with_tokenizer(path):
    """A complete llama GGUF that carries a (tiny, gpt2-kind) tokenizer in its header."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_embedding_length(D)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_context_length(64)
    w.add_rope_dimension_count(D_H)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "ab"])
    w.add_token_merges(["a b"])
    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output"}
    for i, layer in enumerate(_layers("qkvo")):
        for p, m in layer.items():
            w.add_tensor(f"blk.{i}.{names[p]}.weight", np.asarray(m, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def no_scoring(monkeypatch):
    """Scoring (QK, OV, a null table) fails the test if it starts."""
    import rmtbase.baseline.cache as cache
    import rmtbase.probe as probe
    import rmtbase.scoring.ov as ov
    import rmtbase.scoring.score as score

    forbid(monkeypatch, (score, "score_model"), (score, "score_heads"),
           (ov, "score_circuits"), (cache, "null_table"), (probe, "probe_model"))


def _refused(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("rmtbase: error: ")
    return err[0]


def test_ov_on_a_qk_only_gguf_is_refused_before_the_qk_pass(qk_only, tmp_path, capsys,
                                                             no_scoring):
    out = tmp_path / "out"
    line = _refused(capsys, ["score", str(qk_only), "--ov", "--out", str(out), "--quiet"])
    assert "'blk.0.attn_v.weight'" in line  # the file's own name
    assert "v_proj" not in line and "self_attn" not in line
    assert "2 of its 2 layers" in line and "OV circuit" in line
    assert not out.exists()


def test_probe_on_a_gguf_without_tokenizer_is_refused_before_the_score(no_tokenizer, tmp_path,
                                                                       capsys, no_scoring):
    out = tmp_path / "out"
    line = _refused(capsys, ["score", str(no_tokenizer), "--probe", "--out", str(out),
                             "--quiet"])
    assert "no tokenizer" in line and "tokenizer.ggml" in line
    assert not out.exists()


def test_probe_memory_is_checked_before_the_score(tmp_path, capsys, monkeypatch, no_scoring):
    """The probe's estimate for one window of MiniLM (6 layers x 12 heads x 256^2 float32 and
    3 layers' working arrays: 27 MiB) against a 1 MiB limit: refused before the score."""
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "1MiB")
    out = tmp_path / "out"
    line = _refused(capsys, ["score", "--probe", "--out", str(out), "--quiet"])
    assert "RMTBASE_MEMORY_LIMIT" in line and "--window" in line
    assert not out.exists()


def test_the_checks_pass_a_complete_file(no_tokenizer, tmp_path):
    """The controls: a file with V/O passes the --ov check, one with a tokenizer the probe's
    tokenizer check (so neither check refuses everything)."""
    from rmtbase.models.gguf import check_gguf_tokenizer
    from rmtbase.scoring.ov import check_ov

    check_ov(str(no_tokenizer), None, False)
    check_gguf_tokenizer(_with_tokenizer(tmp_path / "tok.gguf"))
    with pytest.raises(ModelError, match="no tokenizer"):
        check_gguf_tokenizer(no_tokenizer)


def test_score_circuits_checks_v_and_o_before_qk(qk_only, monkeypatch):
    """The library path (rmtbase.scoring.ov.score_circuits) refuses before its QK pass too."""
    import rmtbase.scoring.score as score
    from rmtbase.scoring.ov import score_circuits

    def scored(*a, **k):
        raise AssertionError("QK scored before the refusal")

    monkeypatch.setattr(score, "score_model", scored)
    with pytest.raises(ModelError, match=r"'blk\.0\.attn_v\.weight' not found"):
        score_circuits(str(qk_only))


def test_a_missing_gguf_tensor_read_names_the_file_name(qk_only):
    """A read of an absent tensor names it as the GGUF file does."""
    from rmtbase.models.loading import open_model

    _, _, weights = open_model(str(qk_only), None, False)
    try:
        with pytest.raises(ModelError, match=r"'blk\.1\.attn_output\.weight' not found"):
            weights.get("model.layers.1.self_attn.o_proj.weight")
    finally:
        weights.close()
