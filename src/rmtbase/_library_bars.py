"""A library's own progress bars, turned off while rmtbase works (transformers' "Loading
weights" and "Writing model shards" bars while a model is read or saved): :class:`no_library_bars`
turns them off for a block and restores the library's setting after. Inside the block
transformers' **load report** (a table of checkpoint keys, logged as a warning) is dropped too
when it lists only *unexpected* keys (``lm_head.weight`` when rmtbase reads a causal-LM
checkpoint's base model: expected); a report naming missing or mismatched keys still shows.
rmtbase's own progress goes through one channel (:mod:`rmtbase.progress`, which re-exports
this); a library bar in a log is a line of carriage returns. Importing this module imports
nothing (transformers only inside the block).
"""

from __future__ import annotations

import logging

#: The logger transformers' ``from_pretrained`` writes its load report with.
_REPORT_LOGGER = "transformers.modeling_utils"


class _OnlyUnexpected(logging.Filter):
    """Drops a load report whose keys are all UNEXPECTED (no MISSING, MISMATCH, CONVERSION)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if "LOAD REPORT" not in msg:
            return True
        return any(w in msg for w in ("MISSING", "MISMATCH", "CONVERSION"))


class no_library_bars:
    """Context manager: transformers' own progress bars off inside the block (rmtbase's
    progress follows this module's policy; a library bar in a log is a line of carriage
    returns), and its load report of only unexpected keys dropped (module docstring); the
    library's setting restored on leaving. Without transformers: nothing."""

    def __enter__(self):
        try:
            from transformers.utils import logging as tf_logging
        except ImportError:
            self._log = None
            return self
        self._log = tf_logging
        self._was = tf_logging.is_progress_bar_enabled()
        tf_logging.disable_progress_bar()
        self._filter = _OnlyUnexpected()
        logging.getLogger(_REPORT_LOGGER).addFilter(self._filter)
        return self

    def __exit__(self, *exc) -> bool:
        if self._log is not None:
            logging.getLogger(_REPORT_LOGGER).removeFilter(self._filter)
            if self._was:
                self._log.enable_progress_bar()
        return False
