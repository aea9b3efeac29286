"""The token sequences a circuit is measured on: repeated random tokens (the standard induction
test) or equal-length windows of the probe's text.

**Repeated random tokens** (:func:`repeated_tokens`) follow TransformerLens'
``generate_repeated_tokens`` (ARENA "Intro to mech interp", 1.2, "Finding induction heads"):
each sequence is a prefix (the model's BOS id, when its config names one inside the vocabulary) followed by ``n``
tokens drawn uniformly from ``[0, vocab_size)`` and then the same ``n`` tokens again, so
``T = 1 + 2n`` (``2n`` without BOS). On the second half an induction head attends to the
token after the query's earlier occurrence, a previous-token head to ``i − 1``. The draws use
an explicit seed (``numpy.random.default_rng(seed)``), or a ``numpy.random.Generator``; no
global state. The BOS position is not content (``content[0] = False``), as the probe treats
special tokens (:mod:`rmtbase.probe.behaviour`).

**Text windows** (:func:`text_sequences`) are :func:`rmtbase.probe.text.windows` of the
probe's text, the full-length ones only (the shorter last window is dropped so that every
sequence has one length and the sequences batch; said in ``description``).

:attr:`Sequences.source` is ``"repeated_random_tokens"`` or ``"text"``, the value of the
``probe_source`` attr of every output built on them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

#: Random tokens per half (ARENA's and TransformerLens' tutorials use 50) and sequences by
#: default (ARENA uses 10; 16 gives a drop's se ~0.015 on SmolLM2's induction heads).
DEFAULT_HALF = 50
DEFAULT_SEQUENCES = 16
SOURCES = ("text", "repeated_random_tokens")


@dataclass(frozen=True)
class Sequences:
    """``ids`` ``(N, T)`` int64 token ids, ``content`` ``(T,)`` bool (True on text tokens, the
    same for every sequence), ``source`` (one of :data:`SOURCES`), ``description`` (one line
    for the output's attrs)."""

    ids: np.ndarray
    content: np.ndarray
    source: str
    description: str

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


def repeated_tokens(vocab_size: int, n: int, batch: int, *, seed=0,
                    bos_token_id: int | None = None) -> np.ndarray:
    """``(batch, [1 +] 2n)`` int64: [BOS,] r_1 … r_n, r_1 … r_n with r uniform on
    ``[0, vocab_size)`` (module docstring). ``seed``: an int or a ``numpy.random.Generator``."""
    for name, v in (("vocab_size", vocab_size), ("n", n), ("batch", batch)):
        if int(v) < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(int(seed))
    half = rng.integers(0, int(vocab_size), size=(int(batch), int(n)), dtype=np.int64)
    parts = [half, half]
    if bos_token_id is not None:
        parts.insert(0, np.full((int(batch), 1), int(bos_token_id), dtype=np.int64))
    return np.concatenate(parts, axis=1)


def _config_int(config, *names):
    for name in names:
        v = getattr(config, name, None)
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if v is not None:
            return int(v)
    return None


def repeated_sequences(config, *, n: int = DEFAULT_HALF, batch: int = DEFAULT_SEQUENCES,
                       seed=0) -> Sequences:
    """:func:`repeated_tokens` with the vocabulary size and BOS id of a transformers
    ``config`` (``vocab_size``; ``bos_token_id`` when set); one-line :class:`InputError` when
    the sequence would not fit ``max_position_embeddings`` / ``n_positions``."""
    vocab = _config_int(config, "vocab_size")
    if vocab is None:
        raise InputError("the model's config has no vocab_size: cannot draw random tokens")
    bos = _config_int(config, "bos_token_id")
    if bos is not None and not 0 <= bos < vocab:
        bos = None  # a config's default BOS outside a small vocabulary: no prefix
    ids = repeated_tokens(vocab, n, batch, seed=seed, bos_token_id=bos)
    cap = _config_int(config, "max_position_embeddings", "n_positions")
    if cap is not None and ids.shape[1] > cap:
        raise InputError(f"repeated sequences of {ids.shape[1]} tokens exceed the model's "
                         f"{cap} positions; use n <= {(cap - (bos is not None)) // 2}")
    content = np.ones(ids.shape[1], dtype=bool)
    if bos is not None:
        content[0] = False
    seed_text = "a Generator" if isinstance(seed, np.random.Generator) else f"seed {int(seed)}"
    desc = (f"{ids.shape[0]} sequences of {'BOS + ' if bos is not None else ''}{n} uniform "
            f"random tokens of {vocab} repeated once ({ids.shape[1]} tokens; {seed_text}; "
            "TransformerLens generate_repeated_tokens)")
    return Sequences(ids, content, "repeated_random_tokens", desc)


def text_sequences(tokenizer, text: str, window: int, *, max_sequences: int | None = None,
                   min_sequences: int = 1, name: str = "the probe's text") -> Sequences:
    """The full-length windows of ``text`` (:func:`rmtbase.probe.text.windows`), at most
    ``max_sequences`` of them (``name``: the text's, in the description); one-line :class:`InputError` when the text has none. A text
    too short for ``min_sequences`` full windows of ``window`` tokens is cut into
    ``min_sequences`` shorter ones (an effect's se needs at least 2 sequences)."""
    from ..probe.text import special_template, tokenize, windows

    pre, suf = special_template(tokenizer)
    n_text = len(tokenize(tokenizer, text))
    if n_text < int(min_sequences) * (int(window) - len(pre) - len(suf)):
        window = n_text // int(min_sequences) + len(pre) + len(suf)
    wins = [(ids, c) for ids, c in windows(tokenizer, text, int(window)) if ids.size == window]
    if max_sequences is not None:
        wins = wins[: int(max_sequences)]
    if not wins:
        raise InputError(f"the text has no full window of {window} tokens; use a shorter "
                         "window or a longer text")
    content = wins[0][1]
    if any(not np.array_equal(c, content) for _, c in wins):
        raise InputError("the text's windows differ in where their special tokens are")
    ids = np.stack([np.asarray(i, dtype=np.int64) for i, _ in wins])
    desc = f"{ids.shape[0]} full windows of {window} tokens of {name}"
    return Sequences(ids, np.asarray(content, dtype=bool), "text", desc)


__all__ = ["DEFAULT_HALF", "DEFAULT_SEQUENCES", "SOURCES", "Sequences", "repeated_sequences",
           "repeated_tokens", "text_sequences"]
