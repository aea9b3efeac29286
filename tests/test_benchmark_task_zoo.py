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
