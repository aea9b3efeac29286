"""The progress reporters of :func:`rmtbase.progress.progress_bar` and the live list.

- :class:`LogLines`: plain lines at most every :data:`INTERVAL` s (and per ``cpu_every`` CPU
  seconds), time left from the rate since the first update;
- :class:`TerminalBar`: a tqdm bar, rate measured from the first update (:func:`_after_first`);
- ``Silent``: nothing; the base of both.

``LIVE`` (under ``LOCK``; reporters may be updated from threads) lists the reporters drawing now."""

from __future__ import annotations

import os
import sys
import threading
import time

#: Seconds between two progress lines when stderr is not a terminal.
INTERVAL = 30.0

LOCK = threading.RLock()
#: The reporters drawing on stderr now, in the order they started (module docstring).
LIVE: list = []
#: How :func:`rmtbase.progress.heartbeat`'s lines start.
HEARTBEAT = "rmtbase: still working"
#: When stderr last got a line or a bar moved (``time.monotonic``), and its last line but a
#: heartbeat's: what :func:`rmtbase.progress.heartbeat` reads.
SAID = {"at": time.monotonic(), "line": None}


def progress_interval() -> float:
    """Seconds between progress lines: ``RMTBASE_PROGRESS_INTERVAL`` if a number, else
    :data:`INTERVAL`."""
    try:
        return max(0.0, float(os.environ.get("RMTBASE_PROGRESS_INTERVAL", INTERVAL)))
    except ValueError:
        return INTERVAL


def print_line(text: str, stream) -> bool:
    """``text`` and a newline on ``stream``; False where the stream is closed (a closed stderr
    must not stop the work)."""
    try:  # one write: an interrupt between the text and its newline would join two lines
        stream.write(f"{text}\n")
        stream.flush()
        SAID["at"] = time.monotonic()
        if not text.startswith(HEARTBEAT):
            SAID["line"] = text
        return True
    except (OSError, ValueError):
        return False


class Silent:
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


class LogLines(Silent):
    """Progress as plain lines on ``stream`` at most every ``interval`` seconds, and with
    ``cpu_every`` whenever that many seconds of process CPU passed since the last line."""

    def __init__(self, total: int, desc: str, unit: str, stream=None, interval=None,
                 clock=time.monotonic, cpu_every: float | None = None):
        self.total, self.desc, self.unit = int(total), desc, unit
        self.stream = sys.stderr if stream is None else stream
        self.interval = progress_interval() if interval is None else float(interval)
        self.clock = clock
        self.start = self.last = clock()
        self.cpu_last = time.process_time()
        self.n = 0
        self.first: tuple[float, int] | None = None  # (time, n) at the first update
        self.printed = 0
        self.closed = False
        self._stop = threading.Event()
        with LOCK:
            LIVE.append(self)
        if cpu_every is not None:
            self.cpu_every = float(cpu_every)
            threading.Thread(target=self._tick, daemon=True,
                             name="rmtbase-progress").start()

    def _line(self, final: bool = False) -> str:
        elapsed = self.clock() - self.start
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        text = f"{self.desc}: {self.n}/{self.total} {self.unit}s{pct}, {elapsed:.0f} s elapsed"
        if final:  # "done" only where every unit is: a bar closed early (interrupted) stopped
            return text + (", done" if self.n >= self.total else ", stopped")
        if self.first is not None and self.first[1] < self.n < self.total:
            rate = (self.clock() - self.first[0]) / (self.n - self.first[1])
            text += f", about {rate * (self.total - self.n):.0f} s left"
        return text

    def update(self, k: int = 1) -> None:
        """Advance by ``k``. The time left is estimated from the rate after the first update
        (the first unit of a stage carries its compilation: at 23 s from the end of a stage,
        counting it once said "about 5064 s left"), so the first line of a stage has none."""
        with LOCK:
            self.n += k
            now = self.clock()
            if self.first is None and k > 0:
                self.first = (now, self.n)
            if not self.closed and now - self.last >= self.interval and self.n < self.total:
                self._write(self._line())

    def _tick(self) -> None:
        """The ``cpu_every`` line between updates (a daemon thread, ends with the reporter)."""
        while not self._stop.wait(min(1.0, self.cpu_every / 4)):
            with LOCK:
                if not self.closed and time.process_time() - self.cpu_last >= self.cpu_every:
                    self._write(self._line())

    def _write(self, text: str) -> None:
        with LOCK:
            self.last, self.cpu_last = self.clock(), time.process_time()
            if print_line(text, self.stream):
                self.printed += 1

    def end_line(self) -> None:
        """Nothing: every line this reporter writes is whole."""

    def redraw(self) -> None:
        pass

    def abandon(self) -> None:
        """Stop without a last line (the run ends with a message)."""
        with LOCK:
            self.closed = True
            self._stop.set()
            _unregister(self)

    def close(self) -> None:
        with LOCK:
            if not self.closed and self.printed:
                self._write(self._line(final=True))
            self.abandon()


class TerminalBar(Silent):
    """A tqdm bar on a terminal, removed when done, in the channel's list while it may be on
    the screen (listed before it is first drawn and until it is cleared: an interrupt can
    land anywhere in between)."""

    def __init__(self, total: int, desc: str, unit: str, stream):
        from tqdm import tqdm

        self.closed, self._bar, self._stream = False, None, stream
        with LOCK:
            LIVE.append(self)
            self._bar = _after_first(tqdm)(total=total, desc=desc, unit=unit, leave=False,
                                           file=stream)

    @property
    def n(self) -> int:
        return 0 if self._bar is None else self._bar.n

    def update(self, k: int = 1) -> None:
        with LOCK:
            if not self.closed and self._bar is not None:
                if self._bar.first is None and k > 0:  # before tqdm draws this update
                    self._bar.first = (self._bar._time(), self._bar.n + k)
                self._bar.update(k)
                SAID["at"] = time.monotonic()

    def end_line(self) -> None:
        """Clear the bar's line (the cursor back at column 0)."""
        try:
            if self._bar is None:  # interrupted while tqdm drew its first frame
                self._stream.write("\r\x1b[K")
            else:
                self._bar.clear()
        except (OSError, ValueError):
            pass

    def redraw(self) -> None:
        try:
            if self._bar is not None:
                self._bar.refresh()
        except (OSError, ValueError):
            pass

    def abandon(self) -> None:
        self.close()  # leave=False: closing clears the line and draws nothing more

    def close(self) -> None:
        with LOCK:
            self.closed = True
            if self not in LIVE:
                return
            try:
                if self._bar is None:
                    self.end_line()
                else:
                    self._bar.close()  # tqdm's close is idempotent
            except (OSError, ValueError):
                pass
            _unregister(self)


def _after_first(tqdm):
    """``tqdm`` whose rate is measured from the first update on (tqdm's own carries the stage's
    compile time); before the second update the rate is 0 (shown "?")."""

    class AfterFirst(tqdm):
        first: tuple[float, int] | None = None  # (tqdm time, n) at the first update

        @property
        def format_dict(self):
            d = super().format_dict
            if self.first is not None:
                dt, dn = self._time() - self.first[0], self.n - self.first[1]
                d["rate"] = dn / dt if dt > 0 and dn > 0 else 0
            else:
                d["rate"] = 0
            return d

    return AfterFirst


def _unregister(reporter) -> None:
    with LOCK:
        if reporter in LIVE:
            LIVE.remove(reporter)


__all__ = ["HEARTBEAT", "INTERVAL", "SAID", "LogLines", "TerminalBar", "progress_interval"]
