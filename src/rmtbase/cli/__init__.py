"""Command-line entry point: ``rmtbase <command> ...``.

Each command is ``rmtbase.cli.<command>`` (``-`` as ``_``) with ``add_parser(subparsers)``,
``run(args) -> int`` (heavy imports inside, so ``--help`` is fast) and optionally
``early(args)``, the checks that need no heavy import, made after every number's bounds
(:mod:`rmtbase.cli.bounds`). A :class:`rmtbase.errors.RmtbaseError`
prints one line ``rmtbase: error: ...`` and exits 2. Ctrl-C ends at once while the command
starts (:data:`PRELOAD`) or once its output is complete, else raises ``KeyboardInterrupt``
(outputs cleaned up, exit 130; SIGTERM 143); a closed stdout ends it quietly (141). Progress
goes to stderr (:func:`rmtbase.progress.message`), never silent over 30 s unless ``--quiet``.
:func:`console_main` keeps JAX's compiled programs in ``<user cache>/jax`` (not when
``JAX_COMPILATION_CACHE_DIR`` is set or ``RMTBASE_NO_JIT_CACHE=1``, nor on a read-only or full
disk) and folds JAX's warnings about that cache into one line (:mod:`rmtbase.files.jax_cache`);
an OSError is one line naming what happened (a full disk: "no space left on device",
:mod:`rmtbase.files.disk_space`); :func:`main` changes no process state."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .._version import __version__
from ..errors import RmtbaseError
from ..progress import heartbeat, message
from .bounds import check_bounds

#: Command modules, in the order ``--help`` lists them.
COMMANDS = ("constants", "spectrum", "elementwise", "product-network", "baseline", "sweep",
            "score", "heavy-tail", "circuits", "combine", "probe", "compare", "study")


#: The heavy modules each command loads during start-up, where a Ctrl-C ends the process at
#: once (a KeyboardInterrupt inside a C extension's import crashed it); ``"jax.devices"``
#: also starts JAX's backend. Commands not named load :data:`DEFAULT_PRELOAD`.
PRELOAD = {
    "constants": ("numpy", "scipy", "mpmath"),
    "spectrum": ("numpy", "mpmath"),
    "elementwise": ("numpy", "scipy", "mpmath"),
    "product-network": ("numpy", "scipy", "mpmath"),
    "compare": ("numpy", "xarray"),
    "probe": ("numpy", "xarray", "torch", "transformers"),
    "heavy-tail": ("numpy", "scipy", "xarray"),  # JAX only to draw a null not yet cached
}
DEFAULT_PRELOAD = ("numpy", "scipy", "xarray", "jax", "jax.devices")


def preload(command: str | None) -> None:
    """Import the heavy modules of ``command`` (:data:`PRELOAD`); a missing one is left to the
    command, which says what is missing."""
    for name in PRELOAD.get(command or "", DEFAULT_PRELOAD):
        try:
            if name == "jax.devices":
                import jax

                jax.devices()
            else:
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the command meets it again and reports it
            continue


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
        p.set_defaults(_run=module.run, _early=getattr(module, "early", None))
    return parser


def main(argv: list[str] | None = None, *, _ready=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        check_bounds(args)  # every number within both bounds, no list naming a value twice
        if args._early is not None:  # the checks that need no heavy import: before start-up's
            args._early(args)
    except RmtbaseError as exc:
        message(f"rmtbase: error: {str(exc).removeprefix('rmtbase: ')}", final=True)
        return 2
    if _ready is not None:  # the executable: end of start-up (console_main)
        _ready(args)
    try:
        # the executable's commands are never silent for long (progress.heartbeat)
        with heartbeat(enabled=_ready is not None and not _quiet(args)):
            code = int(args._run(args) or 0)
        from ..files.interrupts import check

        check()  # an interrupt swallowed on its way up (under the executable's handler)
        return code
    except RmtbaseError as exc:
        message(f"rmtbase: error: {str(exc).removeprefix('rmtbase: ')}", final=True)
        return 2
    except BrokenPipeError:
        raise  # stdout's reader went away: console_main ends quietly
    except OSError as exc:  # the environment, not a bug: a full disk, a vanished folder, ...
        from ..files.disk_space import NO_SPACE, reason

        name = os.fsdecode(exc.filename) if getattr(exc, "filename", None) else None
        if reason(exc) == NO_SPACE:  # by its errno (the writers named a full disk so)
            where = f"cannot write {name}: " if name else ""
            message(f"rmtbase: error: {where}{NO_SPACE}", final=True)
        else:
            where = f" ({name})" if name else ""
            message(f"rmtbase: error: {exc.strerror or exc}{where}", final=True)
        return 2
    except KeyboardInterrupt:
        from ..files.interrupts import exit_status, line

        message(line(), final=True)  # SIGINT: "interrupted", 130; SIGTERM: "terminated", 143
        return exit_status()
    finally:  # an --out checked but not written (the command failed) is free again, no file left
        from ..files.output_lock import release_all

        release_all()


def _quiet(args) -> bool:
    """Whether the command was asked for no progress (``--quiet``, ``--no-progress``)."""
    return bool(getattr(args, "quiet", False) or getattr(args, "no_progress", False))


def _use_compilation_cache() -> None:
    """Point JAX's persistent compilation cache at ``<user cache>/jax`` where it can be written
    and has room (:func:`rmtbase.files.jax_cache.use`)."""
    from ..files.jax_cache import use

    use()


def _show_warning(msg, category, filename, lineno, file=None, line=None) -> None:
    """The executable's ``warnings.showwarning``: JAX's persistent-cache warnings folded into
    rmtbase's one line (:func:`rmtbase.files.jax_cache.fold`), the rest through
    :func:`rmtbase.progress.show_warning`."""
    from ..files.jax_cache import fold
    from ..progress import show_warning

    if not fold(str(msg)):
        show_warning(msg, category, filename, lineno, file, line)


#: Exit status when stdout's reader has gone (128 + SIGPIPE, what a shell reports).
EXIT_BROKEN_PIPE = 141


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """``rmtbase: warning: <first line>`` (instead of Python's three-line form)."""
    text = (str(message).strip().splitlines() or [category.__name__])[0]
    return f"rmtbase: warning: {text.removeprefix('rmtbase: ')}\n"


def console_main() -> int:
    """The ``rmtbase`` executable: :func:`main` with the persistent compilation cache on, and a
    closed stdout (``| head -1``) ending the command quietly."""
    import warnings

    from ..files import interrupts

    def start_work(args):
        preload(args.command)  # still start-up: Ctrl-C ends the process at once
        interrupts.install()  # one KeyboardInterrupt; the cleanup after it is not interrupted

    try:
        interrupts.install_exit()  # start-up: nothing is written yet
        _use_compilation_cache()
        warnings.formatwarning = _one_line_warning  # the executable's own process only
        warnings.showwarning = _show_warning  # a warning ends a live bar's line first
        interrupts.fault_point("cli:start")
        code = main(_ready=start_work)
        sys.stdout.flush()
        sys.stderr.flush()
        if not interrupts.interrupted():  # (an interrupted run has said so: already ending)
            interrupts.install_exit()  # the output is complete: no traceback from exit handlers
    except KeyboardInterrupt:  # before main's own handler (argument parsing, imports)
        message(interrupts.line(), final=True)
        return interrupts.exit_status()
    except BrokenPipeError:
        # Python's own flush at exit would fail again: point stdout at /dev/null first
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
