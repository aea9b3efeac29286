"""The plugin contract, tried as a plugin author meets it (``docs/extending.md``, module
docstring of :mod:`rmtbase.registry`): a small package installed as pip leaves one (the package
beside a ``.dist-info`` whose ``entry_points.txt`` names its plugins), on ``sys.path`` or, for a
fresh process, on ``PYTHONPATH``.

- a fresh process that imports the plugin module first finds every plugin, with no warning;
- ``rmtbase score --help`` with a plugin installed (one that imports JAX) imports no JAX;
- an entry point named like a shipped null or storage (``gaussian``, ``q4_0``) is one warning
  naming both owners, and the shipped one stays;
- a raising or wrong-shaped statistic is not loaded (one line), the shipped statistics work;
  a raising or wrong-shaped axis or null is one :class:`PluginError` line naming it (a
  dataset axis in a score: left out with that line as one warning, command line too);
- a null whose draws are all NaN is refused, naming it;
- a greedy detector never overrides the shipped formats or a float;
- ``quantized_null=`` keeps a failed storage plugin's line;
- a null not stored like the checkpoint is labelled with its own storage.

Cost: two fresh processes (a few seconds each), in-process lookups on toy arrays.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_plugins import _install, fresh_registries  # noqa: F401 - fixture

SRC = str(Path(__file__).resolve().parents[1] / "src")

PLUGIN = textwrap.dedent('''
    """A plugin package importing rmtbase.extend only."""
    from dataclasses import dataclass
    from typing import ClassVar

    import jax.numpy as jnp  # at the top on purpose: score --help must not import this module

    from rmtbase.extend import Axis, GaussianNull, Statistic, Storage, adapter_class


    @dataclass(frozen=True)
    class PcNull(GaussianNull):
        """the Gaussian null, renamed"""

        name: ClassVar[str] = "pc-null"


    def _half(blocks, storage):
        return jnp.round(blocks * 2) / 2


    PC_FMT = Storage("pc_fmt", "block", _half, block=32)


    class PcAdapter(adapter_class("gpt2")):
        model_types = ("pcgpt",)


    PC_STAT = Statistic("pc_stat", "spectral", "top share", "1", "lambda_max / sum_lambda",
                        sigma_power=0, effect="ratio",
                        fn=lambda lam: lam.max(axis=-1) / lam.sum(axis=-1))
    PC_AXIS = Axis("pc_axis", "value", "rms ratio", "dataset",
                   lambda ds: ds["sigma_q"].values / ds["sigma_k"].values,
                   requires=("sigma_q", "sigma_k"))
''')

PYPROJECT = textwrap.dedent('''
    [project]
    name = "rmtbase-pc"
    version = "0.1"

    [project.entry-points."rmtbase.nulls"]
    pc-null = "rmtbase_pc:PcNull"

    [project.entry-points."rmtbase.storages"]
    pc_fmt = "rmtbase_pc:PC_FMT"

    [project.entry-points."rmtbase.adapters"]
    pcgpt = "rmtbase_pc:PcAdapter"

    [project.entry-points."rmtbase.statistics"]
    pc_stat = "rmtbase_pc:PC_STAT"

    [project.entry-points."rmtbase.axes"]
    pc_axis = "rmtbase_pc:PC_AXIS"
''')


def _env(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), SRC])}


def test_a_fresh_process_importing_the_plugin_first_finds_every_plugin(tmp_path):
    root = _install(tmp_path / "site", PLUGIN, PYPROJECT, name="rmtbase_pc")
    code = textwrap.dedent('''
        import warnings
        warnings.simplefilter("error")  # any PluginWarning fails
        import rmtbase_pc  # the plugin module first, as a Python user's script does
        import rmtbase.models  # imports every reader (nothing enumerates plugins at import)
        from rmtbase.decision.axes import REGISTRY as AXES
        from rmtbase.models.registry import ADAPTERS
        from rmtbase.stats.null_kind import Null
        from rmtbase.stats.statistic import statistic
        from rmtbase.stats.storage import storage_record
        assert type(Null.parse("pc-null")) is rmtbase_pc.PcNull
        assert storage_record("pc_fmt") is rmtbase_pc.PC_FMT
        assert isinstance(ADAPTERS["pcgpt"], rmtbase_pc.PcAdapter)
        assert statistic("qk.pc_stat") is rmtbase_pc.PC_STAT
        assert AXES["pc_axis"] is rmtbase_pc.PC_AXIS
        print("ok")
    ''')
    run = subprocess.run([sys.executable, "-c", code], env=_env(root), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_score_help_with_a_plugin_installed_imports_no_jax(tmp_path):
    root = _install(tmp_path / "site", PLUGIN, PYPROJECT, name="rmtbase_pc")
    code = ("import runpy, sys\n"
            "sys.argv = ['rmtbase', 'score', '--help']\n"
            "try:\n"
            "    runpy.run_module('rmtbase', run_name='__main__')\n"
            "except SystemExit as exc:\n"
            "    assert exc.code in (0, None), exc.code\n"
            "print(sorted(m for m in ('jax', 'rmtbase_pc') if m in sys.modules), "
            "file=sys.stderr)\n")
    run = subprocess.run([sys.executable, "-c", code], env=_env(root), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == "[]", run.stderr[-3000:]
    assert "--null NULL" in run.stdout and "q4_0" in run.stdout


DUPLICATE = textwrap.dedent('''
    [project]
    name = "rmtbase-dup"
    version = "0.2"

    [project.entry-points."rmtbase.nulls"]
    gaussian = "rmtbase_dup:MyGaussian"

    [project.entry-points."rmtbase.storages"]
    q4_0 = "rmtbase_dup:MY_Q4"
''')


def test_a_duplicate_name_is_one_warning_naming_both_owners(tmp_path, monkeypatch,
                                                            fresh_registries):  # noqa: F811
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.gaussian_null import GaussianNull
    from rmtbase.stats.null_kind import NULLS, Null
    from rmtbase.stats.storage import storage_record

    root = _install(tmp_path / "site", "raise RuntimeError('never imported')\n", DUPLICATE,
                    name="rmtbase_dup")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        assert list(NULLS) == ["gaussian", "permutation"]  # loads the nulls' group
        assert "nope" not in fresh_registries[1]  # loads the storages' group
    lines = sorted(str(w.message) for w in got)
    assert lines == [
        "rmtbase: null plugin 'gaussian' (rmtbase_dup:MyGaussian, entry point group "
        "rmtbase.nulls, distribution rmtbase-dup 0.2) was not loaded: the name 'gaussian' is "
        "taken by rmtbase's own null (rmtbase.stats.gaussian_null.GaussianNull)",
        "rmtbase: storage plugin 'q4_0' (rmtbase_dup:MY_Q4, entry point group "
        "rmtbase.storages, distribution rmtbase-dup 0.2) was not loaded: the name 'q4_0' is "
        "taken by rmtbase's own storage (rmtbase.stats.storage)"], lines
    assert "rmtbase_dup" not in sys.modules  # the module was never imported
    assert type(Null.parse("gaussian")) is GaussianNull
    assert storage_record("q4_0").gguf == "Q4_0"


BAD_STATS = textwrap.dedent('''
    [project]
    name = "rmtbase-badstat"
    version = "0.1"

    [project.entry-points."rmtbase.statistics"]
    raising = "rmtbase_badstat:RAISING"
    flat = "rmtbase_badstat:FLAT"
''')

BAD_STATS_MODULE = textwrap.dedent('''
    from rmtbase.extend import Statistic

    def _raise(lam):
        raise ValueError("no spectrum today")

    RAISING = Statistic("raising", "spectral", "r", "1", "r", fn=_raise)
    FLAT = Statistic("flat", "spectral", "f", "1", "f", fn=lambda lam: lam.reshape(-1))
''')


def test_a_raising_or_wrong_shaped_statistic_is_one_line_and_the_rest_work(
        tmp_path, monkeypatch, fresh_registries):  # noqa: F811
    import jax.numpy as jnp

    from rmtbase.errors import InputError
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.spectral import SPECTRAL_STATS, spectral_stats
    from rmtbase.stats.statistic import statistic

    root = _install(tmp_path / "site", BAD_STATS_MODULE, BAD_STATS, name="rmtbase_badstat")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        names = list(SPECTRAL_STATS)
    lines = sorted(str(w.message) for w in got)
    head = ("rmtbase: statistic plugin '{}' (rmtbase_badstat:{}, entry point group "
            "rmtbase.statistics, distribution rmtbase-badstat 0.1) was not loaded: TypeError: ")
    assert lines == [
        head.format("flat", "FLAT") + "its fn returned shape (16,) for λ of shape (2, 8); a "
                                      "statistic maps λ (..., d_h) to (...)",
        head.format("raising", "RAISING") + "its fn raised ValueError: no spectrum today on λ "
                                            "of shape (2, 8)"], lines
    assert "raising" not in names and "flat" not in names and "npr" in names
    lam = jnp.asarray([[4.0, 2.0, 1.0, 1.0]])
    out = spectral_stats(lam)
    # (Σλ)²/Σλ² / n = 64 / 22 / 4; rtol 1e-6: float32 rounding where x64 is off
    np.testing.assert_allclose(float(out["npr"][0]), 64 / 22 / 4, rtol=1e-6)
    with pytest.raises(InputError) as exc:
        statistic("qk.raising")
    assert str(exc.value) == lines[1]  # asked for by name: the same line
    from rmtbase.scoring.settings import ScoreSettings

    with pytest.raises(InputError) as exc:
        ScoreSettings(stats=("spectral", "raising"))  # named in a score: the same line
    assert str(exc.value) == lines[1]


def test_a_statistic_failing_at_call_is_one_plugin_error_line():
    """A statistic that passes the load check but raises, or returns another shape, on the
    heads' λ: one PluginError line naming it and what it returned."""
    import jax.numpy as jnp

    from rmtbase.registry import PluginError
    from rmtbase.stats.spectral import spectral_stats
    from rmtbase.stats.statistic import Statistic, register, unregister

    def picky(lam):
        if lam.shape[-1] != 8:
            raise ValueError(f"d_h {lam.shape[-1]}")
        return lam.sum(-1)

    odd = Statistic("odd_shape", "spectral", "o", "1", "o",
                    fn=lambda lam: lam.sum(-1) if lam.shape[-1] == 8 else lam[..., :2])
    for record in (Statistic("picky", "spectral", "p", "1", "p", fn=picky), odd):
        register(record)
        try:
            with pytest.raises(PluginError) as exc:
                spectral_stats(jnp.ones((3, 4)), (record,))
        finally:
            unregister(record.name)
        line = str(exc.value)
        assert "\n" not in line and line.startswith(
            f"rmtbase: statistic plugin {record.name!r} (test_plugin_contract): fn(λ) "), line
    assert line.endswith("returned shape (3, 2) for λ of shape (3, 4) (a statistic maps λ "
                         "(..., d_h) to (...), here (3,))"), line


def test_a_raising_or_wrong_shaped_axis_is_one_plugin_error_line():
    import xarray as xr

    from rmtbase.decision.axes import Axis, register, unregister
    from rmtbase.registry import PluginError
    from rmtbase.scoring.profile.axes import _dataset_axis

    ds = xr.Dataset({"sigma_q": (("layer", "head"), np.ones((2, 3))),
                     "sigma_k": (("layer", "head"), 2 * np.ones((2, 3)))})

    def boom(ds):
        raise KeyError("n_whatever")

    cases = {"boom_axis": (boom, "fn(scores) raised KeyError: 'n_whatever'"),
             "row_axis": (lambda ds: ds["sigma_q"].values[0],
                          "fn(scores) returned shape (3,), not (layer, head) (2, 3)"),
             "none_axis": (lambda ds: None,
                           "fn(scores) returned a NoneType, not (layer, head) values (2, 3)")}
    for name, (fn, what) in cases.items():
        register(Axis(name, "value", "m", "dataset", fn, requires=("sigma_q",)))
        try:
            with pytest.raises(PluginError) as exc:
                _dataset_axis(ds, name, (2, 3))
        finally:
            unregister(name)
        assert str(exc.value) == f"rmtbase: axis plugin {name!r} (test_plugin_contract): {what}"
    # a shipped dataset axis is called as it is
    # exact: small integers times 2, exact in float64
    np.testing.assert_array_equal(_dataset_axis(ds, "scale", (2, 3)), 2 * np.ones((2, 3)))


def test_a_raising_axis_is_left_out_of_the_score_with_one_warning(score_cache):
    """A plugin dataset axis named that raises: the score goes on without it (one
    PluginWarning naming the plugin), as the shipped axes are."""
    from rmtbase.decision.axes import Axis, register, unregister
    from rmtbase.models.types import LayerHeads, ModelInfo
    from rmtbase.registry import PluginWarning
    from rmtbase.scoring.score import score_heads

    def boom(ds):
        raise KeyError("n_whatever")

    rng = np.random.default_rng(0)
    layers = [LayerHeads(layer=0, wq=(0.02 * rng.standard_normal((2, 32, 384))).astype(np.float32),
                         wk=(0.05 * rng.standard_normal((2, 32, 384))).astype(np.float32),
                         storage="float32")]
    info = ModelInfo(name="m", revision=None, architecture="bert", d=384, d_h=32, n_layers=1,
                     n_heads=2, n_kv_heads=2)
    register(Axis("boom_axis", "value", "m", "dataset", boom, requires=("sigma_q",)))
    try:
        with pytest.warns(PluginWarning) as got:
            ds = score_heads(info, layers, stats=("spectral", "boom_axis"), progress=False,
                             spectrum_draws=0)
    finally:
        unregister("boom_axis")
    lines = [str(w.message) for w in got if "boom_axis" in str(w.message)]
    assert lines == ["rmtbase: axis plugin 'boom_axis' (test_plugin_contract): fn(scores) "
                     "raised KeyError: 'n_whatever'; the axis is left out of this score"]
    assert "boom_axis" not in list(ds["axis"].values) and "scale" in list(ds["axis"].values)


def _cells():
    from rmtbase.scoring.heads.reference import Cells

    return Cells(64, 8, "spectral", ("qk.npr", "qk.lambda_max"), heads=(2, 4))


@pytest.fixture
def contract_null():
    """``make(reference)``: a plugin-like null (registered, not shipped) named
    ``contract-null`` whose reference is ``reference(null, cells)``."""
    from dataclasses import dataclass
    from typing import ClassVar

    from rmtbase.extend import Null, unregister_null

    behaviour = []

    @dataclass(frozen=True)
    class ContractNull(Null):
        """a test's null"""

        __qualname__ = "ContractNull"  # as a plugin module's top-level class is named
        name: ClassVar[str] = "contract-null"

        def reference(self, cells, storage, *, draws, seed, progress):
            return behaviour[-1](self, cells)

        def description(self) -> str:
            return "a test's null"

    def make(reference):
        behaviour.append(reference)
        return ContractNull()

    yield make
    unregister_null("contract-null")


def test_a_raising_or_wrong_shaped_null_is_one_line_and_all_nan_draws_are_refused(
        contract_null):
    from rmtbase.errors import InputError
    from rmtbase.extend import PluginError, Reference
    from rmtbase.scoring.heads.reference import drawn_reference
    from rmtbase.stats.storage import FLOAT32

    class Own(Reference):
        def profile_null(self):
            return "the Gaussian factor-axes null at each layer's storage"

    def joint(n, fill=1.0, shape=None):
        return {k: np.full(shape or (n,), fill) for k in ("qk.npr", "qk.lambda_max", "q.rms",
                                                          "k.rms")}

    def boom(null, cells):
        raise RuntimeError("out of draws")

    head = "rmtbase: null plugin 'contract-null' (test_plugin_contract.ContractNull): "
    kw = dict(draws=None, seed=0, progress=False)
    cases = [
        (boom, "reference() raised RuntimeError: out of draws"),
        (lambda null, cells: {"qk.npr": 1}, "reference() returned a dict, not a "
                                            "rmtbase.extend.Reference"),
        (lambda null, cells: Own(null, cells, {"qk.npr": np.ones(5)}),
         "reference() returned draws without qk.lambda_max, q.rms, k.rms"),
        (lambda null, cells: Own(null, cells, joint(5, shape=(5, 2))),
         "reference() returned draws of qk.npr of shape (5, 2): draws are (draws,) shared by "
         "the heads or (layers, heads, draws) = (2, 4, draws)")]
    for ref, what in cases:
        null = contract_null(ref)
        with pytest.raises(PluginError) as exc:
            drawn_reference(null, _cells(), FLOAT32, **kw)
        assert str(exc.value) == head + what
    ok = contract_null(lambda null, cells: Own(null, cells, joint(0, shape=(2, 4, 7))))
    assert drawn_reference(ok, _cells(), FLOAT32, **kw).joint["qk.npr"].shape == (2, 4, 7)
    nan = contract_null(lambda null, cells: Own(null, cells, joint(50, np.nan)))
    with pytest.raises(InputError, match=r"^the contract-null null leaves every statistic "
                                         r"undefined: none of the 2 statistics tested has two "
                                         r"finite draws at float32 \(test_plugin_contract\."
                                         r"ContractNull\); refused$"):
        drawn_reference(nan, _cells(), FLOAT32, **kw)


def test_a_null_is_labelled_with_the_storage_it_declares(contract_null):
    from rmtbase.stats.gaussian_null import GaussianNull
    from rmtbase.stats.permutation_null import PermutationNull
    from rmtbase.stats.storage import storage_record

    q4 = storage_record("q4_0")
    own = contract_null(lambda null, cells: None)  # float32 draws, not stored like the file
    assert own.draws_storage(q4).name == "float32"
    assert GaussianNull().draws_storage(q4) is q4  # stored like the checkpoint
    assert PermutationNull().draws_storage(q4) is q4  # the head's own stored entries


def _greedy(w, record, rel):
    return True


def test_a_greedy_detector_never_overrides_a_shipped_format_or_a_float():
    import jax.numpy as jnp

    from rmtbase.registry import PluginWarning
    from rmtbase.stats.detection import detect_record
    from rmtbase.stats.precision import round_trip
    from rmtbase.stats.storage import Storage, register, unregister

    register(Storage("greedy", "block", lambda b, r: b, block=32, detector=_greedy))
    try:
        w = np.random.default_rng(0).normal(0, 0.02, (8, 64)).astype(np.float32)
        q4 = np.asarray(round_trip(jnp.asarray(w), "q4_0"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the shipped format first: no word from the plugin
            assert detect_record(q4).name == "q4_0"
        with pytest.warns(PluginWarning) as got:
            assert detect_record(w) is None  # float weights stay float
        (line,) = [str(x.message) for x in got]
        assert line == ("rmtbase: storage plugin 'greedy' (test_plugin_contract) detected its "
                        "format on weights whose 32-entry blocks mostly hold 32 distinct values "
                        "(float weights): not used; --quantized-null greedy forces it")
        import ml_dtypes

        bf16 = w.astype(ml_dtypes.bfloat16).astype(np.float32)  # some blocks repeat a value
        with pytest.warns(PluginWarning, match="float weights.: not used"):
            assert detect_record(bf16, storage="bfloat16") is None
        odd = w[:, :72]  # a width no 32-block divides: the float check reads its whole blocks
        with pytest.warns(PluginWarning, match="float weights.: not used"):
            assert detect_record(odd) is None
        # three uneven levels (−0.015, 0.005, 0.025: no shipped layout's integer multiples of
        # one step) and few distinct values per block (not float): the plugin's, announced
        three = np.round(w / 0.02).clip(-1, 1).astype(np.float32) * np.float32(0.02)
        with pytest.warns(PluginWarning, match=r"^rmtbase: storage plugin 'greedy' "
                          r"\(test_plugin_contract\) detected its format on dequantised weights"):
            assert detect_record(three + np.float32(0.005)).name == "greedy"
    finally:
        unregister("greedy")


FAILED_FMT = textwrap.dedent('''
    [project]
    name = "rmtbase-failfmt"
    version = "0.1"

    [project.entry-points."rmtbase.storages"]
    fail_fmt = "rmtbase_failfmt:FMT"
''')


def test_quantized_null_keeps_the_plugin_failure_line(tmp_path, monkeypatch,
                                                      fresh_registries):  # noqa: F811
    from rmtbase.errors import InputError
    from rmtbase.registry import PluginWarning
    from rmtbase.stats.names import check_quantized_null

    root = _install(tmp_path / "site", "FMT = 'not a record'\n", FAILED_FMT,
                    name="rmtbase_failfmt")
    monkeypatch.syspath_prepend(str(root))
    with pytest.warns(PluginWarning) as got:
        with pytest.raises(InputError) as exc:
            check_quantized_null("fail_fmt")
    (line,) = [str(w.message) for w in got]
    assert str(exc.value) == line and line.startswith(
        "rmtbase: storage plugin 'fail_fmt' (rmtbase_failfmt:FMT, entry point group "
        "rmtbase.storages, distribution rmtbase-failfmt 0.1) was not loaded: TypeError: "
        "'not a record' is not a rmtbase.stats.storage.Storage record"), line


RAISING_AXIS = textwrap.dedent('''
    [project]
    name = "rmtbase-raxis"
    version = "0.1"

    [project.entry-points."rmtbase.axes"]
    raxis = "rmtbase_raxis:RAXIS"
''')

RAISING_AXIS_MODULE = textwrap.dedent('''
    from rmtbase.extend import Axis

    def _fn(ds):
        raise KeyError("n_whatever")

    RAXIS = Axis("raxis", "value", "m", "dataset", _fn, requires=("sigma_q",))
''')


@pytest.mark.slow
def test_the_command_line_leaves_a_failing_axis_plugin_out_with_one_warning(tmp_path):
    """``rmtbase score --stats spectral,raxis`` with a dataset axis plugin that raises: as in
    :func:`test_a_raising_axis_is_left_out_of_the_score_with_one_warning`, the score goes on
    without it, one warning line naming the plugin, no traceback, exit 0 and the files
    written without the axis."""
    import xarray as xr
    from test_plugins import _gpt2_as

    root = _install(tmp_path / "site", RAISING_AXIS_MODULE, RAISING_AXIS, name="rmtbase_raxis")
    model = _gpt2_as(tmp_path / "model", "gpt2")
    env = {**_env(root), "RMTBASE_CACHE": str(tmp_path / "c")}
    cmd = [sys.executable, "-m", "rmtbase", "score", model, "--stats", "spectral,raxis",
           "--draws", "200", "--no-figures", "--quiet", "--out", str(tmp_path / "out")]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    warned = [t for t in run.stderr.splitlines() if "raxis" in t]
    assert warned == [
        "rmtbase: warning: axis plugin 'raxis' (rmtbase_raxis:RAXIS, entry point group "
        "rmtbase.axes, distribution rmtbase-raxis 0.1): fn(scores) raised KeyError: "
        "'n_whatever'; the axis is left out of this score"], run.stderr[-3000:]
    with xr.open_dataset(tmp_path / "out" / "scores.nc") as ds:
        axes = list(ds["axis"].values)
    assert "raxis" not in axes and "scale" in axes


def test_a_null_plugin_that_failed_to_load_is_refused_by_name_with_its_line(tmp_path):
    """``rmtbase score --null broken-null``: one warning line when the group loads, then the
    refusal with the same text, exit 2, before any model is read."""
    pyproject = ('[project]\nname = "rmtbase-broken2"\nversion = "0.1"\n\n'
                 '[project.entry-points."rmtbase.nulls"]\nbroken-null = "rmtbase_broken2:Nope"\n')
    root = _install(tmp_path / "site", "\n", pyproject, name="rmtbase_broken2")
    run = subprocess.run([sys.executable, "-m", "rmtbase", "score", "--null", "broken-null"],
                         env=_env(root), capture_output=True, text=True, timeout=300)
    why = ("null plugin 'broken-null' (rmtbase_broken2:Nope, entry point group rmtbase.nulls, "
           "distribution rmtbase-broken2 0.1) was not loaded: AttributeError: module "
           "'rmtbase_broken2' has no attribute 'Nope'")
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-2:] == [
        f"rmtbase: warning: {why}", f"rmtbase: error: argument --null: {why}"], run.stderr
