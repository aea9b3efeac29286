"""A task: prompt pairs and the tokens an output metric compares (docs/tasks.md).

A task file is UTF-8 JSON lines, one prompt pair an object: ``clean`` and ``corrupted`` (a
text, read as ``tokenizer(text)`` by default: :func:`encode_prompt`, or token ids, taken as
given), ``answer`` and ``wrong`` (one token: a text read without special tokens, or an id).
Every pair has the same token length ``T`` in both prompts and across the file (positions
align, as in Wang et al. 2022); the metric reads the logits at position ``T − 1``. Blank
lines and ``#`` lines are skipped. Refused in one line naming the line
(:class:`~rmtbase.errors.InputError`), before the model runs: a malformed value (ids are
integers 0 … 2³¹ − 1), a pair whose metric cannot move (answer = wrong, clean = corrupted, by
text or by id), a prompt of no tokens, fewer than two distinct pairs (standard errors are over
pairs), or over :data:`~rmtbase.limits.MAX_TASK_TOKENS` token positions (pairs × tokens).

:func:`induction_task` draws the induction task on repeated random ids, which needs no
tokenizer: ``[bos] A A[:k]`` clean, ``[bos] B A[:k]`` corrupted (``A``, ``B`` independent
uniform segments of distinct ids), answer ``A[k]``, wrong an id outside ``A``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...limits import INT_CEILING, MAX_TASK_TOKENS
from ..core.prompts import Task

FIELDS = ("clean", "corrupted", "answer", "wrong")
#: Most ids :func:`induction_task` permutes (two permutations of its pool a pair): a few
#: seconds.
PERMUTED_IDS = 2**28


def read_records(path) -> list[dict]:
    """The JSON objects of a task file, each checked for the four fields, their types and
    bounds, and that its metric can move (module docstring); the task's size bounded by its
    pairs × the tokens known before tokenising (an id list's length, at least one a text)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no task file {path}")
    try:
        lines = p.read_text("utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{p.name}: a task file is UTF-8 JSON lines") from None
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        rec = _json_line(line, f"{p.name} line {i}")
        if not isinstance(rec, dict):
            raise InputError(f"{p.name} line {i}: a task line is a JSON object")
        missing = [f for f in FIELDS if f not in rec]
        if missing:
            raise InputError(f"{p.name} line {i}: missing {', '.join(missing)}")
        for f in ("clean", "corrupted"):
            v = rec[f]
            if not (isinstance(v, str) and v) and not _ids(v):
                raise InputError(f"{p.name} line {i}: {f} must be a text or a non-empty "
                                 f"list of token ids (integers 0 to {INT_CEILING})")
        for f in ("answer", "wrong"):
            v = rec[f]
            if not (isinstance(v, str) and v) and not _id(v):
                raise InputError(f"{p.name} line {i}: {f} must be a token's text or an id "
                                 f"(an integer 0 to {INT_CEILING})")
        _moves(rec["clean"], rec["corrupted"], rec["answer"], rec["wrong"],
               f"{p.name} line {i}")
        out.append(rec)
        if len(out) > MAX_TASK_TOKENS:
            break
    if not out:
        raise InputError(f"{p.name}: no prompt pairs")
    known = max((len(r["clean"]) for r in out if isinstance(r["clean"], list)), default=1)
    check_size(len(out), known, p.name, "at least " if known == 1 else "")
    _distinct(len(out), len({json.dumps([r[f] for f in FIELDS]) for r in out}), p.name)
    return out


def _json_line(line: str, where: str):
    """``line`` parsed as JSON, or one line naming ``where``: not JSON, an integer of more
    digits than Python parses, or nesting deeper than the parser's recursion."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not JSON ({exc.msg})") from None
    except ValueError as exc:  # an integer over sys.get_int_max_str_digits() digits
        raise InputError(f"{where}: not a task line ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise InputError(f"{where}: not a task line (JSON nested too deeply)") from None


def _moves(clean, corrupted, answer, wrong, where: str) -> None:
    """One line naming ``where`` where the pair's metric cannot move: answer the same token as
    wrong, or clean the same prompt as corrupted (texts or ids, compared as given)."""
    if type(answer) is type(wrong) and answer == wrong:
        raise InputError(f"{where}: answer and wrong are the same token ({answer!r}); the "
                         f"metric cannot move")
    if type(clean) is type(corrupted) and clean == corrupted:
        raise InputError(f"{where}: clean and corrupted are the same prompt; patching cannot "
                         f"move the metric")


def _distinct(pairs: int, distinct: int, name: str) -> None:
    """One line where fewer than two of ``pairs`` prompt pairs are distinct: a task's standard
    errors are over pairs."""
    if distinct < 2:
        raise InputError(f"{name}: {pairs} prompt pairs, {distinct} distinct; a task needs at "
                         f"least 2 distinct pairs (its standard errors are over pairs)")


def check_task(task: Task) -> None:
    """The checks a task file gets, for a :class:`Task` built in Python: its size, each
    pair's metric able to move (:func:`_moves` on the ids) and at least 2 distinct pairs;
    one line each, before any model is read."""
    check_size(task.n, task.length, task.name)
    rows = []
    for i in range(task.n):
        c, x = task.clean[i].tolist(), task.corrupted[i].tolist()
        a, w = np.asarray(task.answer[i]).tolist(), np.asarray(task.wrong[i]).tolist()
        _moves(c, x, a, w, f"{task.name} pair {i + 1}")
        rows.append(json.dumps([c, x, a, w]))
    _distinct(task.n, len(set(rows)), task.name)


def distinct_pairs(task: Task) -> tuple[Task, int]:
    """``task`` with each repeated pair (the same four fields as an earlier one) dropped, and
    how many were: a copy is no new evidence, so every statistic counts a pair once."""
    seen, keep = set(), []
    for i in range(task.n):
        key = (task.clean[i].tobytes(), task.corrupted[i].tobytes(),
               np.asarray(task.answer[i]).tobytes(), np.asarray(task.wrong[i]).tobytes())
        if key not in seen:
            seen.add(key)
            keep.append(i)
    if len(keep) == task.n:
        return task, 0
    k = np.asarray(keep)
    return Task(task.clean[k], task.corrupted[k], task.answer[k], task.wrong[k], task.name,
                task.source), task.n - len(keep)


def check_size(pairs: int, tokens: int, name: str, bound: str = "") -> None:
    """One line before any work where ``pairs`` × ``tokens`` exceeds
    :data:`~rmtbase.limits.MAX_TASK_TOKENS` (``bound``: how ``tokens`` is known, e.g.
    ``"at least "``)."""
    if pairs * tokens > MAX_TASK_TOKENS:
        raise InputError(f"{name}: {pairs} prompt pairs x {bound}{tokens} tokens = "
                         f"{bound}{pairs * tokens} token positions; a task takes at most "
                         f"{MAX_TASK_TOKENS} (use fewer pairs)")


def _id(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_CEILING


def _ids(v) -> bool:
    return isinstance(v, list) and bool(v) and all(_id(x) for x in v)


def needs_tokenizer(records) -> bool:
    """Whether any field of ``records`` is text."""
    return any(isinstance(r[f], str) for r in records for f in FIELDS)


def _encode(tok, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def encode_prompt(tok, text: str, where: str) -> list[int]:
    """``tok(text)``'s ids (leading special tokens included); InputError naming ``where`` if
    it appends any (an EOS: the metric reads the last position)."""
    ids = list(tok(text)["input_ids"])
    bare = _encode(tok, text)
    if len(ids) > len(bare) and ids[len(ids) - len(bare):] != bare:
        raise InputError(f"{where}: this tokenizer appends special tokens to a text by "
                         f"default ({ids[len(bare):][:4]}); the metric reads the last "
                         f"position: give the prompts as token ids")
    return ids


def tokenise(records, tokenizer=None, *, vocab_size: int | None = None, name: str = "task",
             source: str = "") -> Task:
    """The :class:`Task` of ``records`` (:func:`read_records`): texts through ``tokenizer``
    (one-line refusal when text is given and it is None), every id below ``vocab_size``, one
    token per answer and wrong, equal token lengths."""
    if tokenizer is None and needs_tokenizer(records):
        raise InputError(f"{name}: the task gives text, and this model has no tokenizer "
                         f"(tokenizer.json or tokenizer.model beside config.json, or a GGUF's "
                         f"own); give token id lists instead")
    rows = {f: [] for f in FIELDS}
    for i, r in enumerate(records, 1):
        for f in ("clean", "corrupted"):
            rows[f].append(encode_prompt(tokenizer, r[f], f"{name} pair {i}: {f}")
                           if isinstance(r[f], str) else r[f])
            if not rows[f][-1]:
                raise InputError(f"{name} pair {i}: {f} {r[f]!r} is no tokens for this "
                                 f"tokenizer")
        for f in ("answer", "wrong"):
            v = r[f]
            ids = _encode(tokenizer, v) if isinstance(v, str) else [v]
            if len(ids) != 1:
                hint = ("; this tokenizer reads numbers digit by digit (the shipped task "
                        "greater_than_digits is for such tokenizers)"
                        if isinstance(v, str) and v.strip().isdigit() else "")
                raise InputError(f"{name} pair {i}: {f} {v!r} is {len(ids)} tokens for this "
                                 f"tokenizer; it must be one{hint}")
            rows[f].append(ids[0])
        a, b = len(rows["clean"][-1]), len(rows["corrupted"][-1])
        if a != b:
            raise InputError(f"{name} pair {i}: clean is {a} tokens and corrupted {b}; they "
                             f"must be equally long")
        t0 = len(rows["clean"][0])
        if a != t0:
            raise InputError(f"{name} pair {i}: {a} tokens where pair 1 has {t0}; every pair "
                             f"must have the same length")
        _moves(rows["clean"][-1], rows["corrupted"][-1], rows["answer"][-1],
               rows["wrong"][-1], f"{name} pair {i} (as token ids)")
    check_size(len(records), len(rows["clean"][0]), name)
    task = Task(*(np.asarray(rows[f], dtype=np.int64) for f in FIELDS), name=name,
                source=source)
    if vocab_size is not None:
        top = max(int(a.max()) for a in (task.clean, task.corrupted, task.answer, task.wrong))
        if top >= vocab_size:
            raise InputError(f"{name}: token id {top} is outside this model's vocabulary of "
                             f"{vocab_size}")
    _distinct(len(records), len({tuple(map(tuple, (rows["clean"][i], rows["corrupted"][i])))
                                 + (rows["answer"][i], rows["wrong"][i])
                                 for i in range(len(records))}), name)
    return task


def read_task(path, tokenizer=None, *, vocab_size: int | None = None) -> Task:
    """:func:`tokenise` of :func:`read_records` of ``path``."""
    return tokenise(read_records(path), tokenizer, vocab_size=vocab_size,
                    name=Path(path).stem, source=str(path))


def induction_task(n: int, half: int, vocab: int, *, seed: int, prefix: int | None = None,
                   bos: int | None = 0, low: int = 1) -> Task:
    """``n`` induction pairs (module docstring): segments of ``half`` distinct ids drawn
    uniformly from ``low … vocab − 1``, ``prefix`` (default ``half − 1``) of them repeated;
    ``bos`` first unless None. ``numpy.random.default_rng(seed)``. InputError before any draw
    for an argument that is not an integer in its range (``n`` ≥ 1, 1 ≤ ``prefix`` <
    ``half``, ``half`` + 1 distinct ids, ``bos`` and ``low`` ids below ``vocab``, ``seed`` in
    [0, 2**32)) or a task over :data:`~rmtbase.limits.MAX_TASK_TOKENS` token positions."""
    from ...checks import check_int, check_seed
    from ...limits import MAX_COUNT, MAX_DIM

    n = check_int("n", n, 1, MAX_COUNT)
    vocab = check_int("vocab", vocab, 3, MAX_DIM)
    low = check_int("low", low, 0, vocab - 1)
    half = check_int("half", half, 2, MAX_DIM)
    prefix = check_int("prefix", half - 1 if prefix is None else prefix, 1, MAX_DIM)
    bos = None if bos is None else check_int("bos", bos, 0, vocab - 1)
    seed = check_seed(seed)
    pool = vocab - low
    if not prefix < half or half + 1 > pool:
        raise InputError(f"an induction task needs 1 <= prefix < half and half + 1 distinct "
                         f"ids; got half {half}, prefix {prefix}, {pool} ids")
    check_size(n, (bos is not None) + half + prefix, "induction_task")
    if 2 * n * pool > PERMUTED_IDS:  # two permutations of the pool a pair
        raise InputError(f"induction_task: 2 x n x (vocab - low) = {2 * n * pool} ids to "
                         f"permute; at most {PERMUTED_IDS} (fewer pairs or a smaller vocab)")
    rng = np.random.default_rng(seed)
    head = [] if bos is None else [bos]
    rows = {f: [] for f in FIELDS}
    for _ in range(n):
        a = rng.permutation(pool)[:half + 1] + low
        b = rng.permutation(pool)[:half] + low
        seg, wrong = a[:half], a[half]
        rows["clean"].append(head + seg.tolist() + seg[:prefix].tolist())
        rows["corrupted"].append(head + b.tolist() + seg[:prefix].tolist())
        rows["answer"].append(int(seg[prefix]))
        rows["wrong"].append(int(wrong))
    return Task(*(np.asarray(rows[f], dtype=np.int64) for f in FIELDS), name="induction",
                source=f"induction_task(n={n}, half={half}, vocab={vocab}, seed={seed})")


def write_task(task: Task, path) -> Path:
    """Write ``task`` as a task file of id lists (atomically); returns the path."""
    from ...files.atomic import write_text

    lines = [json.dumps({"clean": c.tolist(), "corrupted": x.tolist(), "answer": int(a),
                         "wrong": int(w)})
             for c, x, a, w in zip(task.clean, task.corrupted, task.answer, task.wrong,
                                   strict=True)]
    p = Path(path)
    write_text(p, "\n".join(lines) + "\n")
    return p


__all__ = ["FIELDS", "Task", "check_size", "check_task", "distinct_pairs", "encode_prompt",
           "induction_task", "needs_tokenizer", "read_records", "read_task", "tokenise",
           "write_task"]
