"""A plugin statistic named like one of rmtbase's optional statistics (``ww_alpha``: shipped,
joining a score only when named) never replaces it, in any process state: named first, named
after an earlier score loaded every plugin, registered in process; and the command line's
warning calls the name rmtbase's own, not "another plugin".

Cost: no score; one ``rmtbase score`` start-up that stops at a missing model folder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_plugins import MODULE, PYPROJECT, _install, fresh_registries  # noqa: F401 - fixture

SHADOW = textwrap.dedent('''
    [project]
    name = "rmtbase-broken-wwalpha"
    version = "0.1"

    [project.entry-points."rmtbase.statistics"]
    ww_alpha = "rmtbase_broken_wwalpha:WW_ALPHA"
''')
CODE = textwrap.dedent('''
    from rmtbase.extend import Statistic

    WW_ALPHA = Statistic("ww_alpha", "spectral", "not WeightWatcher's", "1", "lambda_max",
                         fn=lambda lam: lam.max(axis=-1))
''')
WANT = ("rmtbase: statistic plugin 'ww_alpha' (rmtbase_broken_wwalpha:WW_ALPHA, entry point "
        "group rmtbase.statistics, distribution rmtbase-broken-wwalpha 0.1) was not loaded: the "
        "name 'ww_alpha' is taken by rmtbase's own statistic (rmtbase.stats.heavy_tail)")


def _site(tmp_path) -> Path:
    return _install(tmp_path / "shadow", CODE, SHADOW, name="rmtbase_broken_wwalpha")


def test_the_names_reserved_are_the_optional_statistics():
    from rmtbase.stats.heavy_tail import HEAVY_TAIL
    from rmtbase.stats.statistic import OPTIONAL_NAMES

    assert tuple(s.name for s in HEAVY_TAIL) == OPTIONAL_NAMES


@pytest.mark.parametrize("earlier", [False, True])
def test_a_plugin_ww_alpha_never_replaces_the_shipped_one(tmp_path, monkeypatch,
                                                          fresh_registries, earlier):  # noqa: F811
    """``earlier``: a score named a plugin statistic first (every entry point loaded) before
    ``ww_alpha`` is named; either way the record used is WeightWatcher's and one warning names
    both owners; the plugin's module is never imported."""
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.choice import named
    from rmtbase.stats.heavy_tail import HEAVY_TAIL

    monkeypatch.syspath_prepend(str(_site(tmp_path)))
    monkeypatch.syspath_prepend(str(_install(tmp_path / "toy", MODULE, PYPROJECT)))
    with pytest.warns(PluginWarning) as got:
        if earlier:
            assert [s.name for s in named(("spectral", "top_share"))] == ["top_share"]
        (record,) = named(("spectral", "ww_alpha"))
    assert record is HEAVY_TAIL[0]
    assert fresh_registries[3]["ww_alpha"] is HEAVY_TAIL[0]
    assert [str(w.message) for w in got if "ww_alpha" in str(w.message)] == [WANT]
    assert "rmtbase_broken_wwalpha" not in sys.modules


def test_registering_a_reserved_name_in_process_is_refused(fresh_registries):  # noqa: F811
    from rmtbase.errors import InputError
    from rmtbase.stats.statistic import Statistic, register

    mine = Statistic("ww_alpha_weighted", "spectral", "m", "1", "m",
                     fn=lambda lam: lam.max(axis=-1))
    with pytest.raises(InputError, match="^the statistic name 'ww_alpha_weighted' is rmtbase's "
                                         r"own \(rmtbase.stats.heavy_tail\)"):
        register(mine)
    with pytest.raises(InputError, match="is rmtbase's own"):
        fresh_registries[3].register("ww_alpha_weighted", mine)


def test_the_command_line_warning_calls_it_rmtbases_own(tmp_path):
    """``rmtbase score MISSING --stats spectral,ww_alpha`` in a fresh process: the plugin's
    warning (one line) names rmtbase's own statistic; the run stops at the missing folder."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(_site(tmp_path)), *os.environ.get("PYTHONPATH", "").split(os.pathsep)])}
    got = subprocess.run([sys.executable, "-m", "rmtbase", "score", str(tmp_path / "missing"),
                          "--stats", "spectral,ww_alpha", "--quiet"], env=env,
                         capture_output=True, text=True, timeout=300)
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2, got.stderr
    assert "another plugin" not in got.stderr
    assert f"rmtbase: warning: {WANT.removeprefix('rmtbase: ')}" in lines, lines
