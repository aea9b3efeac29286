"""The null's text is parsed once, where it enters, and passed on as the value, not
re-parsed at each call site.

Where text enters: the settings records (``ScoreSettings`` and ``CompositionSettings`` parse
it when built, :mod:`rmtbase.scoring.settings`): the CLI's ``--null`` builds the record
(:func:`rmtbase.cli.score_checks.checked`), the public ``score_model(null=...)`` /
``score_collection`` / ``score_delta`` / ``composition(null=...)`` build one from their
keywords; and a file's ``null_kind``
attribute (``rmtbase.scoring.collection.trajectory`` and the composition report, through the registry
of nulls). Everything below takes the
:class:`~rmtbase.stats.null_kind.Null` (``in_family``, ``check_element_draws``,
``check_null_size``, ``null_description``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmtbase.stats.null_kind import GaussianNull, PermutationNull

SRC = Path(__file__).resolve().parents[1] / "src" / "rmtbase"

#: The places that parse the null's text, with how many times (this list may only shrink).
#: decision/verdict.py: score_values_by_layer's ``null_kind``, left to its owner.
PARSES = {"scoring/settings.py": 2, "scoring/collection/trajectory.py": 1,
          "decision/verdict.py": 1, "report/composition_report.py": 1}


def test_the_null_is_parsed_only_where_its_text_enters():
    assert (SRC / "stats" / "null_kind.py").is_file(), SRC  # the tree read is the source
    found = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel == "stats/null_kind.py":  # the definition
            continue
        n = path.read_text(encoding="utf-8").count("Null.parse(")
        if n:
            found[rel] = n
    extra = {k: v for k, v in found.items() if v > PARSES.get(k, 0)}
    assert not extra, f"the null's text parsed again below where it enters: {extra}"


def test_cli_passes_the_parsed_null(monkeypatch, tmp_path):
    """``rmtbase score --null permutation`` hands score_model the value, not the text."""
    from rmtbase.cli import main

    class Seen(Exception):
        pass

    def fake_score_model(*args, **kw):
        raise Seen(kw["settings"].null)

    monkeypatch.setattr("rmtbase.scoring.score.score_model", fake_score_model)
    with pytest.raises(Seen) as exc:
        main(["score", "--null", "permutation", "--stats", "spectral", "--quiet",
              "--no-figures", "--out", str(tmp_path / "out")])
    assert exc.value.args[0] == PermutationNull()


def test_an_entry_key_names_the_null_by_its_spelling():
    """The CLI's parsed null and a caller's text give one entry key (entries written before
    the CLI passed the value are reused)."""
    from rmtbase.scoring.collection.entries import entry_key

    def key(null):
        return entry_key("some/hub-model", None, {"null": null, "draws": None}, False)

    assert key(GaussianNull()) == key("gaussian")
    assert key(PermutationNull()) == key("permutation")
    assert key(GaussianNull()) != key(PermutationNull())


def test_cli_composition_gets_the_parsed_null(monkeypatch):
    """``--composition`` is handed the score's null value itself (not the raw
    ``args.null`` text): the CLI's request carries it to the composition."""
    from rmtbase.cli import build_parser
    from rmtbase.cli.score_checks import Plan, request_of
    from rmtbase.pipeline.run import Prepared, _composition
    from rmtbase.scoring.settings import ScoreSettings

    seen = {}

    def fake_composition(model, **kw):
        seen.update(kw)
        raise RuntimeError("stop")

    monkeypatch.setattr("rmtbase.scoring.composition.run.composition", fake_composition)
    args = build_parser().parse_args(["score", "m", "--null", "permutation", "--composition"])
    settings = ScoreSettings(null=args.null)
    plan = Plan(["m"], None, False, None, False, settings.null, settings)
    with pytest.raises(RuntimeError, match="stop"):
        _composition(request_of(args, plan), Prepared(), progress=False)
    assert seen["settings"].null is settings.null == PermutationNull()
