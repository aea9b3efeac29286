"""The time left on a progress line is the rate after the first update (which carries the
stage's compilation) times the work left (rmtbase.progress.LogLines)."""

import io

from rmtbase import progress


def test_the_first_update_and_its_compilation_are_not_in_the_time_left():
    """10 units: the first done at t = 100 s (a compile), then one a second. Counting the
    first unit the rate would be 100 s a unit ("about 800 s left" at 2/10, the issue's
    "about 5064 s left" for a stage done 23 s later); from the first update on it is 1 s:
    8 units left, "about 8 s left". The line at 1/10 has no estimate."""
    now = [0.0]
    log = io.StringIO()
    bar = progress.LogLines(10, "rmtbase layers", "layer", stream=log, interval=0,
                            clock=lambda: now[0])
    now[0] = 100.0
    bar.update(1)
    now[0] = 101.0
    bar.update(1)
    now[0] = 104.0
    bar.update(3)
    bar.close()
    lines = log.getvalue().splitlines()
    assert lines[0] == "rmtbase layers: 1/10 layers (10%), 100 s elapsed"
    assert lines[1] == "rmtbase layers: 2/10 layers (20%), 101 s elapsed, about 8 s left"
    assert lines[2] == "rmtbase layers: 5/10 layers (50%), 104 s elapsed, about 5 s left"
    assert lines[3] == "rmtbase layers: 5/10 layers (50%), 104 s elapsed, done"
