"""Interrupts (Ctrl-C) that end the process promptly and leave every output whole.

An interrupt must never land inside netCDF/HDF5 I/O: a ``KeyboardInterrupt`` raised while
xarray holds its HDF5 lock leaves it taken, and the cleanup that closes the file waits forever.
:func:`deferred` wraps such I/O (every :func:`rmtbase.files.atomic.write_atomic`; table and
``compare`` reads): a SIGINT inside is held and raised when the block ends, where the caller's
cleanup removes the temporary output (main thread only; elsewhere it does nothing).

The executable's policy has three phases:

- **start-up** (``rmtbase._entry``, imports, :func:`install_exit`): nothing is written yet, so
  a SIGINT prints ``rmtbase: interrupted`` and exits 130 at once (``os._exit``); an interrupt
  inside a C extension's import leaves half-built modules behind.
- **work** (:func:`install`): SIGINT raises ``KeyboardInterrupt`` once, later ones are ignored
  so cleanup is not interrupted; :func:`check` at the points where output becomes final ends a
  run whose interrupt a library swallowed.
- **after the output is complete** (:func:`install_exit` again): an immediate exit 130, never a
  traceback from an exit handler.

SIGTERM is handled as SIGINT in every phase, with ``rmtbase: terminated`` and exit 143
(:func:`exit_status`). Library use without :func:`install` keeps Python's own handler.
:func:`fault_point` is the test suite's fault-injection hook (``RMTBASE_FAULT``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

_state = {"installed": False, "interrupted": False, "depth": 0, "pending": False,
          "redeliver": False, "signum": signal.SIGINT}

#: Exit status of an interrupted command (128 + SIGINT, what a shell reports).
EXIT_INTERRUPTED = 130
#: Exit status of a terminated command (128 + SIGTERM).
EXIT_TERMINATED = 143
#: The signals handled as an interrupt, each with its line and exit status.
SIGNALS = {signal.SIGINT: ("rmtbase: interrupted", EXIT_INTERRUPTED),
           signal.SIGTERM: ("rmtbase: terminated", EXIT_TERMINATED)}


def line(signum=None) -> str:
    """The one line said on ``signum`` (default: the first interrupting signal received)."""
    return SIGNALS.get(_state["signum"] if signum is None else signum, SIGNALS[signal.SIGINT])[0]


def exit_status(signum=None) -> int:
    """130 for SIGINT, 143 for SIGTERM (default: the first interrupting signal received)."""
    return SIGNALS.get(_state["signum"] if signum is None else signum, SIGNALS[signal.SIGINT])[1]


def _exit_now(signum, frame):  # noqa: ARG001 - signal API
    text, status = SIGNALS.get(signum, SIGNALS[signal.SIGINT])
    try:  # through the progress channel: a live bar's line is ended first
        from ..progress import message

        message(text, final=True)
    except BaseException:  # noqa: BLE001 - e.g. a reentrant write to stderr: the plain line
        os.write(2, f"{text}\n".encode())
    os._exit(status)


def install_exit() -> None:
    """SIGINT (SIGTERM) ends the process at once: one line and exit 130 (143), no cleanup, no exit
    handlers. Main thread only."""
    for signum in SIGNALS:
        signal.signal(signum, _exit_now)


def _handler(signum, frame):  # noqa: ARG001 - signal API
    if not _state["interrupted"] and not _state["pending"]:
        _state["signum"] = signum  # the first one names the exit
    if _state["depth"]:
        _state["pending"] = True
        return
    if _state["interrupted"]:  # already ending: let the cleanup finish
        if not _state["redeliver"]:
            return
        _state["redeliver"] = False  # the first one was swallowed: raise it again
    _state["interrupted"] = True
    raise KeyboardInterrupt


def _unraisable(args) -> None:
    """sys.unraisablehook under :func:`install`: a ``KeyboardInterrupt`` that would be printed and
    dropped (e.g. in JAX's garbage-collection callback) is delivered again to the main thread;
    anything else goes to the previous hook."""
    if isinstance(args.exc_value, KeyboardInterrupt) and _state["installed"]:
        _state["redeliver"] = True
        # from a helper thread a moment later: tripped here, it would fire inside this hook
        threading.Thread(target=_redeliver, daemon=True).start()
        return
    _previous_hook(args)


def _redeliver() -> None:
    import _thread

    time.sleep(0.01)
    _thread.interrupt_main()


_previous_hook = sys.unraisablehook


def install() -> None:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` once per process, a swallowed one again. Main
    thread only."""
    global _previous_hook
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    if sys.unraisablehook is not _unraisable:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _unraisable
    _state["installed"] = True


def interrupted() -> bool:
    """Whether this process has been interrupted (under :func:`install`)."""
    return _state["interrupted"]


def check() -> None:
    """Raise ``KeyboardInterrupt`` if an interrupt arrived and was swallowed on its way up
    (called before an output is made final)."""
    if _state["interrupted"] and _state["installed"]:
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred():
    """Hold SIGINT for the duration of the block; raise ``KeyboardInterrupt`` at its end if one
    arrived (module docstring). Nests; a no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = None
    if not _state["installed"] and _state["depth"] == 0:
        current = signal.getsignal(signal.SIGINT)
        if current is signal.default_int_handler:
            old = current
            signal.signal(signal.SIGINT, _holding)
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if old is not None:
            signal.signal(signal.SIGINT, old)
        if _state["depth"] == 0 and _state["pending"]:
            _state["pending"] = False
            if not _state["interrupted"]:
                _state["interrupted"] = _state["installed"]
                raise KeyboardInterrupt
            if _state["redeliver"]:  # the one raised before was swallowed: raise it again
                _state["redeliver"] = False
                raise KeyboardInterrupt


def _holding(signum, frame):  # noqa: ARG001 - signal API
    _state["pending"] = True


def fault_point(stage: str) -> None:
    """Test hook: with ``RMTBASE_FAULT=<stage>[:<SIGNAL>]`` this process sends itself SIGNAL
    (default KILL) on reaching ``stage``; ``<SIGNAL>*`` sends it to the process group every 5 ms
    for 3 s. Stages: ``write:created|data|verified|replaced``, ``block:<k>``,
    ``output:created|netcdf|written|swap``, ``file:written``, ``tasks:submitted``."""
    want = os.environ.get("RMTBASE_FAULT")
    if not want:
        return
    where, _, sig = want.rpartition(":")
    if not sig.rstrip("*").isupper():  # no signal given
        where, sig = want, "KILL"
    if where != stage:
        return
    repeat = sig.endswith("*")
    signum = getattr(signal, f"SIG{sig.rstrip('*') or 'KILL'}")
    if not repeat:
        os.kill(os.getpid(), signum)
        return

    def hammer():
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            try:
                os.killpg(os.getpgid(0), signum)
            except OSError:
                return
            time.sleep(0.005)

    threading.Thread(target=hammer, daemon=True).start()
