"""A refusal must come before any scoring: the named functions are replaced by ones that fail
the test if called (no timing is asserted). Shared by the early-refusal tests."""

from __future__ import annotations


def forbid(monkeypatch, *targets: tuple[object, str]) -> None:
    """Replace each ``(module, name)`` by a function that raises AssertionError when called."""

    def scored(*a, **k):
        raise AssertionError("scoring started before the refusal")

    for module, name in targets:
        monkeypatch.setattr(module, name, scored)
