"""A library's own progress bars, turned off while rmtbase works (transformers' "Loading
weights" bar while a model is read): :class:`no_library_bars` turns them off for a block and
restores the library's setting after. rmtbase's own progress goes through one channel
(:mod:`rmtbase.progress`, which re-exports this); a library bar in a log is a line of
carriage returns. Importing this module imports nothing (transformers only inside the block).
"""

from __future__ import annotations


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
