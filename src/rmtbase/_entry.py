"""The ``rmtbase`` executable's entry point (``[project.scripts]``) and ``python -m rmtbase``.

It first installs the start-up phase of the interrupt policy (:mod:`rmtbase.files.interrupts`):
until the command starts, Ctrl-C prints ``rmtbase: interrupted`` and exits 130 (SIGTERM: 143),
never a traceback. Then :func:`rmtbase.cli.console_main`."""

from __future__ import annotations

import os
import signal
import sys


def _exit_now(signum, frame):  # noqa: ARG001 - signal API; as rmtbase.files.interrupts
    if signum == signal.SIGTERM:
        os.write(2, b"rmtbase: terminated\n")
        os._exit(143)
    os.write(2, b"rmtbase: interrupted\n")
    os._exit(130)


def main() -> int:
    signal.signal(signal.SIGINT, _exit_now)  # start-up: nothing is written yet
    signal.signal(signal.SIGTERM, _exit_now)
    try:
        from .cli import console_main
    except KeyboardInterrupt:
        sys.stderr.write("rmtbase: interrupted\n")
        return 130
    code = console_main()
    from .files import interrupts

    if code == 0 and interrupts.interrupted():  # a Ctrl-C swallowed after the output was written
        from .progress import message

        message(interrupts.line(), final=True)
        code = interrupts.exit_status()
    # end now, not through interpreter finalisation: it takes seconds (torch, JAX) with SIGINT
    # back to its default action (killed without a line); an interrupted run has cleaned up
    # and skips the exit handlers too
    _exit_quietly(code, handlers=code not in (130, 143))
    return code


def _exit_quietly(code: int, *, handlers: bool = False) -> None:
    if handlers:  # (still under the exit phase's handler: Ctrl-C here is one line and 130)
        import atexit

        atexit._run_exitfuncs()
    try:  # a signal already received runs its handler here; later ones wait for the exit
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except KeyboardInterrupt:  # (the work phase's handler: the run has said so)
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed pipe: nothing more to say
            pass
    os._exit(code)


__all__ = ["main"]
