"""The entry points take their settings as one record, and their documented keywords still.

``score_model``/``score_heads`` (:class:`ScoreSettings`), ``composition``
(:class:`CompositionSettings`), ``score_components`` (:class:`ComponentSettings`),
``find_circuits`` (:class:`rmtbase.circuits.head.find.Search`) and ``score_collection``
(:class:`rmtbase.baseline.sweep.Dispatch`): a keyword call and the same values as a record
reach the internals as the same checked record (captured where the work would start), a
keyword overrides the record's field, and an unknown keyword is Python's TypeError."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rmtbase.errors import InputError, with_keywords
from rmtbase.scoring.settings import ComponentSettings, CompositionSettings, ScoreSettings


class _Stop(Exception):
    """Raised by a captured internal: the work stops where it would begin."""


def test_with_keywords_replaces_fields_and_refuses_strangers():
    base = ScoreSettings(draws=500, seed=3)
    assert with_keywords(ScoreSettings, None, {}, "f") == ScoreSettings()
    assert with_keywords(ScoreSettings, base, {}, "f") is base
    assert with_keywords(ScoreSettings, base, {"seed": 4}, "f") == ScoreSettings(draws=500, seed=4)
    with pytest.raises(TypeError, match=r"f\(\) got an unexpected keyword argument 'drawz'"):
        with_keywords(ScoreSettings, None, {"drawz": 5}, "f")
    with pytest.raises(InputError, match="settings must be a ScoreSettings"):
        with_keywords(ScoreSettings, CompositionSettings(), {}, "f")


def _planted():
    from rmtbase.models.types import LayerHeads, ModelInfo

    rng = np.random.default_rng(0)
    info = ModelInfo(name="planted", revision=None, architecture="bert", d=16, d_h=4,
                     n_layers=1, n_heads=2, n_kv_heads=2)
    wq, wk = (rng.standard_normal((2, 4, 16)).astype(np.float32) for _ in range(2))
    return info, [LayerHeads(0, wq, wk)]


def _options(monkeypatch, call):
    """The :class:`ScoreSettings` ``call()`` hands to the pipeline."""
    import rmtbase.scoring.score as S

    got = []

    def fake(info, layers, s, label=None, *, progress=True, unreliable=()):
        got.append(s)
        raise _Stop

    monkeypatch.setattr(S, "score", fake)
    with pytest.raises(_Stop):
        call()
    return got[0]


def test_score_heads_record_equals_keywords(monkeypatch):
    from rmtbase.scoring.score import score_heads

    info, layers = _planted()
    kw = dict(stats="spectral", draws=300, alpha=0.1, seed=7, spectrum_draws=0,
              quantized_null="none", max_draws=900, element_draws=50,
              null_start={"table": 400, "spectral": 2000})
    by_kw = _options(monkeypatch, lambda: score_heads(info, layers, progress=False, **kw))
    by_record = _options(monkeypatch, lambda: score_heads(
        info, layers, progress=False, settings=ScoreSettings(**kw)))
    mixed = _options(monkeypatch, lambda: score_heads(
        info, layers, progress=False, settings=ScoreSettings(**{**kw, "seed": 1}), seed=7))
    assert by_kw == by_record == mixed
    assert (by_kw.kind, by_kw.draws, by_kw.alpha, by_kw.seed, by_kw.max_draws) == \
        ("spectral", 300, 0.1, 7, 900)
    record = ScoreSettings(**kw)  # handed on as it is: not re-packed, not checked again
    assert _options(monkeypatch, lambda: score_heads(info, layers, progress=False,
                                                     settings=record)) is record
    with pytest.raises(TypeError, match="score_heads"):
        score_heads(info, layers, drawz=300)


def test_score_model_unknown_keyword_is_a_type_error():
    from rmtbase.scoring.score import score_model

    with pytest.raises(TypeError, match=r"score_model\(\) got an unexpected keyword argument"):
        score_model("/nonexistent", draw=1000)


def test_composition_record_equals_keywords(monkeypatch):
    import rmtbase.scoring.composition.run as C

    got = []

    def fake(model, *, revision=None, null=None, draws=None, **_):
        got.append((model, revision, null.name, draws))
        raise _Stop

    monkeypatch.setattr(C, "check_model", fake)
    kw = dict(null="permutation", draws=300, seed=2, alpha=0.1, null_storage="float16")
    for call in (lambda: C.composition("m", **kw),
                 lambda: C.composition("m", settings=CompositionSettings(**kw)),
                 lambda: C.composition("m", settings=CompositionSettings(draws=50), draws=300,
                                       null="permutation")):
        with pytest.raises(_Stop):
            call()
    assert got == [("m", None, "permutation", 300)] * 3
    with pytest.raises(InputError, match="null_storage"):
        C.composition("m", null_storage="int8")


def test_score_components_record_equals_keywords(monkeypatch):
    import rmtbase.scoring.matrices.components as P

    got = []

    def fake(cells, *, alpha, draws, seed, progress, threads):
        got.append((alpha, draws, seed, threads))
        raise _Stop

    monkeypatch.setattr(P, "_read", lambda layers, info, progress, q: [])
    monkeypatch.setattr(P, "_score_cells", fake)
    monkeypatch.setattr("rmtbase.models.load_components", lambda *a, **k: [])
    kw = dict(draws=300, alpha=0.1, seed=5, quantized_null="none", threads=2)
    for call in (lambda: P.score_components(**kw, progress=False),
                 lambda: P.score_components(settings=ComponentSettings(**kw), progress=False)):
        with pytest.raises(_Stop):
            call()
    assert got == [(0.1, 300, 5, 2)] * 2


def test_find_circuits_search_record_and_aliases(monkeypatch):
    import xarray as xr

    import rmtbase.circuits.head.run as R
    from rmtbase.circuits.head.find import Search

    comp = xr.Dataset({"composition": (("kind", "layer_from", "head_from", "layer_to",
                                        "head_to"), np.zeros((3, 3, 2, 3, 2)))})
    got = []

    def fake(model, composition, opts, progress):
        got.append(opts)
        shown.append(progress)
        raise _Stop

    shown = []
    monkeypatch.setattr(R, "run_circuits", fake)
    kw = dict(k=2, seed=3, threshold=0.5, sinks=True, screen="exact", mlp_paths=False)
    record = Search(receivers=((2, 1),), lengths=8, layers=(2,), **kw)
    for call in (lambda: R.find_circuits("m", comp, receivers_of_interest=[(2, 1)],
                                         repeat_lengths=8, layers=[2], progress=False, **kw),
                 lambda: R.find_circuits("m", comp, search=record, progress=False),
                 lambda: R.find_circuits("m", comp, search=record)):
        with pytest.raises(_Stop):
            call()
    assert got[0] == got[1] and got[1] is record and got[2] is record  # as it is, not rebuilt
    assert shown == [False, False, True]  # progress is no setting of the search
    assert dataclasses.replace(got[0]) == Search(receivers=((2, 1),), lengths=8, layers=(2,),
                                                 **kw)
    with pytest.raises(TypeError, match="both 'repeat_lengths' and 'lengths'"):
        R.find_circuits("m", comp, repeat_lengths=8, lengths=8)
    with pytest.raises(InputError, match="k must be"):
        R.find_circuits("m", comp, search=Search(k=0))


def test_score_collection_dispatch_keywords(monkeypatch):
    import rmtbase.scoring.collection.trajectory as T
    from rmtbase.baseline.sweep import Dispatch, dispatch_of

    seen = []

    def fake(models, revisions, labels):
        raise _Stop

    monkeypatch.setattr(T, "make_specs", fake)
    monkeypatch.setattr(T, "dispatch_of", lambda rec, kw, who: seen.append(
        dispatch_of(rec, kw, who)) or seen[-1])
    for call in (lambda: T.score_collection(["a"], workers=2, progress=False, draws=300),
                 lambda: T.score_collection(["a"], dispatch=Dispatch(workers=2, progress=False),
                                            draws=300)):
        with pytest.raises(_Stop):
            call()
    assert seen == [Dispatch(workers=2, progress=False)] * 2


class _TickingClock:
    """``datetime`` as ``table_dataset`` reads it, one second later at each call: two builds
    whose creation times differ, as two builds across a second boundary do."""

    import datetime as _real

    UTC = _real.UTC

    class datetime:
        calls = 0

        @classmethod
        def now(cls, tz=None):
            import datetime as real

            cls.calls += 1
            return real.datetime(2026, 1, 1, tzinfo=tz) + real.timedelta(seconds=cls.calls)


def test_baseline_spec_equals_keywords(monkeypatch):
    from _builds import assert_same_build

    from rmtbase.baseline import table_dataset
    from rmtbase.baseline.table_spec import make_spec, spec_with
    from rmtbase.baseline.tables import baseline

    monkeypatch.setattr(table_dataset, "_dt", _TickingClock)

    kw = dict(draws=16, stats="spectral", seed=3, sigma=2.0)
    assert spec_with(make_spec(**kw), {"seed": 4}, "f") == make_spec(**{**kw, "seed": 4})
    assert spec_with(make_spec(sigma_q=2.0), {"sigma": 3.0}, "f") == make_spec(sigma=3.0)
    by_kw = baseline(8, 2, progress=False, **kw)
    by_spec = baseline(8, 2, progress=False, spec=make_spec(**kw))
    assert by_kw.attrs["creation_time"] != by_spec.attrs["creation_time"]
    assert_same_build(by_kw, by_spec)  # exact: one jitted program, the same inputs
    with pytest.raises(TypeError, match=r"baseline\(\) got an unexpected keyword argument 'n'"):
        baseline(8, 2, n=16)
    with pytest.raises(InputError, match="spec must be a TableSpec"):
        baseline(8, 2, spec=ScoreSettings())


def test_null_draws_and_sweeps_refuse_unknown_keywords():
    import jax

    from rmtbase.baseline.network_tables import network_table
    from rmtbase.baseline.null import null_draws
    from rmtbase.baseline.sweep import network_sweep, sweep
    from rmtbase.baseline.sweep_cache import sweep_into_cache

    got = null_draws(jax.random.key(0), 8, 2, 4, stats="spectral", sigma_q=2.0)
    assert got["q.rms"].shape == (4,)
    for call, name in ((lambda: null_draws(jax.random.key(0), 8, 2, 4, sigma=2.0), "null_draws"),
                       (lambda: sweep(8, 2, workers=1, n_draws=10), "sweep"),
                       (lambda: network_sweep(8, 1, workers=1, width=8), "network_sweep"),
                       (lambda: network_table(8, 1, width=8), "network_table"),
                       (lambda: sweep_into_cache(8, 2, workers=1, storage="float32"),
                        "sweep_into_cache")):
        with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument"):
            call()


def test_score_values_forwards_its_decision_keywords():
    import xarray as xr

    from rmtbase.decision.verdict import score_values, score_values_by_layer

    rng = np.random.default_rng(3)
    values = {"qk.npr": rng.random((2, 3)), "q.rms": np.ones((2, 3)), "k.rms": np.ones((2, 3))}
    null = {"qk.npr": rng.random(200), "q.rms": np.ones(200), "k.rms": np.ones(200)}
    one = np.ones((2, 3))
    got = score_values(values, one, one, null, alpha=0.1, group_size=1, unreliable=())
    ref = score_values_by_layer(values, one, one, [(None, null, None)], alpha=0.1)
    # exact: score_values is score_values_by_layer's numpy code on one layer, same inputs
    xr.testing.assert_identical(got, ref.drop_vars("head_p_exceedances"))
    with pytest.raises(TypeError, match=r"score_values\(\) got an unexpected keyword"):
        score_values(values, one, one, null, level=0.1)


def test_score_collection_takes_keywords_not_a_settings_record():
    from rmtbase.scoring.collection.trajectory import score_collection

    with pytest.raises(TypeError, match="score_model's settings as keywords"):
        score_collection(["a", "b"], settings=ScoreSettings(draws=300))
