"""One progress policy for all long work (Monte Carlo tables, sweeps, null draws).

:func:`progress_bar` returns an object with ``update(n)``, ``close()`` and context-manager use:

- on a terminal (stderr is a TTY): a tqdm bar on stderr, removed when done;
- otherwise (logs, CI, pipes): a plain line on stderr at most every :data:`INTERVAL` seconds
  (``$RMTBASE_PROGRESS_INTERVAL`` overrides), e.g.
  ``rmtbase baseline: 1250/4000 draws (31%), 40 s elapsed, about 88 s left``, and a last line
  when a run that printed one ends; a short run prints nothing;
- ``enabled=False``: nothing at all (``--no-progress``/``--quiet``).

A library's own bars (transformers' "Loading weights" while a model is read) are not shown:
:func:`no_library_bars` turns them off for a block and restores the library's setting after.

Work that has stages rather than a count (a study's tables, then its spectra, …) says which
stage starts with :func:`stage`: one line ``<who>: <what>`` on stderr, the same on a terminal
and in a log.

So the Python API can keep ``progress=True`` as its default without drawing a bar into
non-terminal logs. Importing this module imports nothing heavy (tqdm only for a bar).
"""

from __future__ import annotations

import os
import sys
import time

#: Seconds between two progress lines when stderr is not a terminal.
INTERVAL = 30.0


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("RMTBASE_PROGRESS_INTERVAL", INTERVAL)))
    except ValueError:
        return INTERVAL


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class _Silent:
    """Progress that reports nothing."""

    n = 0

    def update(self, k: int = 1) -> None:
        self.n += k

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False


class LogLines(_Silent):
    """Progress as plain lines on ``stream`` at most every ``interval`` seconds."""

    def __init__(self, total: int, desc: str, unit: str, stream=None, interval=None,
                 clock=time.monotonic):
        self.total, self.desc, self.unit = int(total), desc, unit
        self.stream = sys.stderr if stream is None else stream
        self.interval = _interval() if interval is None else float(interval)
        self.clock = clock
        self.start = self.last = clock()
        self.n = 0
        self.printed = 0
        self.closed = False

    def _line(self, final: bool = False) -> str:
        elapsed = self.clock() - self.start
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        text = f"{self.desc}: {self.n}/{self.total} {self.unit}s{pct}, {elapsed:.0f} s elapsed"
        if final:
            return text + ", done"
        if 0 < self.n < self.total:
            text += f", about {elapsed * (self.total - self.n) / self.n:.0f} s left"
        return text

    def update(self, k: int = 1) -> None:
        self.n += k
        now = self.clock()
        if now - self.last >= self.interval and self.n < self.total:
            self.last = now
            self._write(self._line())

    def _write(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
            self.printed += 1
        except (OSError, ValueError):  # a closed stderr must not stop the work
            pass

    def close(self) -> None:
        if not self.closed and self.printed:
            self._write(self._line(final=True))
        self.closed = True


class no_library_bars:
    """Context manager: transformers' own progress bars off inside the block (rmtbase's
    progress follows this module's policy; a library bar in a log is a line of carriage
    returns), the library's setting restored on leaving. Without transformers: nothing."""

    def __enter__(self):
        try:
            from transformers.utils import logging as tf_logging
        except ImportError:
            self._log = None
            return self
        self._log = tf_logging
        self._was = tf_logging.is_progress_bar_enabled()
        tf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc) -> bool:
        if self._log is not None and self._was:
            self._log.enable_progress_bar()
        return False


def stage(who: str, what: str, *, enabled: bool = True, stream=None) -> None:
    """One line ``<who>: <what>`` on stderr (or ``stream``) saying which stage of a long piece
    of work starts; nothing when not ``enabled``. A closed stream does not stop the work."""
    if not enabled:
        return
    try:
        print(f"{who}: {what}", file=sys.stderr if stream is None else stream, flush=True)
    except (OSError, ValueError):
        pass


def progress_bar(total: int, *, desc: str = "rmtbase", unit: str = "draw", enabled: bool = True,
                 stream=None):
    """Progress reporter for ``total`` units of work under the policy of the module docstring."""
    stream = sys.stderr if stream is None else stream
    if not enabled:
        return _Silent()
    if _isatty(stream):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, leave=False, file=stream)
    return LogLines(total, desc, unit, stream=stream)
