"""Reading a model's next layer while this one is scored: :func:`read_ahead`.

A layer iterator (:func:`rmtbase.models.load_heads`) reads, converts and GQA-expands one layer
per ``next()``: file reads and numpy casts, which release the GIL, while scoring a layer is
JAX work on the CPU's other threads or on an accelerator. :func:`read_ahead` runs the
iterator's ``next()`` in one background thread, one layer ahead: the layer handed out is
scored while the next one is read. The items and their order are the iterator's, unchanged
(the same function reads them, in the same order, one call at a time), so scores are the same
bytes; at most two layers are alive at once (the one being scored and the one being read), and
an error raised while reading a layer is raised where that layer is asked for.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

_END = object()


def read_ahead(items):
    """Yield the items of the iterable ``items`` in order, the next one read in a background
    thread while the caller works on the current one (module docstring). Closing the
    generator (or an error in the caller) waits for the read in flight, then closes the
    underlying iterator (its ``finally`` blocks, e.g. a file's close, run)."""
    it = iter(items)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmtbase-read-ahead")
    pending = None
    try:
        pending = pool.submit(next, it, _END)
        while True:
            item = pending.result()
            pending = None
            if item is _END:
                return
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
            close()
