"""Libraries' own progress bars turned off while rmtbase works (:class:`no_library_bars`).

Inside the block transformers' load report is dropped when it lists only *unexpected* keys
(``lm_head.weight`` of a causal-LM checkpoint); missing or mismatched keys still show.
Importing this module imports nothing."""

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
    """Context manager: transformers' bars and unexpected-keys-only load report off inside the
    block, its setting restored after; without transformers, nothing."""

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
