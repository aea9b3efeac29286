"""The prompts of the head search (:class:`Sequences`) and the task search (:class:`Task`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sequences:
    """``ids`` ``(N, T)`` int64 token ids, ``content`` ``(T,)`` bool (True on text tokens, the same
    for every sequence), ``source`` (one of :data:`..head.sequences.SOURCES`), ``description`` (one
    line for the output's attrs), ``repeat`` (tokens per half of repeated tokens, else None)."""

    ids: np.ndarray
    content: np.ndarray
    source: str
    description: str
    repeat: int | None = None

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @property
    def length(self) -> int:
        return int(self.ids.shape[1])


@dataclass(frozen=True)
class Task:
    """``clean``, ``corrupted`` ``(N, T)`` int64 token ids, ``answer``, ``wrong`` ``(N,)`` (or
    ``(N, P)`` for a model whose metric reads ``P`` positions, :mod:`..task.nonorm`),
    ``name`` (the file's stem) and ``source`` (its path or a description)."""

    clean: np.ndarray
    corrupted: np.ndarray
    answer: np.ndarray
    wrong: np.ndarray
    name: str = "task"
    source: str = ""

    @property
    def n(self) -> int:
        return int(self.clean.shape[0])

    @property
    def length(self) -> int:
        return int(self.clean.shape[1])

    def subset(self, lo: int, hi: int) -> Task:
        return Task(self.clean[lo:hi], self.corrupted[lo:hi], self.answer[lo:hi],
                    self.wrong[lo:hi], self.name, self.source)


__all__ = ["Sequences", "Task"]
