"""One progress and message channel for all long work and the lines said on stderr meanwhile.

:func:`progress_bar` returns a reporter (``update(n)``, ``close()``, context manager;
:mod:`rmtbase.reporters`): a tqdm bar removed when done where stderr is a TTY, else a plain line
at most every ``$RMTBASE_PROGRESS_INTERVAL`` s with the time left, never a carriage return;
nothing with ``enabled=False``. :func:`message` writes one line, ending live bars' lines first
and redrawing them below (``final=True`` closes them). :func:`stage` announces a stage;
:func:`heartbeat` says ``rmtbase: still working: …`` when stderr has been silent for
:data:`INTERVAL` s; :func:`show_warning` routes warnings through :func:`message`. Importing
imports nothing heavy."""

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
    print_line,
    progress_interval,
)

#: Seconds of process CPU after which the null draws of a first contact say where they are.
NULL_CPU_EVERY = 10.0


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def message(text: str, *, final: bool = False, stream=None) -> None:
    """Write the line ``text`` on stderr (or ``stream``), ending live bars' lines first and
    redrawing them after (``final``: closed for good); a closed stream is ignored."""
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
    of work starts, through :func:`message` (wrapped at :data:`STAGE_WIDTH` characters, the
    rows after the first indented); nothing when not ``enabled``. A closed stream does not stop
    the work."""
    if enabled:
        import textwrap

        rows = []
        for part in f"{who}: {what}".split("\n"):  # the text's own line breaks kept
            rows += textwrap.wrap(part, STAGE_WIDTH, subsequent_indent="  ",
                                  break_on_hyphens=False) if len(part) > STAGE_WIDTH else [part]
        message("\n".join(rows), stream=stream)


#: The widest row of a stage line (every line of the screen within 200 characters).
STAGE_WIDTH = 200


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
    """While the block runs, a ``rmtbase: still working…`` line after each ``every`` s (default
    :data:`INTERVAL`) of silence; a daemon thread stopped when the block ends."""
    every = progress_interval() if every is None else float(every)
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
