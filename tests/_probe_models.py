"""Tiny random-init models with tokenizers for the probe tests (no network).

:func:`bert` saves a 2-layer BERT (d = 32, 4 heads) with MiniLM's WordPiece tokenizer files
copied beside it (so ``[CLS] … [SEP]`` around each window); :func:`llama` saves a 2-layer
Llama with grouped-query attention (4 query heads, 2 key/value heads) and a word-level
tokenizer built here that adds a BOS before each sequence.
"""

from __future__ import annotations

import shutil
from pathlib import Path

TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife. However little known the feelings or views of "
        "such a man may be on his first entering a neighbourhood, this truth is so well fixed "
        "in the minds of the surrounding families, that he is considered the rightful property "
        "of some one or other of their daughters.")

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                    "special_tokens_map.json")


def bert(folder, *, seed=0):
    import torch
    import transformers as tf

    from rmtbase.models import default_model_path

    torch.manual_seed(seed)
    cfg = tf.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=64)
    tf.BertModel(cfg).save_pretrained(folder)
    src = default_model_path()
    for f in _TOKENIZER_FILES:
        shutil.copy(src / f, Path(folder) / f)
    return Path(folder)


def word_tokenizer(folder):
    """A word-level fast tokenizer over the words of :data:`TEXT`, BOS ``<s>`` prepended."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = sorted(set(TEXT.replace(",", " , ").replace(".", " . ").split()))
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation()])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    fast.save_pretrained(folder)
    return len(vocab)


def llama(folder, *, seed=0):
    import torch
    import transformers as tf

    Path(folder).mkdir(parents=True, exist_ok=True)
    n_vocab = word_tokenizer(folder)
    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(vocab_size=n_vocab, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
    tf.LlamaModel(cfg).save_pretrained(folder)
    return Path(folder)
