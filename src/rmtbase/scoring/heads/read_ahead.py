"""Reading a model's next layer while this one is scored: :func:`read_ahead`.

One background thread runs the iterator one layer ahead; items and order are unchanged (same
bytes), at most two layers are alive, and a read error is raised where that layer is asked for.
A Ctrl-C is held while a read is handed to the thread (:func:`rmtbase.files.interrupts.deferred`:
an interrupted thread start would leave a read running that nothing waits for)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ...files.interrupts import deferred

_END = object()


def read_ahead(items):
    """Yield ``items`` in order, the next read in a background thread; closing waits for the read in
    flight, then closes the underlying iterator."""
    it = iter(items)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmtbase-read-ahead")
    pending = None
    try:
        with deferred():
            pending = pool.submit(next, it, _END)
        while True:
            item = pending.result()
            pending = None
            if item is _END:
                return
            with deferred():
                pending = pool.submit(next, it, _END)
            yield item
            del item  # not held while the caller waits for the next one
    finally:
        if pending is not None:
            pending.cancel()
            try:
                pending.result()
            except BaseException:  # noqa: BLE001 - the caller's error is the one raised
                pass
        pool.shutdown(wait=True)
        close = getattr(it, "close", None)
        if close is not None:
            try:
                close()
            except ValueError:  # still executing in a thread nothing waits for: it ends alone
                pass
