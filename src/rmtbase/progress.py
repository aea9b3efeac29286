"""One progress and message channel for all long work (tables, sweeps, null draws, layers) and
for the lines said on stderr while it runs.

:func:`progress_bar` returns an object with ``update(n)``, ``close()`` and context-manager use:

- on a terminal (stderr is a TTY): a tqdm bar on stderr, removed when done
  (:class:`rmtbase.reporters.TerminalBar`);
- otherwise (:class:`rmtbase.reporters.LogLines`): a plain line on stderr at most every
  :data:`rmtbase.reporters.INTERVAL` seconds (``$RMTBASE_PROGRESS_INTERVAL``), e.g.
  ``rmtbase baseline: 1250/4000 draws (31%), 40 s elapsed, about 88 s left``, never a carriage
  return; the time left is the rate since the first update times the work left;
- ``cpu_every=s``: also a line whenever the process has used ``s`` more CPU seconds since the
  last one (a background thread, so a compile is not silent; the null draws of a first contact
  use :data:`NULL_CPU_EVERY`);
- ``enabled=False``: nothing (``--no-progress``/``--quiet``).

:func:`message` writes one line (an error, a warning, a note, ``rmtbase: interrupted``) through
the same channel: every live bar's line is ended first and the bars are drawn again below it;
``final=True`` closes every live reporter instead, so nothing is drawn after it. :func:`stage`
says which stage of a long piece of work starts; :func:`heartbeat` (the executable's commands)
adds ``rmtbase: still working: …`` whenever stderr has been silent for :data:`INTERVAL`
seconds (a JAX compile or one long draw that no bar counts); :func:`show_warning` is
``warnings.showwarning`` through :func:`message`. The live reporters are one list per process
(``LIVE`` of :mod:`rmtbase.reporters`, under a lock). Libraries' own bars are turned off by
:func:`rmtbase._library_bars.no_library_bars`. Importing this module imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from .reporters import (
    HEARTBEAT,
    INTERVAL,
    LIVE,
    LOCK,
    SAID,
    LogLines,
    Silent,
    TerminalBar,
    _interval,
    print_line,
)

#: Seconds of process CPU after which the null draws of a first contact say where they are.
NULL_CPU_EVERY = 10.0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def message(text: str, *, final: bool = False, stream=None) -> None:
    """Write the line ``text`` on stderr (or ``stream``) through the channel (module
    docstring): every live bar's line is ended first; the bars are drawn again after it, or
    with ``final`` closed for good (nothing is drawn after the last thing a command says).
    A closed stream does not stop the work."""
    stream = sys.stderr if stream is None else stream
    with LOCK:
        live = list(LIVE)
        for r in live:
            if final:
                r.abandon()
            else:
                r.end_line()
        print_line(text, stream)
        if not final:
            for r in live:
                r.redraw()


def show_warning(msg, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` through :func:`message` (formatted by ``warnings.formatwarning``,
    one line under the executable)."""
    import warnings

    text = warnings.formatwarning(msg, category, filename, lineno, line).rstrip("\n")
    message(text, stream=file)


def stage(who: str, what: str, *, enabled: bool = True, stream=None) -> None:
    """One line ``<who>: <what>`` on stderr (or ``stream``) saying which stage of a long piece
    of work starts, through :func:`message`; nothing when not ``enabled``. A closed stream
    does not stop the work."""
    if enabled:
        message(f"{who}: {what}", stream=stream)


def _doing() -> str:
    """What is under way, for :func:`heartbeat`: ``": <bar> <n>/<total>"`` of the newest live
    bar, else ``" after '<the last line said>'"``, else nothing."""
    with LOCK:
        r = LIVE[-1] if LIVE else None
    bar = getattr(r, "_bar", None)
    if r is not None and (bar is not None or hasattr(r, "desc")):
        desc, n, total = (bar.desc, bar.n, bar.total) if bar is not None else \
            (r.desc, r.n, r.total)
        return f": {desc} {n}/{total}"
    last = SAID["line"]
    if not last:
        return ""
    last = last.removeprefix("rmtbase: ")
    return f" after '{last[:77] + '...' if len(last) > 80 else last}'"


@contextlib.contextmanager
def heartbeat(*, enabled: bool = True, every: float | None = None, stream=None):
    """While the block runs, one line ``rmtbase: still working<what> (<s> s since the last
    line, <c> CPU-s so far)`` whenever stderr has had no line and no bar has moved for
    ``every`` seconds (default :data:`INTERVAL`, ``$RMTBASE_PROGRESS_INTERVAL``): no silence
    longer than that, on a terminal or in a log. ``what``: :func:`_doing`. A daemon thread,
    stopped when the block ends (before the command's last line)."""
    every = _interval() if every is None else float(every)
    if not enabled or every <= 0:
        yield
        return
    stop = threading.Event()
    SAID["at"] = time.monotonic()

    def beat():
        while not stop.wait(min(1.0, every / 4)):
            quiet = time.monotonic() - SAID["at"]
            if quiet >= every and not stop.is_set():
                message(f"{HEARTBEAT}{_doing()} ({quiet:.0f} s since the last line, "
                        f"{time.process_time():.0f} CPU-s so far)", stream=stream)

    thread = threading.Thread(target=beat, daemon=True, name="rmtbase-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def progress_bar(total: int, *, desc: str = "rmtbase", unit: str = "draw", enabled: bool = True,
                 stream=None, cpu_every: float | None = None):
    """Progress reporter for ``total`` units of work under the policy of the module docstring
    (``cpu_every``: also a line per that many seconds of process CPU, not on a terminal)."""
    stream = sys.stderr if stream is None else stream
    if not enabled:
        return Silent()
    if _isatty(stream):
        return TerminalBar(total, desc, unit, stream)
    return LogLines(total, desc, unit, stream=stream, cpu_every=cpu_every)


def counted(items, total: int, *, desc: str, unit: str = "item", enabled: bool = True):
    """Yield ``items``, a :func:`progress_bar` of ``total`` advanced after each (the place of
    ``tqdm(items)``); the bar is closed when the loop ends."""
    with progress_bar(total, desc=desc, unit=unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update(1)


__all__ = ["INTERVAL", "NULL_CPU_EVERY", "counted", "heartbeat", "message", "progress_bar",
           "show_warning", "stage"]
