"""The hand-kept list of quick-tier cases moved to the slow tier (tests/conftest.py,
``QUICK_TIER_SLOW``) names tests that exist: a stale id stops the run instead of moving
nothing."""

from types import SimpleNamespace

import pytest
from conftest import QUICK_TIER_SLOW, _check_slow_ids_exist


def test_a_stale_id_of_a_collected_file_stops_the_run():
    listed = next(iter(QUICK_TIER_SLOW))
    file = listed.split("::", 1)[0]
    seen = {f"{file}::test_something_else"}
    with pytest.raises(pytest.UsageError, match="do not exist: .*" + listed.split("::")[1][:20]):
        _check_slow_ids_exist(SimpleNamespace(args=["tests"]), seen)


def test_files_not_collected_and_single_test_runs_are_not_checked():
    _check_slow_ids_exist(SimpleNamespace(args=["tests"]), {"test_other.py::test_x"})
    listed = next(iter(QUICK_TIER_SLOW))
    file = listed.split("::", 1)[0]
    _check_slow_ids_exist(SimpleNamespace(args=[f"tests/{file}::test_x"]), {f"{file}::test_x"})

