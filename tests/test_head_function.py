"""Study head_function: the Spearman table and its within-layer permutation p, the overlap,
the study run on a tiny BERT with --model, and the study CLI's option checks."""

import _probe_models as pm
import numpy as np
import pytest
from scipy.stats import spearmanr

from rmtbase import studies
from rmtbase.cli import main
from rmtbase.studies.head_function import layer_permutations, overlap_table, spearman_table


def test_layer_permutations_stay_in_their_layer():
    layer = np.repeat(np.arange(3), 5)
    perm = layer_permutations(layer, 200, seed=1)
    assert (layer[perm] == layer[None, :]).all()
    assert all(sorted(p) == list(range(15)) for p in perm)
    assert len({tuple(p) for p in perm}) > 150  # they do permute
    np.testing.assert_array_equal(perm, layer_permutations(layer, 200, seed=1))


def test_spearman_table_rho_and_within_layer_p():
    rng = np.random.default_rng(0)
    layer = np.repeat(np.arange(6), 12)
    y = rng.standard_normal(72)
    head_signal = y + 0.3 * rng.standard_normal(72)      # tracks y head by head
    layer_only = layer.astype(float)                     # depth trend, nothing within layers
    y_layered = layer + 0.01 * rng.standard_normal(72)
    rows = spearman_table({"a": head_signal, "b": layer_only}, {"y": y, "yl": y_layered},
                          layer, n_perm=2000, seed=0)
    r = {(x["weight"], x["behaviour"]): x for x in rows}
    assert r["a", "y"]["rho"] == pytest.approx(spearmanr(head_signal, y).statistic)
    assert r["a", "y"]["p_perm"] < 0.001
    # a shared layer trend gives a large rho but no evidence about individual heads
    assert r["b", "yl"]["rho"] > 0.9 and r["b", "yl"]["p_perm"] == 1.0
    assert all(0 < x["q"] <= 1 for x in rows)


def test_overlap_table():
    anom = np.array([9.0, 8, 7, 0, 0, 0, 0, 0, 0, 0])
    beh = {"prev_token": np.array([0.9, 0.8, 0, 0.7, 0, 0, 0, 0, 0, 0]),
           "entropy": np.array([0.1, 0.2, 0.3, 5, 5, 5, 5, 5, 5, 5])}
    rows = {r["behaviour"]: r for r in overlap_table(anom, beh, 3)}
    assert rows["prev_token"]["overlap"] == 2 and rows["entropy"]["overlap"] == 3
    assert rows["entropy"]["expected"] == pytest.approx(0.9)
    assert rows["entropy"]["p_hyper"] == pytest.approx(1 / 120)  # 1 / C(10, 3)


@pytest.mark.slow  # the first score of a new shape compiles and draws its null: ~50 s
def test_study_on_a_tiny_model(tmp_path, module_cache):
    folder = pm.bert(tmp_path / "tiny-bert")
    text = tmp_path / "t.txt"
    text.write_text(pm.TEXT * 4)
    res = studies.run("head_function", tmp_path / "out", quick=True, seed=0, model=str(folder),
                      text=str(text))
    out = tmp_path / "out" / "head_function"
    assert {p.name for p in out.iterdir()} >= {"correlations.csv", "overlap.csv", "heads.csv",
                                              "summary.txt", "rho.png"}
    import pandas as pd
    df = pd.read_csv(out / "correlations.csv")
    assert set(df["behaviour"]) == {"entropy", "prev_token", "next_token", "first_token", "self",
                                    "mean_distance"}
    assert (df["n"] == 8).all() and df["rho"].between(-1, 1).all()
    assert res["summary"]["heads"] == 8


def test_study_options(tmp_path, capsys):
    assert main(["study", "minilm", "--model", "x", "--out", str(tmp_path)]) == 2
    assert "takes no --model" in capsys.readouterr().err
