"""Each default is written once in src/: a score's least null draws in
:data:`rmtbase.baseline.cache.TABLE_DRAWS`, a table's own draws in
:class:`rmtbase.baseline.table_spec.TableSpec`; every other place names them (a default written
twice drifts apart: the CLI's help and a settings docstring once disagreed with the code).

Read from the code itself (``ast``): a number written in the code (not in a docstring or a
comment) on a line that speaks of draws."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rmtbase"

#: A different quantity that is also 1,000: the permutation null's own default for the
#: head-pair composition, declared on the null (stats/ sits below baseline/ and cannot name
#: TABLE_DRAWS).
OTHER_1000 = {("stats/permutation_null.py", "composition_draws: ClassVar[int] = 1000")}


def _numbers(value: int, parts=None):
    """{(file, line)} where the code writes ``value`` on a line mentioning draws; studies/
    (a paper's experiment sizes, fixed on purpose) are not the library's defaults."""
    out = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("studies/") or (parts and rel.split("/")[0] not in parts):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Constant) and type(node.value) is int
                    and node.value == value):
                line = lines[node.lineno - 1].strip()
                if "draws" in line.lower():
                    out.add((rel, line))
    return out


def test_the_least_draws_of_a_score_are_written_once():
    assert _numbers(1000) - OTHER_1000 == {("baseline/cache.py", "TABLE_DRAWS = 1000")}


def test_a_tables_own_draws_are_written_once():
    assert _numbers(2000, parts={"baseline", "cli"}) == {
        ("baseline/table_spec.py", "draws: int = 2000")}


def test_the_defaults_are_the_ones_the_code_uses():
    """The owners are what the entry points read, so the search above is of the live value."""
    import inspect

    from rmtbase.baseline.cache import TABLE_DRAWS, null_table
    from rmtbase.baseline.sweep_cache import SPECTRAL_REFERENCE_DRAWS, default_draws
    from rmtbase.baseline.table_spec import TableSpec, make_spec
    from rmtbase.cli import build_parser
    from rmtbase.cli.baseline import table_options
    from rmtbase.scoring.stopping.joint import SCHEDULE

    assert TABLE_DRAWS == 1000 and TableSpec.draws == 2000
    assert null_table.__kwdefaults__["min_draws"] == TABLE_DRAWS == default_draws()
    assert SPECTRAL_REFERENCE_DRAWS == TABLE_DRAWS and SCHEDULE[0] > TABLE_DRAWS
    assert make_spec().draws == TableSpec.draws
    assert inspect.signature(make_spec).parameters["draws"].default == TableSpec.draws
    args = build_parser().parse_args(["baseline", "--d", "8", "--dh", "2"])
    assert "draws" not in table_options(args)  # the table's own default applies
