"""benchmarks/task_zoo.py's pooling of a ranking's orders: ties broken at random, and ACDC's
visit orders (``--acdc-orders``), each order's curve from the evaluator's points."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def zoo():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("task_zoo", ROOT / "benchmarks" /
                                                      "task_zoo.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return mod


def _points(reach: int, n: int = 10):
    """An evaluator's ``[(k, m(k))]``: m rises by one per edge up to ``reach``, then stays."""
    return {"logit_diff": [(k, float(min(k, reach))) for k in range(n + 1)]}


def test_visit_orders_pool_their_tie_orders_and_each_is_reported(zoo):
    # ACDC (visit 0) has ties (two orders), ACDC@1 none, ACDC@2 two; another method apart
    ev = {"ACDC": _points(5), "ACDC#0": _points(5), "ACDC#1": _points(7),
          "ACDC@1": _points(10), "ACDC@2": _points(5), "ACDC@2#0": _points(4),
          "ACDC@2#1": _points(6), "EAP": _points(1), "EAPX": _points(1)}
    got = zoo.broken_ties("ACDC", ev, 10)
    # f = m / reach-of-the-full (the full model holds m(E)); 0.8 first at 0.8 · reach
    small = {5: 4, 7: 6, 10: 8, 4: 4, 6: 5}
    assert got["orders"] == 5 and got["visit_orders"] == 3
    assert got["smallest_by_order"] == [small[5], small[7], small[10], small[4], small[6]]
    assert got["smallest_by_visit"] == [(4 + 6) / 2, 8.0, (4 + 5) / 2]
    assert got["smallest_reaching_0.8"] == pytest.approx(sum(got["smallest_by_order"]) / 5)
    areas = [zoo.curve_summary(ev[k]["logit_diff"], 10)["area"]
             for k in ("ACDC#0", "ACDC#1", "ACDC@1", "ACDC@2#0", "ACDC@2#1")]
    assert got["area_by_visit"] == pytest.approx([(areas[0] + areas[1]) / 2, areas[2],
                                                  (areas[3] + areas[4]) / 2])
    # a method's own name alone, never another method sharing its prefix
    assert zoo.broken_ties("EAP", ev, 10)["orders"] == 1


def test_a_peer_runs_without_address_randomisation_where_it_can(zoo):
    cmd = zoo._no_aslr()
    assert cmd == () or cmd[0] == "setarch" and cmd[-1] == "-R"


def test_seed_differences_pair_each_seed_and_count_where_rmtbase_is_not_behind(zoo):
    rows = [{"seed": s, "task": "bigram",
             "methods": {"rmtbase": {"area": a}, "EAP-IG": {"area": b}, "ACDC": {"area": c}}}
            for s, a, b, c in ((0, 0.80, 0.82, 0.79), (3, 0.85, 0.81, 0.85),
                               (5, 0.70, 0.70, 0.75))]
    got = zoo.seed_differences(rows)["bigram"]
    assert set(got) == {"EAP-IG", "ACDC"} and got["EAP-IG"]["seeds"] == [0, 3, 5]
    d = [-0.02, 0.04, 0.0]
    assert got["EAP-IG"]["difference"] == pytest.approx(d)
    assert got["EAP-IG"]["mean"] == pytest.approx(sum(d) / 3)
    # the se of the mean: the sample sd (n - 1) over sqrt(n), by hand
    m = sum(d) / 3
    assert got["EAP-IG"]["se"] == pytest.approx((sum((x - m) ** 2 for x in d) / 2 / 3) ** 0.5)
    assert got["EAP-IG"]["at_least"] == 2 and got["ACDC"]["at_least"] == 2
    one = zoo.seed_differences(rows[:1])["bigram"]["ACDC"]
    assert one["difference"] == pytest.approx([0.01]) and one["se"] != one["se"]  # nan


def test_seeds_are_refused_in_one_line_before_any_work(zoo, capsys):
    for argv in (["--seeds", "0,x"], ["--seeds", "0,1", "--suite"]):
        with pytest.raises(SystemExit) as e:
            zoo.main(argv)
        assert e.value.code == 2 and "--seeds" in capsys.readouterr().err
