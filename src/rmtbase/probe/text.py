"""The probe's text: the shipped default prose, a user's file, and the cutting into windows.

:func:`default_text`: 5,321 words of public-domain English (``data/SOURCES.md``).
:func:`windows` tokenizes without special tokens and cuts consecutive chunks of ``window −
n_special`` tokens, each given the tokenizer's special tokens; the last is shorter (nothing
padded or dropped). A long text is tokenized in pieces of about :data:`TOKENIZE_CHARS`
characters cut at a line break or space."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError, ModelError

#: Default window length in tokens (special tokens included), capped by the model's
#: ``max_position_embeddings``: the issue's probe used 256, MiniLM was trained on 128–256.
DEFAULT_WINDOW = 256
DEFAULT_TEXT = "default_text.txt"
#: Characters tokenized at once (module docstring): ~200 MB of a fast tokenizer's memory.
TOKENIZE_CHARS = 1 << 20
#: The largest text file :func:`read_text` reads: 1 MiB, about 35 times the default text
#: (about 250,000 tokens; every one passes through the model once, so the probe's time grows
#: with it). A larger file is refused from its size, before it is read.
MAX_TEXT_BYTES = 1 << 20


@dataclass(frozen=True)
class Text:
    """A probe text: its content, SHA-256 of its UTF-8 bytes and a short name."""

    text: str
    sha256: str
    name: str


def default_text() -> Text:
    """The shipped public-domain English text (module docstring)."""
    raw = resources.files(__package__).joinpath("data", DEFAULT_TEXT).read_bytes()
    return Text(raw.decode("utf-8"), hashlib.sha256(raw).hexdigest(), f"rmtbase:{DEFAULT_TEXT}")


def read_text(path=None, max_bytes: int = MAX_TEXT_BYTES) -> Text:
    """The text of the UTF-8 file ``path`` (None: :func:`default_text`); one-line
    :class:`InputError` for a missing, unreadable, non-UTF-8 or empty file, or one larger than
    ``max_bytes`` (:data:`MAX_TEXT_BYTES`; checked from its size, before it is read)."""
    if path is None:
        return default_text()
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"no such text file: {path}")
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if size > max_bytes:
        raise _too_long(path, size, max_bytes)
    try:
        with p.open("rb") as f:  # bounded: a file that grew since its size was read
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(raw) > max_bytes:
        raise _too_long(path, len(raw), max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start})") from exc
    if not text.strip():
        raise InputError(f"{path} holds no text")
    return Text(text, hashlib.sha256(raw).hexdigest(), p.name)


def _too_long(path, size: int, max_bytes: int) -> InputError:
    return InputError(f"{path} holds {size:,} bytes of text; the probe reads at most "
                      f"{max_bytes:,} ({max_bytes / 2**20:g} MiB; every token passes through "
                      "the model): give a shorter text")


def special_template(tokenizer) -> tuple[list[int], list[int]]:
    """(prefix, suffix): the token ids the tokenizer adds before and after one sequence."""
    probe = "hello"
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe)["input_ids"])
    n = len(bare)
    for start in range(len(full) - n + 1):
        if full[start:start + n] == bare:
            return full[:start], full[start + n:]
    raise ModelError("cannot tell which special tokens the tokenizer adds around a sequence")


def _pieces(text: str, size: int):
    """``text`` in consecutive pieces of about ``size`` characters, each cut before a line
    break, else before a space, else (a text with neither) at ``size``."""
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            cut = text.rfind("\n", start + size // 2, end)
            if cut <= start:
                cut = text.rfind(" ", start + size // 2, end)
            if cut > start:
                end = cut
        yield text[start:end]
        start = end


def tokenize(tokenizer, text: str, size: int | None = None) -> np.ndarray:
    """Token ids (int32) of ``text`` without special tokens, tokenized in bounded pieces
    (:data:`TOKENIZE_CHARS`, module docstring)."""
    size = int(size or TOKENIZE_CHARS)
    parts = [np.asarray(tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"],
                        dtype=np.int64) for piece in _pieces(text, size)]
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return ids.astype(np.int32) if ids.size == 0 or ids.max() < 2**31 else ids


def windows(tokenizer, text: str, window: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(input_ids (T,), content (T,) bool), …]``: ``text`` cut into windows of at most
    ``window`` tokens, special tokens included (module docstring)."""
    prefix, suffix = special_template(tokenizer)
    n_text = int(window) - len(prefix) - len(suffix)
    if n_text < 2:
        raise InputError(f"window {window} leaves fewer than 2 text tokens beside the "
                         f"{len(prefix) + len(suffix)} special tokens")
    ids = tokenize(tokenizer, text)
    if len(ids) < 2:
        raise InputError(f"the text has {len(ids)} token(s); the probe needs at least 2")
    out = []
    for s in range(0, len(ids), n_text):
        chunk = ids[s:s + n_text].tolist()
        w = np.array(prefix + chunk + suffix, dtype=np.int64)
        content = np.zeros(w.size, dtype=bool)
        content[len(prefix):len(prefix) + len(chunk)] = True
        out.append((w, content))
    return out


__all__ = ["DEFAULT_WINDOW", "MAX_TEXT_BYTES", "TOKENIZE_CHARS", "Text", "default_text", "read_text",
           "special_template", "tokenize", "windows"]
