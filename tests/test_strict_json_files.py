"""The suite's own check (tests/conftest.py, ``_strict_json_files``): every JSON file a test
leaves under its ``tmp_path`` is strict JSON, no NaN or infinities."""

from __future__ import annotations

import pytest
from conftest import _not_strict_json


@pytest.mark.bad_json_input  # NaN and Infinity on purpose: the check's own input
def test_the_check_names_each_file_with_nan_or_infinities(tmp_path):
    (tmp_path / "a.json").write_text('{"x": NaN}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text("[1, -Infinity]")
    (tmp_path / "ok.json").write_text('{"x": null, "y": 1e308}')
    (tmp_path / "c.json").write_text("{oops")
    assert [x.split(": ", 1)[0] for x in _not_strict_json(tmp_path)] == [
        "a.json", "c.json", "sub/b.json"]
    assert _not_strict_json(tmp_path)[0] == "a.json: NaN is not JSON"
    assert _not_strict_json(tmp_path)[2] == "sub/b.json: -Infinity is not JSON"
