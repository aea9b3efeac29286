"""Plugins cannot change a default run: an installed plugin statistic or axis (entry points, as
pip leaves them) joins a score only when named; and every way of registering a statistic, null
or axis passes the same checks as an entry point.

Cost: three spectral Gaussian scores of 2 layers x 3 heads at d = 64, d_h = 8 (one table)."""

from __future__ import annotations

import numpy as np
import pytest
from _gaussian_heads import gaussian_heads
from test_plugins import MODULE, PYPROJECT, _install, fresh_registries  # noqa: F401 - fixture


def _heads():
    return gaussian_heads(2, 3, 8, 64, seed=3)


def test_a_plugin_joins_a_score_only_when_named(tmp_path, monkeypatch, score_cache,
                                                fresh_registries):  # noqa: F811
    """With the toy plugin installed, a plain spectral score has the same statistics, axes and
    p-values, bit for bit, as without it, and the plugin's statistic is never called; named
    (``("spectral", "top_share", "rms_ratio")``), its statistic and both axes join."""
    from rmtbase.scoring.score import score_heads
    from rmtbase.stats.spectral import SPECTRAL_STATS

    info, layers = _heads()
    kw = dict(stats="spectral", progress=False, spectrum_draws=0, draws=400)
    plain = score_heads(info, layers, **kw)
    monkeypatch.syspath_prepend(str(_install(tmp_path / "site", MODULE, PYPROJECT)))
    for registry in fresh_registries:
        registry.refresh()
    assert "top_share" in SPECTRAL_STATS  # the plugin is loaded (its fn checked once)
    log = tmp_path / "log.txt"
    monkeypatch.setenv("TOY_PLUGIN_LOG", str(log))
    again = score_heads(info, layers, **kw)
    assert not log.exists()  # neither the statistic nor the axis ran
    assert list(again["stat"].values) == list(plain["stat"].values)
    assert list(again["axis"].values) == list(plain["axis"].values)
    for v in ("p_value", "head_p_value", "profile_p"):
        # exact: the same compiled programs on the same inputs and cached null, one process
        np.testing.assert_array_equal(again[v].values, plain[v].values, err_msg=v)
    named = score_heads(info, layers, **{**kw, "stats": ("spectral", "top_share", "rms_ratio")})
    assert list(named["stat"].values) == [*plain["stat"].values, "qk.top_share"]
    assert list(named["axis"].values) == [*plain["axis"].values, "top_share", "rms_ratio"]
    assert set(log.read_text().split()) == {"statistic", "axis"}
    assert np.isfinite(named["p_value"].sel(stat="qk.top_share").values).all()


def test_every_registration_passes_the_entry_points_checks():
    """A statistic whose fn gives the wrong shape, a class that is no null, a factor axis, a
    storage or adapter of another type: refused by the registries themselves, not only by the
    entry-point loader or the kind's register()."""
    from rmtbase.decision.axes import REGISTRY as AXES
    from rmtbase.decision.axes import Axis
    from rmtbase.errors import InputError
    from rmtbase.models.registry import ADAPTERS
    from rmtbase.stats.null_registry import REGISTRY as NULLS
    from rmtbase.stats.statistic import REGISTRY as STATS
    from rmtbase.stats.statistic import Statistic, register
    from rmtbase.stats.storage import REGISTRY as STORAGES

    flat = Statistic("flat", "spectral", "f", "1", "f", fn=lambda lam: lam.reshape(-1))
    for add in (register, lambda r: STATS.register(r.name, r)):
        with pytest.raises(TypeError, match=r"^its fn returned shape \(16,\) for λ of shape"):
            add(flat)
    with pytest.raises(TypeError, match="^<class 'int'> is not a null named 'mine'"):
        NULLS.register("mine", int)
    with pytest.raises(InputError, match="a factor axis cannot be registered"):
        AXES.register("tr", Axis("tr", "shift", "m", "factors", lambda wq, wk, blocks=False: wq))
    with pytest.raises(TypeError, match="^1 is not a Storage record named 'x'$"):
        STORAGES.register("x", 1)
    with pytest.raises(TypeError, match="^1 is not an Adapter instance of model type 'x'$"):
        ADAPTERS.register("x", 1)
    assert "flat" not in STATS and "mine" not in NULLS and "tr" not in AXES
    assert STORAGES.peek("x") is None and ADAPTERS.peek("x") is None
