"""A null table without a statistic the run reads is refused before any layer is read.

A maintainer adds an element statistic (here: ``toy_stat`` appended to the element statistics
the tables must hold); the shipped tables of MiniLM's cell (384, 32) were made without it.
Before, the run read and scored every layer and then failed when the null was fetched; now
``score`` refuses up front, in one line naming the command that rebuilds the table, and the
count of layers read is 0. The spectral-only run, which reads no element statistic, is not
refused.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def new_element_stat(monkeypatch):
    import rmtbase.stats as stats

    monkeypatch.setattr(stats, "ELEMENT_STATS", (*stats.ELEMENT_STATS, "toy_stat"))


@pytest.fixture
def layers_read(monkeypatch):
    """The layers the scoring reads from the model (``rmtbase.models.load_heads`` counted)."""
    import rmtbase.models as models

    real, read = models.load_heads, []

    def counted(*args, **kwargs):
        for lh in real(*args, **kwargs):
            read.append(int(lh.layer))
            yield lh

    monkeypatch.setattr(models, "load_heads", counted)
    return read


def test_a_table_without_the_statistic_is_refused_before_any_layer(new_element_stat,
                                                                    layers_read):
    from rmtbase.errors import TableError
    from rmtbase.scoring.score import score_model

    with pytest.raises(TableError) as exc:
        score_model(progress=False, draws=200)
    line = str(exc.value)
    assert "\n" not in line and "qk_toy_stat" in line and "lowrank-d384-dh32-all" in line
    assert "python sims/make_shipped_tables.py --stats all --draws 2000 --cells 384x32" in line
    assert layers_read == []


def test_the_cli_refusal_is_one_line_exit_2_and_leaves_no_output(new_element_stat, layers_read,
                                                                 tmp_path, capsys):
    from rmtbase.cli import main

    out = tmp_path / "out"
    code = main(["score", "--out", str(out), "--quiet", "--draws", "200"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "toy_stat" in err[0] and "make_shipped_tables.py" in err[0]
    assert layers_read == [] and not out.exists()


def test_the_check_passes_the_shipped_tables_and_a_spectral_run():
    """The controls: every shipped table holds every statistic of today's registry (so the
    check refuses nothing by itself); a spectral run does not read element statistics."""
    import rmtbase.stats as stats
    from rmtbase.baseline.shipped import check_shipped_tables, shipped_index

    for cell in sorted({(e["d"], e["d_h"]) for e in shipped_index()}):
        check_shipped_tables(*cell)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stats, "ELEMENT_STATS", (*stats.ELEMENT_STATS, "toy_stat"))
        check_shipped_tables(384, 32, "spectral")
