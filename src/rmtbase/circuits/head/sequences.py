"""The token sequences a circuit is measured on: repeated random tokens at one or several
repeat lengths, or equal-length windows of a text.

**Repeated random tokens** (:func:`repeated_tokens`; TransformerLens'
``generate_repeated_tokens``, ARENA 1.2): [BOS,] ``n`` random tokens, the same ``n`` again,
so ``T = 1 + 2n`` (``2n`` without BOS). :func:`repeated_sequences` draws the ``n``
**distinct** where the usable vocabulary (without the config's special ids) allows, so a
second-half query has one induction target. Seeds are explicit (``numpy.random.default_rng``).

**Repeat lengths** (:func:`repeat_lengths`): ``"auto"`` is :data:`AUTO_LENGTHS` where they
fit the positions and vocabulary, plus the longest that fits when below 50; never below
:data:`MIN_REPEAT` (at ``n < 3`` the induction target is the previous token). Each length gets
``max(DEFAULT_SEQUENCES, ⌈MIN_QUERIES / n⌉)`` sequences (at least :data:`MIN_QUERIES` queries).

**Text windows** (:func:`text_sequences`): a text's full-length windows."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..core.prompts import Sequences

#: Random tokens per half (ARENA's and TransformerLens' tutorials use 50) and sequences by
#: default (ARENA uses 10; 16 gives a drop's se ~0.015 on SmolLM2's induction heads).
DEFAULT_HALF = 50
DEFAULT_SEQUENCES = 16
SOURCES = ("text", "repeated_random_tokens")
#: ``repeat_lengths("auto")``: short repeats up to ARENA's 50 (module docstring).
AUTO_LENGTHS = (5, 10, 20, 50)
#: Shortest repeat that separates induction from previous-token attention (module docstring).
MIN_REPEAT = 3
#: Second-half queries every repeat length scores at least (sequences × n).
MIN_QUERIES = 200


def repeated_tokens(vocab_size: int, n: int, batch: int, *, seed=0,
                    bos_token_id: int | None = None, allowed=None) -> np.ndarray:
    """``(batch, [1 +] 2n)`` int64: [BOS,] r_1 … r_n, r_1 … r_n (module docstring).

    Tokens are uniform on ``[0, vocab_size)``, or, given ``allowed`` (an int array of usable
    ids), ``n`` **distinct** ids a half drawn from it (:class:`InputError` when it has fewer).
    seed: an int or a ``numpy.random.Generator``. bos_token_id: a prefix id, or None."""
    for name, v in (("vocab_size", vocab_size), ("n", n), ("batch", batch)):
        if int(v) < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}")
    rng = _rng(seed)
    if allowed is None:
        half = rng.integers(0, int(vocab_size), size=(int(batch), int(n)), dtype=np.int64)
    else:
        allowed = np.asarray(allowed, dtype=np.int64)
        if allowed.size < int(n):
            raise InputError(f"{allowed.size} usable token ids cannot give {n} distinct ones")
        half = np.stack([rng.choice(allowed, size=int(n), replace=False)
                         for _ in range(int(batch))]).astype(np.int64)
    parts = [half, half]
    if bos_token_id is not None:
        parts.insert(0, np.full((int(batch), 1), int(bos_token_id), dtype=np.int64))
    return np.concatenate(parts, axis=1)


def _rng(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (list, tuple)):
        return np.random.default_rng([int(x) for x in seed])
    return np.random.default_rng(int(seed))


def _seed_text(seed) -> str:
    if isinstance(seed, np.random.Generator):
        return "a Generator"
    if isinstance(seed, (list, tuple)):
        return f"seed {[int(x) for x in seed]}"
    return f"seed {int(seed)}"


def _config_int(config, *names):
    for name in names:
        v = getattr(config, name, None)
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if v is not None:
            return int(v)
    return None


def _special_ids(config) -> set[int]:
    out = set()
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id",
                 "decoder_start_token_id", "image_token_index", "image_token_id",
                 "boi_token_index", "eoi_token_index"):
        v = getattr(config, name, None)
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, int):
                out.add(int(x))
    return out


def usable_ids(config) -> np.ndarray:
    """The token ids random repeats are drawn from: ``[0, vocab_size)`` without the config's
    special ids (BOS, EOS, PAD, UNK, image tokens)."""
    vocab = _config_int(config, "vocab_size")
    if vocab is None:
        raise InputError("the model's config has no vocab_size: cannot draw random tokens")
    ids = np.arange(vocab, dtype=np.int64)
    special = [i for i in _special_ids(config) if 0 <= i < vocab]
    return np.setdiff1d(ids, special) if len(special) < vocab else ids


def _bos(config):
    vocab = _config_int(config, "vocab_size")
    bos = _config_int(config, "bos_token_id")
    return bos if bos is not None and vocab is not None and 0 <= bos < vocab else None


def positions(config) -> int | None:
    """The model's maximum sequence length from its config, or None when it names none."""
    return _config_int(config, "max_position_embeddings", "n_positions", "n_ctx",
                       "seq_length", "max_sequence_length")


def repeat_lengths(config, spec="auto") -> tuple[int, ...]:
    """The repeat lengths, ascending, that ``spec`` (``"auto"``, an int or ints ``>=
    MIN_REPEAT``) names for a model with ``config`` (module docstring); ``"auto"`` gives ``()``
    when none fits. :class:`InputError` for a bad spec or a length that does not fit the
    positions or the usable vocabulary."""
    cap = positions(config)
    n_ids = usable_ids(config).size
    prefix = _bos(config) is not None
    if isinstance(spec, str):
        if spec != "auto":
            raise InputError(f"repeat lengths must be 'auto' or integers, got {spec!r}")
        top = min(n_ids, max(AUTO_LENGTHS) if cap is None else (cap - prefix) // 2)
        out = [n for n in AUTO_LENGTHS if n <= top]
        if top >= MIN_REPEAT and (not out or out[-1] < top) and top < max(AUTO_LENGTHS):
            out.append(top)  # the longest repeat the context and vocabulary allow
        return tuple(out)
    vals = [spec] if isinstance(spec, (int, np.integer)) else list(spec)
    if not vals:
        raise InputError("repeat lengths: give at least one length or 'auto'")
    for n in vals:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise InputError(f"a repeat length must be an integer, got {n!r}")
        if n < MIN_REPEAT:
            raise InputError(f"a repeat length must be at least {MIN_REPEAT} (induction and "
                             f"previous-token attention coincide below it), got {n}")
        if cap is not None and 2 * n + prefix > cap:
            raise InputError(f"a repeat length of {n} needs {2 * n + prefix} positions; the "
                             f"model has {cap}")
        if n > n_ids:
            raise InputError(f"a repeat length of {n} needs {n} distinct token ids; the "
                             f"vocabulary has {n_ids} usable ones")
    return tuple(sorted({int(n) for n in vals}))


def sequences_for(n: int) -> int:
    """Sequences drawn at repeat length ``n``: ``max(DEFAULT_SEQUENCES, ⌈MIN_QUERIES/n⌉)``."""
    return max(DEFAULT_SEQUENCES, -(-MIN_QUERIES // int(n)))


def repeated_sequences(config, *, n: int = DEFAULT_HALF, batch: int = DEFAULT_SEQUENCES,
                       seed=0, distinct: bool = True) -> Sequences:
    """:func:`repeated_tokens` with a transformers ``config``'s vocabulary and BOS id.

    distinct: ``n`` distinct usable ids a half where the vocabulary has that many, else uniform
    draws (said in the description). One-line :class:`InputError` when it exceeds the positions."""
    vocab = _config_int(config, "vocab_size")
    if vocab is None:
        raise InputError("the model's config has no vocab_size: cannot draw random tokens")
    bos = _bos(config)
    allowed = usable_ids(config) if distinct else None
    if allowed is not None and allowed.size < int(n):
        allowed = None
    ids = repeated_tokens(vocab, n, batch, seed=seed, bos_token_id=bos, allowed=allowed)
    cap = positions(config)
    if cap is not None and ids.shape[1] > cap:
        raise InputError(f"repeated sequences of {ids.shape[1]} tokens exceed the model's "
                         f"{cap} positions; use n <= {(cap - (bos is not None)) // 2}")
    content = np.ones(ids.shape[1], dtype=bool)
    if bos is not None:
        content[0] = False
    seed_text = _seed_text(seed)
    how = (f"{n} distinct random tokens of {allowed.size} usable" if allowed is not None
           else f"{n} uniform random tokens of {vocab}")
    desc = (f"{ids.shape[0]} sequences of {'BOS + ' if bos is not None else ''}{how} repeated "
            f"once ({ids.shape[1]} tokens; {seed_text})")
    return Sequences(ids, content, "repeated_random_tokens", desc, repeat=int(n))


def length_sequences(config, lengths, *, seed=0) -> dict[int, Sequences]:
    """{n: :func:`repeated_sequences`} for each repeat length, :func:`sequences_for` (n)
    sequences each, drawn with seed ``[seed, n]`` (``numpy.random.default_rng``)."""
    return {int(n): repeated_sequences(config, n=int(n), batch=sequences_for(n),
                                       seed=[int(seed), int(n)])
            for n in lengths}


def text_sequences(tokenizer, text: str, window: int, *, max_sequences: int | None = None,
                   min_sequences: int = 1, name: str = "the probe's text") -> Sequences:
    """At most ``max_sequences`` full-length windows of ``text``
    (:func:`rmtbase.probe.text.windows`); a text too short for ``min_sequences`` windows is cut
    into ``min_sequences`` shorter ones; one-line :class:`InputError` when it has none."""
    from ...probe.text import special_template, tokenize, windows

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


__all__ = ["AUTO_LENGTHS", "DEFAULT_HALF", "DEFAULT_SEQUENCES", "MIN_QUERIES", "MIN_REPEAT",
           "SOURCES", "Sequences", "length_sequences", "positions", "repeat_lengths",
           "repeated_sequences", "repeated_tokens", "sequences_for", "text_sequences",
           "usable_ids"]
