"""The circuit search's settings travel as one record, :class:`rmtbase.circuits.head.find.Search`:
``rmtbase circuits`` and ``rmtbase score --composition --probe`` build it from their options
(an option not given keeps the record's default), a :class:`rmtbase.pipeline.ScoreRequest`
carries it, and the very object reaches :func:`rmtbase.circuits.find_circuits` (the search's
work is replaced by a recorder: no model is run)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rmtbase.errors import InputError


@pytest.fixture
def seen(monkeypatch):
    """The (search record, progress) each :func:`rmtbase.circuits.head.run.run_circuits` call gets;
    the call then stops with :class:`_Stop` before any work."""
    import rmtbase.circuits.head.run as R

    got = []

    def record(model, composition, opts, progress=True):
        got.append((opts, progress))
        raise _Stop

    monkeypatch.setattr(R, "run_circuits", record)
    return got


class _Stop(Exception):
    pass


def _composition(layers=3, heads=2):
    import numpy as np
    import xarray as xr

    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    return xr.Dataset({"composition": (dims, np.zeros((3, layers, heads, layers, heads)))})


def test_the_request_carries_the_search_and_the_search_gets_that_object(monkeypatch, seen):
    """``run_score``'s circuit stage hands ``request.search`` itself to ``find_circuits``,
    with run_score's ``progress``."""
    import rmtbase.pipeline.run as P
    import rmtbase.probe.loader as loader
    import rmtbase.scoring.composition.run as C
    from rmtbase.circuits.head.find import Search
    from rmtbase.pipeline import Prepared, ScoreRequest
    from rmtbase.scoring.settings import CompositionSettings

    comp = _composition()
    monkeypatch.setattr(C, "composition", lambda *a, **k: comp)
    monkeypatch.setattr(loader, "load", lambda model, tokenizer: "loaded")
    search = Search(k=2, seed=7, lengths=(5, 8), screen="exact", counterfactual="zero")
    request = ScoreRequest(model="m", composition=CompositionSettings(draws=200), probe=True,
                           search=search)
    assert request.search is search
    prepared = Prepared(probe_text=None, search={"patch": True, "text": False})
    with pytest.raises(_Stop):
        P._composition(request, prepared, progress=False)
    assert seen == [(search, False)] and seen[0][0] is search


def test_a_request_without_a_search_gets_the_records_defaults_with_its_seed_and_text():
    from rmtbase.circuits.head.find import Search
    from rmtbase.pipeline import ScoreRequest
    from rmtbase.scoring.settings import CompositionSettings, ScoreSettings

    comp = CompositionSettings(draws=200)
    r = ScoreRequest(model="m", settings=ScoreSettings(seed=5), composition=comp, probe=True,
                     text="t.txt")
    assert r.search == Search(seed=5, text="t.txt") and r.search.sequences == "text"
    assert ScoreRequest(model="m", composition=comp, probe=True).search == Search()
    # no circuit search without both a composition and the probe: no record
    assert ScoreRequest(model="m", composition=comp).search is None
    assert ScoreRequest(model="m", probe=True).search is None


@pytest.mark.parametrize("kw, message", [
    (dict(probe=True), "runs with a composition and the probe"),
    (dict(composition=True), "runs with a composition and the probe"),
    (dict(composition=True, probe=True, text="t.txt"), "search.text must be the probe's text"),
    (dict(composition=True, probe=True, search={"k": 2}), "search must be a"),
])
def test_a_search_the_run_cannot_use_is_refused_in_one_line(kw, message):
    from rmtbase.circuits.head.find import Search
    from rmtbase.pipeline import ScoreRequest
    from rmtbase.scoring.settings import CompositionSettings

    kw = dict(kw)
    if kw.pop("composition", False):
        kw["composition"] = CompositionSettings(draws=200)
    kw.setdefault("search", Search(k=2))
    with pytest.raises(InputError, match=re.escape(message)) as info:
        ScoreRequest(model="m", **kw)
    assert "\n" not in str(info.value)


def _args(argv):
    from rmtbase.cli import build_parser

    return build_parser().parse_args(argv)


def test_the_circuits_command_builds_the_record_from_what_is_given():
    """No option given: the record's defaults (the help states them: held equal here); each
    option given sets its field, in the form the record holds."""
    from rmtbase.circuits.head.find import Search
    from rmtbase.cli.circuits import search_of

    plain = search_of(_args(["circuits", "m", "--quiet"]))
    assert dataclasses.replace(plain) == Search() and plain.on_receiver is None
    got = search_of(_args(["circuits", "m", "--quiet", "--k", "4", "--seed", "9",
                           "--repeat-length", "5,8", "--receivers", "L1H0,L2H1", "--layers",
                           "1,2", "--sinks", "--mlp-paths", "off", "--counterfactual", "resample"]))
    assert got == Search(k=4, seed=9, lengths=(5, 8), receivers=((1, 0), (2, 1)),
                         layers=(1, 2), sinks=True, mlp_paths=False, counterfactual="resample")
    assert search_of(_args(["circuits", "m", "--quiet", "--text", "t.txt"])) == Search(
        text="t.txt")
    # lines as each receiver is done, unless --quiet or --json
    assert callable(search_of(_args(["circuits", "m"])).on_receiver)


def test_the_help_states_the_records_defaults():
    from rmtbase.circuits.head.find import Search
    from rmtbase.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    helps = {a.dest: " ".join(a.help.split()) for a in sub.choices["circuits"]._actions
             if a.help}
    d = Search()
    assert f"(default {d.k})" in helps["k"] and f"(default {d.seed})" in helps["seed"]
    assert f"(default {d.lengths}:" in helps["repeat_length"]
    assert f"(default {d.mlp_paths}:" in helps["mlp_paths"]
    assert d.counterfactual == "mean" and "its mean over the other prompts or sequences at each " \
        "position (the head search's default)" in helps["counterfactual"]


def test_the_score_command_builds_the_search_with_its_seed_and_text(tmp_path):
    """``score --composition --probe``: the request's search has the score's --seed, --text
    and --repeat-length; without --composition --probe there is none, and --repeat-length
    alone is refused in one line."""
    from rmtbase.circuits.head.find import Search
    from rmtbase.cli.score_checks import Plan, checked, request_of
    from rmtbase.scoring.settings import ScoreSettings

    args = _args(["score", "m", "--composition", "--probe", "--seed", "3", "--text", "t.txt",
                  "--repeat-length", "6", "--quiet"])
    plan = Plan(["m"], None, False, None, True, ScoreSettings().null, ScoreSettings(seed=3))
    req = request_of(args, plan)
    assert req.search == Search(seed=3, text="t.txt", lengths=(6,))
    args = _args(["score", "m", "--composition", "--quiet"])
    assert request_of(args, plan).search is None
    args = _args(["score", "m", "--repeat-length", "6", "--quiet", "--out",
                  str(tmp_path / "o")])
    with pytest.raises(InputError, match="--repeat-length sets the circuit search of "
                                         "--composition --probe"):
        checked(args)
