"""Both bounds of every numeric option of every command, checked once the command line is
parsed and before anything else (:func:`rmtbase.cli.main`): one line, exit 2, no work started.

:data:`BOUNDS` maps an option's ``dest`` to its rule, :data:`BY_COMMAND` overrides it for one
command (``--draws`` of ``score`` and ``circuits`` has the omnibus floor). A list option
(``--d 64 128``, ``--layers 1,2``, ``--receivers L1H0,L2H3``) has each value checked and a value
named twice refused, except ``--widths`` (equal widths are a network's shape). The wording is
:func:`rmtbase.checks.check_int`'s and :func:`~rmtbase.checks.check_real`'s; the library checks
the same bounds again for its own callers. numpy-free: a refusal costs no heavy import."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import (
    COMPOSITION_DRAWS_WHY,
    GAIN_RANGE,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_DIM,
    MAX_DRAWS,
    MAX_WORKERS,
    MIN_NULL_DRAWS,
    SIGMA_RANGE,
    check_int,
    check_real,
    check_seed,
)
from ..errors import InputError

#: The shortest repeat length (rmtbase.circuits.head.sequences.MIN_REPEAT; kept equal by tests).
MIN_REPEAT = 3


@dataclass(frozen=True)
class Int:
    """An integer in [lo, hi]; ``why`` follows the lower bound's message."""

    lo: int
    hi: int
    why: str | None = None

    def check(self, flag: str, value) -> None:
        check_int(flag, value, minimum=self.lo, maximum=self.hi, why=self.why)


@dataclass(frozen=True)
class Real:
    """A finite number between lo and hi, each end excluded when ``open``."""

    lo: float
    hi: float
    open: bool = False

    def check(self, flag: str, value) -> None:
        check_real(flag, value, self.lo, self.hi, open_min=self.open, open_max=self.open)


class Seed:
    """A PRNG seed in [0, 2**32)."""

    @staticmethod
    def check(flag: str, value) -> None:
        check_seed(value, flag)


@dataclass(frozen=True)
class Head:
    """A head ``(layer, head)``: layer in [1, MAX_COUNT] (receivers follow layer 0), head in
    [0, MAX_COUNT]."""

    def check(self, flag: str, value) -> None:
        layer, head = value
        check_int(f"{flag} layer", layer, minimum=1, maximum=MAX_COUNT,
                  why="a receiver is a head after layer 0")
        check_int(f"{flag} head", head, minimum=0, maximum=MAX_COUNT)


_OMNIBUS = ("the omnibus calibration of each head's p reads the 10 largest null statistics")

#: Rules by ``dest`` (every command).
BOUNDS = {
    "seed": Seed(),
    "draws": Int(2, MAX_DRAWS),
    "max_draws": Int(2, MAX_DRAWS),
    "element_draws": Int(0, MAX_DRAWS),
    "component_draws": Int(MIN_NULL_DRAWS, MAX_DRAWS, "the omnibus calibration of each "
                           "matrix's p reads the 10 largest null statistics"),
    "heavy_tail_draws": Int(2, MAX_DRAWS),
    "chunk_size": Int(1, MAX_DRAWS),
    "d": Int(1, MAX_DIM),
    "dh": Int(1, MAX_DIM),
    "widths": Int(1, MAX_DIM),
    "depth": Int(1, MAX_DEPTH),
    "digits": Int(1, 1000),
    "k": Int(1, MAX_COUNT),
    "top": Int(0, MAX_COUNT),
    "window": Int(3, MAX_COUNT, "tokens"),
    "workers": Int(1, MAX_WORKERS),
    "threads": Int(1, MAX_WORKERS),
    "blocks_per_task": Int(1, MAX_COUNT),
    "repeat_length": Int(MIN_REPEAT, MAX_COUNT),
    "layers": Int(1, MAX_COUNT, "a receiver is a head after layer 0"),
    "receivers": Head(),
    "alpha": Real(0.0, 1.0, open=True),
    "fdr": Real(0.0, 1.0, open=True),
    "holdout": Real(0.0, 0.9),
    "sigma": Real(*SIGMA_RANGE),
    "sigma_q": Real(*SIGMA_RANGE),
    "sigma_k": Real(*SIGMA_RANGE),
    "gain": Real(*GAIN_RANGE),
}

#: Per-command rules replacing :data:`BOUNDS`'.
BY_COMMAND = {
    "score": {"draws": Int(MIN_NULL_DRAWS, MAX_DRAWS, _OMNIBUS)},
    "circuits": {"draws": Int(MIN_NULL_DRAWS, MAX_DRAWS, COMPOSITION_DRAWS_WHY)},
}

#: List options whose values may repeat.
REPEATS_ALLOWED = frozenset({"widths"})


def _named(dest: str, value) -> str:
    if dest == "receivers":
        return f"L{value[0]}H{value[1]}"
    return str(value)


def check_bounds(args) -> None:
    """InputError (one line) for the first option of ``args`` (argparse's namespace of one
    command) outside its bounds or naming a value twice; nothing else is looked at."""
    rules = {**BOUNDS, **BY_COMMAND.get(getattr(args, "command", None) or "", {})}
    for dest, rule in rules.items():
        value = getattr(args, dest, None)
        if value is None or isinstance(value, str):  # unset, or a word such as "auto"
            continue
        flag = "--" + dest.replace("_", "-")
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        for v in values:
            rule.check(flag, v)
        if dest not in REPEATS_ALLOWED and len(values) > 1:
            seen = set()
            for v in values:
                key = tuple(v) if isinstance(v, (list, tuple)) else v
                if key in seen:
                    raise InputError(f"{flag} names {_named(dest, v)} twice")
                seen.add(key)


__all__ = ["BOUNDS", "BY_COMMAND", "MIN_REPEAT", "REPEATS_ALLOWED", "check_bounds"]
