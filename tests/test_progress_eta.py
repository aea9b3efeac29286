"""The time left on a progress line is the rate after the first update (which carries the
stage's compilation) times the work left (rmtbase.reporters.LogLines)."""

import io

from rmtbase import reporters


def test_the_first_update_and_its_compilation_are_not_in_the_time_left():
    """10 units: the first done at t = 100 s (a compile), then one a second. Counting the
    first unit the rate would be 100 s a unit ("about 800 s left" at 2/10, as in
    "about 5064 s left" for a stage done 23 s later); from the first update on it is 1 s:
    8 units left, "about 8 s left". The line at 1/10 has no estimate."""
    now = [0.0]
    log = io.StringIO()
    bar = reporters.LogLines(10, "rmtbase layers", "layer", stream=log, interval=0,
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
    assert lines[3] == "rmtbase layers: 5/10 layers (50%), 104 s elapsed, stopped"


def test_a_bar_says_done_only_when_every_unit_is():
    """A bar left by an exception at 46 of 100 ends "stopped", never "done"; one that counted
    every unit ends "done"."""
    import pytest

    log = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with reporters.LogLines(100, "rmtbase task", "prompt", stream=log, interval=0) as bar:
            bar.update(46)
            raise KeyboardInterrupt
    last = log.getvalue().splitlines()[-1]
    assert last.startswith("rmtbase task: 46/100 prompts (46%)") and last.endswith(", stopped")
    assert "done" not in log.getvalue()
    log = io.StringIO()
    with reporters.LogLines(100, "rmtbase task", "prompt", stream=log, interval=0) as bar:
        bar.update(46)
        bar.update(54)
    last = log.getvalue().splitlines()[-1]
    assert last.startswith("rmtbase task: 100/100 prompts (100%)") and last.endswith(", done")


def test_a_terminal_bar_leaves_the_first_update_out_of_its_rate():
    """The tqdm bar of a terminal (rmtbase.reporters.TerminalBar), same units and clock as above:
    no time left at 1/10 ("?"), 8 s at 2/10 and 5 s at 5/10, 1 unit/s. tqdm's own moving
    average starts from the first update's 100 s and said about 5 min at 2/10."""
    from tqdm import tqdm

    now = [0.0]
    bar = reporters.TerminalBar(10, "rmtbase layers", "layer", io.StringIO())
    inner = bar._bar
    inner._time = lambda: now[0]
    inner.start_t = inner.last_print_t = 0.0
    inner.mininterval = inner.miniters = 0
    seen = []
    for t, k in ((100.0, 1), (101.0, 1), (104.0, 3)):
        now[0] = t
        bar.update(k)
        seen.append(tqdm.format_meter(**inner.format_dict))
    bar.close()
    assert "<?," in seen[0] and "?layer/s" in seen[0], seen[0]
    assert "<00:08," in seen[1], seen[1]
    assert "<00:05," in seen[2], seen[2]
    assert "1.00layer/s" in seen[2], seen[2]
