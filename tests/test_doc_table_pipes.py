"""docs/statistics.md's generated table (rmtbase.stats.statistic.doc_table) has six cells in
every row: a ``|`` inside a cell (``|w|`` in the Weibull and max/q99 names) is escaped
(bare, it makes Markdown split the row into extra columns)."""

from __future__ import annotations

import re


def test_every_row_of_the_statistics_table_has_six_cells():
    from rmtbase.stats.statistic import doc_table

    rows = doc_table().strip().splitlines()
    assert len(rows) > 20
    bare = [r for r in rows if len(re.findall(r"(?<!\\)\|", r)) != 7]
    assert not bare, bare[:3]
    assert any("\\|w\\|" in r for r in rows)  # the escaped names are there
