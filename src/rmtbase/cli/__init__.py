"""Command-line entry point: ``rmtbase <command> ...``.

The CLI is thin: each command lives in its own module ``rmtbase.cli.<command>`` that defines
``add_parser(subparsers)`` and ``run(args) -> int`` and calls plain library functions. Heavy
imports (JAX, torch) happen inside ``run``, so ``rmtbase --help`` is fast.

Errors the user can fix (:class:`rmtbase.errors.RmtbaseError`, bad numbers) print one line,
``rmtbase: error: ...``, and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .._version import __version__
from ..errors import RmtbaseError

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("constants", "spectrum", "elementwise", "baseline", "sweep", "score", "study")


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit 2 (argparse's default prints usage)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"rmtbase: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rmtbase", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rmtbase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # a command not built yet in this checkout
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        p = module.add_parser(sub)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except RmtbaseError as exc:
        print(f"rmtbase: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rmtbase: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
