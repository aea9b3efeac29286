"""Plugins found through entry points (rmtbase.registry): a package made here, in tmp_path,
declares in its pyproject a null, a storage format, an architecture adapter, a head
statistic and two profile axes under the groups ``rmtbase.nulls``, ``rmtbase.storages``,
``rmtbase.adapters``, ``rmtbase.statistics`` and ``rmtbase.axes``; it is made importable and visible to ``importlib.metadata`` as pip
would leave it (the package beside a ``.dist-info`` whose ``entry_points.txt`` is written from
the pyproject's table), and ``rmtbase score`` on the command line uses each by name. Every
plugin object writes a line to ``$TOY_PLUGIN_LOG`` when it is used, so the test sees each was
used, not only named.

Cost: one ``rmtbase score`` in a fresh process (a GPT-2 of 2 layers x 4 heads of 16 under
the model type ``toygpt``), spectral statistics, 200 null draws at the toy storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

MODULE = textwrap.dedent('''
    """A user's rmtbase plugins: one of each kind (docs/extending.md)."""
    import os
    from dataclasses import dataclass
    from typing import ClassVar

    import jax.numpy as jnp

    from rmtbase.extend import Axis, GaussianNull, Statistic, Storage, adapter_class


    def _log(what):
        path = os.environ.get("TOY_PLUGIN_LOG")
        if path:
            with open(path, "a") as f:
                f.write(what + "\\n")


    @dataclass(frozen=True)
    class ToyNull(GaussianNull):
        """the Gaussian null under another name, logging its use"""

        name: ClassVar[str] = "toy-null"

        def reference(self, cells, storage, *, draws, seed, progress):
            _log("null")
            return super().reference(cells, storage, draws=draws, seed=seed, progress=progress)


    def _ternary(blocks, storage):
        _log("storage")
        d = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True)
        return jnp.clip(jnp.round(blocks / jnp.where(d > 0, d, 1.0)), -1, 1) * d


    TOY_T3 = Storage("toy_t3p", "block", _ternary, block=32)


    class ToyAdapter(adapter_class("gpt2")):
        model_types = ("toygpt",)

        def dims(self, cfg):
            _log("adapter")
            return super().dims(cfg)


    def _top_share(lam):
        _log("statistic")
        return lam.max(axis=-1) / lam.sum(axis=-1)


    TOP_SHARE = Statistic("top_share", "spectral", "share of the largest eigenvalue", "1",
                          "lambda_max / sum_lambda", sigma_power=0, effect="ratio",
                          fn=_top_share)


    TOP_SHARE_AXIS = Axis("top_share", "ratio", "top share / null median's",
                          "statistic", statistic="qk.top_share", needs="spectral",
                          figure=("log2 effect", -2.0, 2.0, "RdBu_r", "log2 top share / null"))


    def _rms_ratio(ds):
        _log("axis")
        return ds["sigma_q"].values / ds["sigma_k"].values


    RMS_RATIO = Axis("rms_ratio", "value", "rms(W_Q) / rms(W_K)", "dataset", _rms_ratio,
                     requires=("sigma_q", "sigma_k"))
''')

PYPROJECT = textwrap.dedent('''
    [project]
    name = "rmtbase-toyplugin"
    version = "0.1"
    dependencies = ["rmtbase"]

    [project.entry-points."rmtbase.nulls"]
    toy-null = "rmtbase_toyplugin:ToyNull"

    [project.entry-points."rmtbase.storages"]
    toy_t3p = "rmtbase_toyplugin:TOY_T3"

    [project.entry-points."rmtbase.adapters"]
    toygpt = "rmtbase_toyplugin:ToyAdapter"

    [project.entry-points."rmtbase.statistics"]
    top_share = "rmtbase_toyplugin:TOP_SHARE"

    [project.entry-points."rmtbase.axes"]
    top_share = "rmtbase_toyplugin:TOP_SHARE_AXIS"
    rms_ratio = "rmtbase_toyplugin:RMS_RATIO"
''')


def _install(root: Path, module: str, pyproject: str, name="rmtbase_toyplugin") -> Path:
    """The package ``name`` and its ``.dist-info`` in ``root``, as pip installs them: the
    entry points written from ``pyproject``'s ``[project.entry-points]`` table."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(pyproject)
    project = tomllib.loads(pyproject)["project"]
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(module)
    info = root / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in project["entry-points"].items()))
    return root


def _gpt2_as(path: Path, model_type: str) -> str:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=64, n_positions=32,
                               bos_token_id=0, eos_token_id=0)).save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg["model_type"] = model_type  # no shipped adapter reads it: only the plugin's
    (path / "config.json").write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.slow
def test_rmtbase_score_uses_each_plugin_by_name(tmp_path):
    """``rmtbase score --null toy-null --quantized-null toy_t3p --stats
    spectral,top_share,rms_ratio --sort-by top_share`` on a
    ``toygpt`` model in a fresh process: the null, the storage's quantiser, the adapter, the
    statistic and the axes are each used, and the scores say so: the statistic axis carries the
    statistic's own value, effect and p, the dataset axis its function of the scores."""
    import xarray as xr

    root = _install(tmp_path / "site", MODULE, PYPROJECT)
    model = _gpt2_as(tmp_path / "model", "toygpt")
    log, out = tmp_path / "log.txt", tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")]), "TOY_PLUGIN_LOG": str(log), "RMTBASE_CACHE": str(tmp_path / "c")}
    cmd = [sys.executable, "-m", "rmtbase", "score", model, "--null", "toy-null",
           "--quantized-null", "toy_t3p", "--stats", "spectral,top_share,rms_ratio",
           "--draws", "200",
           "--sort-by", "top_share",
           "--no-figures", "--quiet", "--out", str(out)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    used = set(log.read_text().split())
    assert used == {"null", "storage", "adapter", "statistic", "axis"}, used
    with xr.open_dataset(out / "scores.nc") as ds:
        assert ds.attrs["null_kind"] == "toy-null"
        assert ds.attrs["architecture"] == "toygpt"
        assert ds.attrs["null_storage"] == "toy_t3p"
        assert "qk.top_share" in set(ds["stat"].values)
        p = ds["p_value"].sel(stat="qk.top_share").values
        assert np.isfinite(p).all() and (p >= 1 / 201).all() and (p <= 1).all()
        assert list(ds["axis"].values[-2:]) == ["top_share", "rms_ratio"]
        top = {"axis": "top_share"}
        # exact: a statistic axis copies the statistic's stored p, value and effect
        np.testing.assert_array_equal(ds["profile_p"].sel(top).values, p)
        np.testing.assert_array_equal(ds["profile_value"].sel(top).values,  # exact: a copy
                                      ds["value"].sel(stat="qk.top_share").values)
        np.testing.assert_array_equal(ds["profile_effect"].sel(top).values,  # exact: a copy
                                      ds["effect_size"].sel(stat="qk.top_share").values)
        assert str(ds["axis_effect"].sel(top).values) == "ratio"
        ratio = ds["sigma_q"].values / ds["sigma_k"].values
        # exact: the dataset axis is this one IEEE division of the same stored values
        np.testing.assert_array_equal(ds["profile_value"].sel(axis="rms_ratio").values, ratio)
        assert not ds["profile_flag"].sel(axis="rms_ratio").values.any()


@pytest.fixture
def fresh_registries():
    """The five registries scan the entry points again (a dist-info added by the test is
    found), and forget the test's plugins afterwards."""
    from rmtbase.decision.axes import REGISTRY as AXES
    from rmtbase.models.registry import ADAPTERS
    from rmtbase.stats.null_registry import REGISTRY as NULLS
    from rmtbase.stats.statistic import REGISTRY as STATS
    from rmtbase.stats.storage import _REGISTRY as STORAGES

    regs = (NULLS, STORAGES, ADAPTERS, STATS, AXES)
    before = [dict((k, r.peek(k)) for k in r._entries) for r in regs]
    for r in regs:
        r.refresh()
    yield regs
    for r, old in zip(regs, before, strict=True):
        for k in [k for k in r._entries if k not in old]:
            r.unregister(k)
        r.refresh()
    for mod in [m for m in sys.modules if m.startswith(("rmtbase_toyplugin", "rmtbase_broken"))]:
        del sys.modules[mod]


BROKEN = textwrap.dedent('''
    [project]
    name = "rmtbase-broken"
    version = "0.1"

    [project.entry-points."rmtbase.nulls"]
    broken-null = "rmtbase_broken:NoSuchNull"

    [project.entry-points."rmtbase.storages"]
    broken_fmt = "rmtbase_broken_missing:FMT"
''')


def test_a_broken_plugin_is_one_line_naming_it(tmp_path, monkeypatch, fresh_registries):
    from rmtbase.errors import InputError
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.null_kind import NULLS, Null
    from rmtbase.stats.storage import storage_record

    root = _install(tmp_path / "site", "X = 1\n", BROKEN, name="rmtbase_broken")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        assert "broken-null" not in NULLS and "gaussian" in NULLS  # loads the nulls' group
        assert storage_record("float32").is_identity  # registered: nothing loaded
        assert "broken_fmt" not in list(fresh_registries[1])  # loads the storages' group
    lines = [str(w.message) for w in got]
    assert len(lines) == 2 and all("\n" not in x for x in lines), lines
    assert lines[0] == ("rmtbase: null plugin 'broken-null' (rmtbase_broken:NoSuchNull, entry "
                        "point group rmtbase.nulls, distribution rmtbase-broken 0.1) was not "
                        "loaded: AttributeError: module 'rmtbase_broken' has no attribute "
                        "'NoSuchNull'")
    assert lines[1].startswith("rmtbase: storage plugin 'broken_fmt' (rmtbase_broken_missing:FMT"
                               ", entry point group rmtbase.storages, distribution rmtbase-broken "
                               "0.1) was not loaded: ModuleNotFoundError")
    with pytest.raises(InputError) as exc:
        Null.parse("broken-null")
    assert str(exc.value) == lines[0]  # asked for by name: the same line
    with pytest.raises(InputError, match="^null must be one of gaussian, permutation, got 'x'$"):
        Null.parse("x")


def test_in_process_plugins_and_nothing_frozen(tmp_path, monkeypatch, fresh_registries):
    """The same package on sys.path: each registry finds its plugin on the first lookup; a
    storage registered after rmtbase.scoring.score was imported is accepted by
    ``quantized_null=``; the CLI's --null and --quantized-null choices list the plugins, and
    --sort-by the axes (checked against the --stats the axis needs)."""
    from rmtbase.cli import build_parser
    from rmtbase.cli.score_checks import _check_sort_by
    from rmtbase.decision.axes import REGISTRY as AXES
    from rmtbase.errors import InputError
    from rmtbase.models import SUPPORTED
    from rmtbase.report.profile_figures import SCALES
    from rmtbase.scoring.profile.axes import AXES as PROFILE_AXES
    from rmtbase.scoring.settings import ScoreSettings
    from rmtbase.stats.null_kind import NULLS, Null
    from rmtbase.stats.spectral import SPECTRAL_STATS
    from rmtbase.stats.statistic import statistic
    from rmtbase.stats.storage import storage_record

    root = _install(tmp_path / "site", MODULE, PYPROJECT)
    monkeypatch.syspath_prepend(str(root))
    assert "top_share" in PROFILE_AXES and "rms_ratio" in PROFILE_AXES  # loads the axes' group
    assert AXES["top_share"].statistic == "qk.top_share"
    assert PROFILE_AXES["rms_ratio"] == ("value", "rms(W_Q) / rms(W_K)")
    assert "top_share" in SCALES and "rms_ratio" not in SCALES  # a panel only with a figure
    sort = ["score", "m", "--sort-by", "top_share", "--stats"]
    _check_sort_by(build_parser().parse_args(sort + ["spectral,top_share"]))
    with pytest.raises(InputError, match="^--sort-by top_share needs --stats spectral or all$"):
        _check_sort_by(build_parser().parse_args(sort + ["elementwise"]))
    with pytest.raises(InputError, match=r"^--sort-by top_share is a plugin's axis: name it in "
                                         r"--stats \(--stats spectral,top_share\)$"):
        _check_sort_by(build_parser().parse_args(sort + ["spectral"]))
    assert Null.parse("toy-null").name == "toy-null" and NULLS[-1] == "toy-null"
    assert storage_record("toy_t3p").block == 32
    assert "toygpt" in SUPPORTED
    assert statistic("qk.top_share").name == "top_share" and SPECTRAL_STATS[-1] == "top_share"
    null = ScoreSettings(null="toy-null", quantized_null="toy_t3p").null
    assert null.name == "toy-null"
    args = build_parser().parse_args(["score", "m", "--null", "toy-null", "--quantized-null",
                                      "toy_t3p"])
    assert (args.null, args.quantized_null) == ("toy-null", "toy_t3p")


FACTOR_AXIS = textwrap.dedent('''
    [project]
    name = "rmtbase-broken-axis"
    version = "0.1"

    [project.entry-points."rmtbase.axes"]
    qk_trace = "rmtbase_broken_axis:QK_TRACE"
''')


def test_a_factor_axis_from_outside_is_refused_in_one_line(tmp_path, monkeypatch,
                                                            fresh_registries):
    """A factor axis (a function of W_Q, W_K) has no law in the Gaussian profile null:
    register() refuses it, and so does the entry-point loader (one PluginWarning line, the
    same line when it is asked for by name); a record that mixes sources is refused as made."""
    from rmtbase.decision.axes import REGISTRY as AXES
    from rmtbase.decision.axes import Axis, register
    from rmtbase.errors import InputError
    from rmtbase.registry import PluginWarning

    module = ("from rmtbase.decision.axes import Axis\n"
              "QK_TRACE = Axis('qk_trace', 'shift', 'tr W_Q^T W_K', 'factors',\n"
              "                lambda wq, wk, blocks=False: (wq * wk).sum((-2, -1)))\n")
    with pytest.raises(InputError, match="a factor axis cannot be registered"):
        register(Axis("qk_trace", "shift", "m", "factors", lambda wq, wk, blocks=False: wq))
    root = _install(tmp_path / "site", module, FACTOR_AXIS, name="rmtbase_broken_axis")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        assert "qk_trace" not in AXES and "symmetry" in AXES
    (line,) = [str(w.message) for w in got]
    assert line.startswith("rmtbase: axis plugin 'qk_trace' (rmtbase_broken_axis:QK_TRACE, "
                           "entry point group rmtbase.axes, distribution rmtbase-broken-axis 0.1)"
                           " was not loaded: InputError: axis qk_trace: a factor axis cannot be "
                           "registered"), line
    assert AXES.unknown("qk_trace", "unknown axis") == line
    with pytest.raises(InputError, match="effect must be 'value' for a dataset axis"):
        Axis("x", "value", "m", "statistic", statistic="qk.npr")
    with pytest.raises(InputError, match="only factor axes enter the head decision"):
        Axis("x", "ratio", "m", "statistic", statistic="qk.npr", decision=True)


def test_a_plugin_statistic_is_derived_from_a_stored_table(tmp_path, monkeypatch,
                                                            fresh_registries):
    """The plugin's top_share = λ_max/Σλ of every draw of a shipped table, derived from the
    table's stored spectra (no table drawn), equals the ratio of the table's own lambda_max and
    sum_lambda variables (computed when the table was made)."""
    from pathlib import Path

    import xarray as xr

    import rmtbase
    from rmtbase.scoring.nulls.layer_null import null_arrays

    root = _install(tmp_path / "site", MODULE, PYPROJECT)
    monkeypatch.syspath_prepend(str(root))
    path = Path(rmtbase.__file__).parent / "data" / "lowrank-d384-dh32-all-n2000-seed0-float32-v1.nc"
    with xr.open_dataset(path) as table:
        got = null_arrays(table, ["qk.top_share", "qk.lambda_max"], 384, 32)
        want = (table["lambda_max"].values / table["sum_lambda"].values).ravel()
    assert got["qk.top_share"].shape == (2000,)
    # float32 tables: Σλ summed in float32 here and when the table was made (a few ulp, 6e-8
    # relative each)
    np.testing.assert_allclose(got["qk.top_share"], want, rtol=4e-6)



SHADOW = textwrap.dedent('''
    [project]
    name = "rmtbase-broken-shadow"
    version = "0.1"

    [project.entry-points."rmtbase.adapters"]
    gpt2 = "rmtbase_broken_shadow:Mine"
''')


def test_a_plugin_named_like_a_shipped_entry_warns_without_a_full_scan(tmp_path, monkeypatch,
                                                                       fresh_registries):
    """An adapter plugin named ``gpt2``: the first lookup of ``gpt2`` (which needs no scan of
    the plugins) warns once, naming both owners, and the shipped adapter is the one used."""
    import warnings

    from rmtbase.models.gpt2 import GPT2Adapter
    from rmtbase.models.registry import ADAPTERS, SUPPORTED
    from rmtbase.registry import PluginWarning

    module = ("from rmtbase.extend import adapter_class\n"
              "class Mine(adapter_class('gpt2')):\n    model_types = ('gpt2',)\n")
    root = _install(tmp_path / "site", module, SHADOW, name="rmtbase_broken_shadow")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        assert "gpt2" in SUPPORTED
        assert type(ADAPTERS["gpt2"]) is GPT2Adapter
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(ADAPTERS)  # a full scan: not said again
    (line,) = [str(w.message) for w in got]
    assert line == ("rmtbase: adapter plugin 'gpt2' (rmtbase_broken_shadow:Mine, entry point "
                    "group rmtbase.adapters, distribution rmtbase-broken-shadow 0.1) was not "
                    "loaded: the name 'gpt2' is taken by rmtbase's own adapter "
                    "(rmtbase.models.gpt2)")
    assert "rmtbase_broken_shadow" not in sys.modules


def _dup(root: Path, dist: str, module: str) -> Path:
    pyproject = (f'[project]\nname = "{dist}"\nversion = "0.1"\n\n'
                 f'[project.entry-points."rmtbase.nulls"]\ndup-null = "{module}:Dup"\n')
    code = ("from dataclasses import dataclass\nfrom typing import ClassVar\n"
            "from rmtbase.extend import GaussianNull\n"
            "@dataclass(frozen=True)\nclass Dup(GaussianNull):\n"
            "    name: ClassVar[str] = 'dup-null'\n")
    return _install(root, code, pyproject, name=module)


@pytest.mark.parametrize("first", ["a", "z"])
def test_of_two_plugins_giving_one_name_the_same_wins_whatever_the_order(
        tmp_path, monkeypatch, fresh_registries, first):
    """Two distributions give a null ``dup-null``: whichever is first on the path, the one
    first by distribution name is loaded, the other is one warning naming both."""
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.null_registry import REGISTRY

    a = _dup(tmp_path / "a", "rmtbase-broken-dupa", "rmtbase_broken_dupa")
    z = _dup(tmp_path / "z", "rmtbase-broken-dupz", "rmtbase_broken_dupz")
    for root in ((z, a) if first == "a" else (a, z)):  # the last prepended is first
        monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        assert "dup-null" in REGISTRY
    assert REGISTRY.owner("dup-null").startswith("rmtbase_broken_dupa")
    (line,) = [str(w.message) for w in got]
    assert line.startswith("rmtbase: null plugin 'dup-null' (rmtbase_broken_dupz:Dup, ")
    assert "is also given by rmtbase_broken_dupa:Dup" in line


def test_a_storage_registered_after_import_can_be_forced():
    """``quantized_null=`` reads the registry when a settings record is built: a format
    registered after rmtbase.scoring (its records) was imported is accepted."""
    import rmtbase.scoring.matrices.components  # noqa: F401 - imported before the format exists
    from rmtbase.errors import InputError
    from rmtbase.scoring.settings import ComponentSettings, ScoreSettings
    from rmtbase.stats.names import QUANTIZED_NULL
    from rmtbase.stats.storage import Storage, register, unregister

    with pytest.raises(InputError, match="quantized_null must be one of"):
        ScoreSettings(quantized_null="late_fmt")
    register(Storage("late_fmt", "block", lambda x, r: x, block=32))
    try:
        null = ScoreSettings(quantized_null="late_fmt").null
        assert null.name == "gaussian" and "late_fmt" in QUANTIZED_NULL
        assert ComponentSettings(quantized_null="late_fmt").quantized_null == "late_fmt"
    finally:
        unregister("late_fmt")
    assert "late_fmt" not in QUANTIZED_NULL
