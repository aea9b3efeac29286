"""Command-line entry point: ``rmtbase <command> ...``.

The CLI is thin: each command lives in its own module ``rmtbase.cli.<command>`` (``-`` in a
command's name is ``_`` in its module's) that defines
``add_parser(subparsers)`` and ``run(args) -> int`` and calls plain library functions. Heavy
imports (JAX, torch) happen inside ``run``, so ``rmtbase --help`` is fast.

Errors the user can fix (:class:`rmtbase.errors.RmtbaseError`, bad numbers) print one line,
``rmtbase: error: ...``, and exit with status 2; no traceback (so do operating-system errors
such as a full disk met after the checks). An interrupt (Ctrl-C) prints
``rmtbase: interrupted`` and exits 130. When the reader of stdout goes away early
(``rmtbase … | head -1``) the executable stops quietly with status 141, as a command killed
by SIGPIPE does.

The ``rmtbase`` executable (:func:`console_main`) also keeps JAX's compiled programs in
``<user cache>/jax`` (JAX's persistent compilation cache), so a repeated command skips its
compilation (README, Performance: cold against warm ``rmtbase score``). It does this
through JAX's own environment variables before JAX is imported, and leaves them alone when
``JAX_COMPILATION_CACHE_DIR`` is already set; ``RMTBASE_NO_JIT_CACHE=1`` turns it off.
:func:`main` itself (what tests and other programs call) changes no process state.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .._version import __version__
from ..errors import RmtbaseError

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("constants", "spectrum", "elementwise", "product-network", "baseline", "sweep",
            "score", "combine", "probe", "compare", "study")


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit 2 (argparse's default prints usage)."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"rmtbase: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rmtbase", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rmtbase {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        mod_name = f"{__name__}.{name.replace('-', '_')}"
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:  # a command not built yet in this checkout
            if exc.name != mod_name:
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
        code = int(args._run(args) or 0)
        from ..files.interrupts import check

        check()  # an interrupt swallowed on its way up (under the executable's handler)
        return code
    except RmtbaseError as exc:
        print(f"rmtbase: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # stdout's reader went away: console_main ends quietly
    except OSError as exc:  # the environment, not a bug: a full disk, a vanished folder, ...
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"rmtbase: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rmtbase: interrupted", file=sys.stderr)
        return 130


def _use_compilation_cache() -> None:
    """Point JAX's persistent compilation cache at ``<user cache>/jax`` (see module docstring)."""
    if os.environ.get("RMTBASE_NO_JIT_CACHE") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    from ..files.user_cache import cache_dir

    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir() / "jax")
    # our programs compile in well under JAX's default 1 s threshold; cache them all
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


#: Exit status when stdout's reader has gone (128 + SIGPIPE, what a shell reports).
EXIT_BROKEN_PIPE = 141


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """``rmtbase: warning: <first line>`` (Python's default adds the file, line number and
    source text of the ``warn`` call: three lines for a one-line message)."""
    text = (str(message).strip().splitlines() or [category.__name__])[0]
    return f"rmtbase: warning: {text.removeprefix('rmtbase: ')}\n"


def console_main() -> int:
    """The ``rmtbase`` executable: :func:`main` with the persistent compilation cache on, and a
    closed stdout (``| head -1``) ending the command quietly."""
    import warnings

    from ..files import interrupts

    try:
        interrupts.install()  # one KeyboardInterrupt; the cleanup after it is not interrupted
        _use_compilation_cache()
        warnings.formatwarning = _one_line_warning  # the executable's own process only
        interrupts.fault_point("cli:start")
        code = main()
        sys.stdout.flush()
    except KeyboardInterrupt:  # before main's own handler (argument parsing, imports)
        print("rmtbase: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Python's own flush at exit would fail again: point stdout at /dev/null first
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
