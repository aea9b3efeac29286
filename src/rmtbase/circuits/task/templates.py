"""The shipped tasks (``rmtbase/data/tasks/``) and the templates they are drawn from.

- ``ioi``: indirect object identification (Wang et al. 2022, arXiv:2211.00593): "When Mary
  and John went to the store, John gave a drink to" → " Mary" (the indirect object), wrong
  " John" (the subject); the corrupted prompt has three other names (their "ABC"
  distribution), so no name in it is the answer.
- ``greater_than`` (Hanna, Liu & Variengien 2023, arXiv:2305.00586): "The war lasted from the
  year 1732 to the year 17" → a two-digit year above 32 ("42"), wrong one below ("22"); the
  corrupted prompt starts at year 01 (their "01-00" counterfactual).
- ``greater_than_digits``: the same prompts for tokenizers that read numbers digit by digit
  (LLaMA-3, SmolLM2, Qwen2, Mistral): the next token is the end year's tens digit, so the
  answer is the start's tens digit plus one ("1732" → "4"), wrong the digit minus one ("2");
  the corrupted prompt starts at year 01.
- ``induction``: :func:`.taskfile.induction_task` on ids 1 … 31 after BOS id 0.

Names, places, objects and nouns are words GPT-2's tokenizer reads as one token after a
space; whether a model's own tokenizer keeps each pair equally long is checked when the task
is read (:func:`.taskfile.tokenise`). Draws use ``numpy.random.default_rng(seed)``."""

from __future__ import annotations

import numpy as np

from .taskfile import induction_task

NAMES = ("Mary", "John", "Alice", "Bob", "James", "Sarah", "David", "Anna", "Michael", "Laura",
         "Tom", "Emma", "Paul", "Kate", "Mark", "Lisa")
PLACES = ("store", "park", "school", "hospital", "station", "restaurant", "office", "garden")
OBJECTS = ("drink", "book", "ring", "bag", "kiss", "snack", "letter", "key")
IOI = "When {a} and {b} went to the {place}, {s} gave a {obj} to"
NOUNS = ("war", "trip", "strike", "drought", "siege", "expedition", "project", "reign")
YEARS = "The {noun} lasted from the year {cent}{yy:02d} to the year {cent}"


def _distinct(draw, n: int) -> list[dict]:
    """``n`` distinct records from ``draw(i)`` (``i``: the count kept so far); a draw equal to
    one kept is drawn again, since a repeated pair would count once (:mod:`.taskfile`)."""
    out, seen = [], set()
    while len(out) < n:
        r = draw(len(out))
        key = (r["clean"], r["corrupted"], r["answer"], r["wrong"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def ioi_records(n: int, seed: int) -> list[dict]:
    """``n`` distinct IOI pairs (module docstring); the subject is first in half of them."""
    rng = np.random.default_rng(seed)

    def draw(i):
        a, b, c, d, e = rng.choice(NAMES, 5, replace=False)
        place, obj = rng.choice(PLACES), rng.choice(OBJECTS)
        first, second = (a, b) if i % 2 else (b, a)
        return {"clean": IOI.format(a=first, b=second, place=place, s=b, obj=obj),
                "corrupted": IOI.format(a=c, b=d, place=place, s=e, obj=obj),
                "answer": f" {a}", "wrong": f" {b}"}
    return _distinct(draw, n)


def greater_than_records(n: int, seed: int) -> list[dict]:
    """``n`` distinct greater-than pairs (module docstring), start years 20 … 79 of centuries
    11 … 19."""
    rng = np.random.default_rng(seed)

    def draw(_):
        noun, cent, yy = rng.choice(NOUNS), int(rng.integers(11, 20)), int(rng.integers(20, 80))
        return {"clean": YEARS.format(noun=noun, cent=cent, yy=yy),
                "corrupted": YEARS.format(noun=noun, cent=cent, yy=1),
                "answer": f"{yy + 10:02d}", "wrong": f"{yy - 10:02d}"}
    return _distinct(draw, n)


def greater_than_digits_records(n: int, seed: int) -> list[dict]:
    """``n`` greater-than pairs for digit tokenizers (module docstring): the prompts of
    :func:`greater_than_records` (the same draws), answer and wrong the tens digit ± 1."""
    out = []
    for r in greater_than_records(n, seed):
        t = int(r["answer"]) // 10 - 1  # the start year's tens digit, 2 … 7
        out.append({**r, "answer": str(t + 1), "wrong": str(t - 1)})
    return out


def induction_records(n: int, seed: int) -> list[dict]:
    """``n`` induction pairs on ids 1 … 31, halves of 8 ids, BOS 0 (module docstring)."""
    t = induction_task(n, 8, 32, seed=seed)
    return [{"clean": c.tolist(), "corrupted": x.tolist(), "answer": int(a), "wrong": int(w)}
            for c, x, a, w in zip(t.clean, t.corrupted, t.answer, t.wrong, strict=True)]


#: The shipped files: name -> (generator, prompts, seed).
SHIPPED = {"ioi": (ioi_records, 64, 0), "greater_than": (greater_than_records, 64, 0),
           "greater_than_digits": (greater_than_digits_records, 64, 0),
           "induction": (induction_records, 64, 0)}


def shipped_text(name: str) -> str:
    """The text of shipped task ``name``: JSON lines from its generator."""
    import json

    gen, n, seed = SHIPPED[name]
    return "".join(json.dumps(r) + "\n" for r in gen(n, seed))


def shipped_path(name: str):
    """The path of shipped task ``name`` in the installed package."""
    from importlib.resources import files

    from ...errors import InputError

    if name not in SHIPPED:
        raise InputError(f"no shipped task {name!r}; shipped: {', '.join(SHIPPED)}")
    return files("rmtbase") / "data" / "tasks" / f"{name}.jsonl"


def resolve(task):
    """The task file ``task`` names: itself where it is a file (or not a shipped name), else the
    shipped task of that name (``--task ioi``)."""
    from pathlib import Path

    if isinstance(task, str) and task in SHIPPED and not Path(task).exists():
        return shipped_path(task)
    return task


__all__ = ["SHIPPED", "greater_than_digits_records", "greater_than_records",
           "induction_records", "ioi_records", "resolve", "shipped_path", "shipped_text"]
