"""What the model reads of a task: text prompts as its tokenizer reads them by default
(:func:`.taskfile.encode_prompt`), ids as given; :func:`describe` says which and on how many
pairs both prompts begin with the model's BOS (summary.json's ``input``, docs/tasks.md)."""

from __future__ import annotations

import numpy as np

#: The text whose tokenisation shows what a tokenizer adds before a text.
PROBE = "x"


def _bos_id(tokenizer, config) -> int | None:
    """The model's BOS id, its tokenizer's else its config's, or None."""
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    if bos is None and config is not None:
        bos = getattr(config, "bos_token_id", None)
        if bos is None and hasattr(config, "get_text_config"):
            bos = getattr(config.get_text_config(), "bos_token_id", None)
    return int(bos) if isinstance(bos, (int, np.integer)) and not isinstance(bos, bool) else None


def _token(tokenizer, i: int) -> str | None:
    try:
        return str(tokenizer.convert_ids_to_tokens(int(i)))
    except (AttributeError, TypeError, ValueError, IndexError, KeyError):
        return None


def prepended(tokenizer) -> list[int]:
    """The ids ``tokenizer`` puts before a text by default (``[2]`` for Gemma's ``<bos>``)."""
    ids = list(tokenizer(PROBE)["input_ids"])
    bare = list(tokenizer(PROBE, add_special_tokens=False)["input_ids"])
    return ids[:max(0, len(ids) - len(bare))]


def describe(task, records, tokenizer, config) -> dict:
    """summary.json's ``input`` (docs/tasks.md); ``records`` None: a task built from ids,
    ``tokenizer`` None: none was read."""
    kinds = {isinstance(r[f], str) for r in records for f in ("clean", "corrupted")} \
        if records else {False}
    prompts = {frozenset({True}): "text", frozenset({False}): "ids"}.get(
        frozenset(kinds), "text and ids")
    bos = _bos_id(tokenizer, config)
    first = 0 if bos is None else int(((task.clean[:, 0] == bos)
                                       & (task.corrupted[:, 0] == bos)).sum())
    pre = None
    if tokenizer is not None:
        pre = [_token(tokenizer, i) or str(i) for i in prepended(tokenizer)]
    return {"prompts": prompts, "bos_id": bos,
            "bos_token": None if bos is None or tokenizer is None else _token(tokenizer, bos),
            "tokenizer_prepends": pre, "first_is_bos": first, "pairs": int(task.n)}


def input_line(d: dict) -> str:
    """``input: …``, :func:`describe`'s ``d`` in one line."""
    how = {"text": "texts as the model's tokenizer reads them by default",
           "ids": "token ids as given (nothing prepended)",
           "text and ids": "texts as the model's tokenizer reads them by default, token ids "
                           "as given"}[d["prompts"]]
    pre = d.get("tokenizer_prepends")
    if pre is not None and d["prompts"] != "ids":
        how += f" (it prepends {' '.join(pre)})" if pre else " (it prepends nothing)"
    if d["bos_id"] is None:
        bos = "the model names no BOS token"
    else:
        name = f"{d['bos_token']} (id {d['bos_id']})" if d.get("bos_token") else \
            f"id {d['bos_id']}"
        bos = (f"both prompts begin with the model's BOS {name} on {d['first_is_bos']} of "
               f"{d['pairs']} pairs")
    dup = d.get("duplicates") or 0
    return f"input: {how}; {bos}" + (f"; {dup} repeated pairs counted once" if dup else "")


__all__ = ["PROBE", "describe", "input_line", "prepended"]
