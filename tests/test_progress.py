"""rmtbase.progress.stage: the one line a long piece of work prints when a stage starts (the
progress policy's counterpart of a bar for work without a count, e.g. a study's stages)."""

from __future__ import annotations

import io

from rmtbase.progress import stage


class _Closed(io.StringIO):
    def write(self, s):
        raise ValueError("I/O operation on closed file")


def test_stage_prints_one_line_or_nothing():
    out = io.StringIO()
    stage("product_networks", "residual stream, d = 384, 400 draws", stream=out)
    assert out.getvalue() == "product_networks: residual stream, d = 384, 400 draws\n"
    quiet = io.StringIO()
    stage("x", "y", enabled=False, stream=quiet)
    assert quiet.getvalue() == ""
    stage("x", "y", stream=_Closed())  # a closed stream does not stop the work


def test_stage_goes_to_stderr_not_stdout(capsys):
    stage("head_function", "scoring all-MiniLM-L6-v2")
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == "head_function: scoring all-MiniLM-L6-v2\n"


def test_no_library_bars_turns_transformers_bars_off_and_restores_them():
    from transformers.utils import logging as tf_logging

    from rmtbase._library_bars import no_library_bars

    before = tf_logging.is_progress_bar_enabled()
    try:
        tf_logging.enable_progress_bar()
        with no_library_bars():
            assert not tf_logging.is_progress_bar_enabled()
        assert tf_logging.is_progress_bar_enabled()
        tf_logging.disable_progress_bar()  # a caller's own choice is kept
        with no_library_bars():
            pass
        assert not tf_logging.is_progress_bar_enabled()
    finally:
        (tf_logging.enable_progress_bar if before else tf_logging.disable_progress_bar)()
