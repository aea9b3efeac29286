"""Every numeric option of every command and every numeric keyword of the public API has both
bounds: a value outside them (huge, negative, zero, NaN, infinite, not a number) or a list
naming a value twice is refused in one line (exit 2 from the CLI, InputError from the API),
before any work, never a traceback.

Property-based (hypothesis): the CLI is driven in-process through :func:`rmtbase.cli.main`
with every command's ``run`` replaced by a function that fails the test (a refusal must come
first, so no model is read and nothing is drawn); the API functions with their loaders and
scorers replaced the same way. The quick tier runs a fixed number of derandomized examples; the
slow tier many more."""

from __future__ import annotations

import argparse
import contextlib
import io
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmtbase.checks import MAX_COUNT, MAX_DRAWS, MIN_NULL_DRAWS
from rmtbase.cli import COMMANDS, bounds, build_parser, main
from rmtbase.errors import InputError, RmtbaseError
from rmtbase.limits import MAX_BYTES, MAX_DIM

QUICK = settings(max_examples=150, derandomize=True, database=None, deadline=None,
                 suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=3000, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))

#: A command line that parses (its required arguments) for each command.
BASE = {
    "constants": [], "spectrum": ["--d", "64", "--dh", "8"], "elementwise": ["--dh", "8"],
    "product-network": ["--kind", "ginibre", "--depth", "2"],
    "baseline": ["--d", "64", "--dh", "8"], "sweep": ["--d", "64", "--dh", "8", "--workers", "1", "--out", "no-such.nc"],
    "score": ["m"], "heavy-tail": ["m"], "circuits": ["m"], "combine": ["a", "b"], "probe": ["m"], "compare": ["a"],
    "study": ["x"],
}
#: argparse types of numeric options, and how a value of each is written.
_NUMERIC = {"positive_int", "number", "int", "lengths_arg", "layers_arg", "heads_arg"}


def _numeric_options() -> list[tuple[str, str, str, bool]]:
    """(command, flag, dest, whether a list) of every numeric option of every command."""
    sub = next(a for a in build_parser()._actions
               if isinstance(a, argparse._SubParsersAction))
    out = []
    for command, p in sub.choices.items():
        for a in p._actions:
            name = getattr(a.type, "__name__", None)
            if a.option_strings and name in _NUMERIC:
                many = a.nargs == "+" or name in ("lengths_arg", "layers_arg", "heads_arg")
                out.append((command, a.option_strings[0], a.dest, many))
    return out


OPTIONS = _numeric_options()


def _rule(command, dest):
    return {**bounds.BOUNDS, **bounds.BY_COMMAND.get(command, {})}[dest]


def test_every_numeric_option_has_both_bounds():
    """A numeric option added without a rule in rmtbase.cli.bounds fails here."""
    assert {c for c, *_ in OPTIONS} == set(BASE) - {"compare"}  # compare has no number
    assert set(BASE) == set(COMMANDS)
    for command, flag, dest, _ in OPTIONS:
        rule = _rule(command, dest)
        lo, hi = (0, 2**32 - 1) if isinstance(rule, bounds.Seed) else (
            (1, MAX_COUNT) if isinstance(rule, bounds.Head) else (rule.lo, rule.hi))
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi, (command, flag)


def test_min_repeat_is_the_circuit_searchs():
    from rmtbase.circuits.head.sequences import MIN_REPEAT

    assert bounds.MIN_REPEAT == MIN_REPEAT


def _outside(rule) -> st.SearchStrategy:
    """Text of a value outside ``rule``: below, above, non-finite, or not a number."""
    words = ["nan", "inf", "-inf", "NaN", "1e999", "abc", "", "0x10", "½", "2,5", "None", "1e",
             " "]
    words = st.sampled_from(words if isinstance(rule, bounds.Real) else [*words, "1.5", "1e3"])
    if isinstance(rule, bounds.Real):
        lo, hi = rule.lo, rule.hi
        num = st.one_of(st.floats(max_value=lo, exclude_max=not rule.open),
                        st.floats(min_value=hi, exclude_min=not rule.open),
                        st.sampled_from([-1e308, 1e308, 0.0, -0.0]).filter(
                            lambda v: v <= lo or v >= hi))
        return st.one_of(num.map(repr), words)
    lo, hi = (0, 2**32 - 1) if isinstance(rule, bounds.Seed) else (rule.lo, rule.hi)
    num = st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                    st.sampled_from([-(10**20), 10**20, 2**63, 2**64 + 1, -1]).filter(
                        lambda v: v < lo or v > hi))
    return st.one_of(num.map(str), words)


def _inside(command, dest) -> st.SearchStrategy:
    """Text of one value within ``dest``'s bounds."""
    rule = _rule(command, dest)
    if isinstance(rule, bounds.Head):
        return st.tuples(st.integers(1, 40), st.integers(0, 40)).map(lambda h: f"L{h[0]}H{h[1]}")
    if isinstance(rule, bounds.Seed):
        return st.integers(0, 2**32 - 1).map(str)
    if isinstance(rule, bounds.Real):
        return st.floats(rule.lo, rule.hi, exclude_min=rule.open,
                         exclude_max=rule.open).map(repr)
    return st.integers(rule.lo, min(rule.hi, rule.lo + 1000)).map(str)


def _hostile(option) -> st.SearchStrategy:
    """The argv tail of one hostile use of ``option``: a value outside its bounds (alone or
    among good ones in a list), or a list naming a good value twice."""
    command, flag, dest, many = option
    rule = _rule(command, dest)
    if isinstance(rule, bounds.Head):
        bad = st.one_of(
            st.integers(max_value=0).map(lambda n: f"L{n}H0"),
            st.integers(min_value=MAX_COUNT + 1).map(lambda n: f"L1H{n}"),
            st.text(max_size=6).map(lambda t: f"L{t}"))
    else:
        bad = _outside(rule)
    if not many:
        return bad.map(lambda v: [f"{flag}={v}"])
    comma = dest in ("repeat_length", "layers", "receivers")
    good = st.lists(_inside(command, dest), max_size=3)

    def listed(parts):
        return [f"{flag}={','.join(parts)}"] if comma else [flag, *parts]
    mixed = st.tuples(good, bad, good).map(lambda t: listed([*t[0], t[1], *t[2]]))
    if dest in bounds.REPEATS_ALLOWED:
        return mixed
    twice = st.tuples(good, _inside(command, dest)).map(
        lambda t: listed([t[1], *t[0], t[1]]))
    return st.one_of(mixed, twice)


@pytest.fixture(scope="module")
def no_run():
    """Every command's ``run`` (its work) fails the test when called."""
    import importlib

    def work(args):
        raise AssertionError(f"rmtbase {args.command} started its work before the refusal")

    with pytest.MonkeyPatch.context() as mp:
        for name in COMMANDS:
            mp.setattr(importlib.import_module(f"rmtbase.cli.{name.replace('-', '_')}"),
                       "run", work)
        yield


def _refused_in_one_line(argv, flag, value=None) -> None:
    """``main(argv)`` exits 2 with one line naming ``flag`` (or, for a list item argparse takes
    for an option, such as ``-1e+16``, naming that item)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own refusal (_Parser.error: one line)
            code = exc.code
    lines = err.getvalue().splitlines()
    assert code == 2, (argv, lines)
    assert len(lines) == 1 and lines[0].startswith("rmtbase: error: "), (argv, lines)
    named = flag in lines[0] or (value is not None and str(value).startswith("-")
                                 and "unrecognized arguments" in lines[0])
    assert named and "Traceback" not in err.getvalue(), (argv, lines)


def _drive_cli(data) -> None:
    option = data.draw(st.sampled_from(OPTIONS))
    tail = data.draw(_hostile(option))
    starts = [t for t in tail[1:] if t.startswith("-")]
    _refused_in_one_line([option[0], *BASE[option[0]], *tail], option[1],
                         starts[0] if starts else None)


@QUICK
@given(data=st.data())
def test_every_option_refuses_what_is_outside_its_bounds(no_run, data):
    _drive_cli(data)


@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_every_option_refuses_what_is_outside_its_bounds_many(no_run, data):
    _drive_cli(data)


@pytest.mark.parametrize("argv, needle", [
    (["circuits", "m", "--k", "99999999999999999999"], "--k must be at most 1000000"),
    (["circuits", "m", "--draws", "99999999999999999999"], "--draws must be at most 10000000"),
    (["circuits", "m", "--receivers", "L2H0,L2H0"], "--receivers names L2H0 twice"),
    (["circuits", "m", "--layers", "2,1,2"], "--layers names 2 twice"),
    (["baseline", "--d", "64", "64", "--dh", "8"], "--d names 64 twice"),
    (["spectrum", "--d", "64", "--dh", "8", "--sigma", "1e300"], "--sigma must be in"),
    (["elementwise", "--dh", "99999999999999999999"], "--dh must be at most 1048576"),
    (["product-network", "--kind", "ginibre", "--depth", "3", "--gain", "1e308"],
     "--gain must be in [1e-30, 1e+30]"),
])
def test_the_reported_values_are_refused_in_one_line(no_run, argv, needle):
    """`circuits --k 1e20` ran the whole search then crashed writing circuits.nc (47 lines),
    `--draws 1e20` gave 84 lines, `--receivers L2H0,L2H0` patched the head twice, `elementwise
    --dh 1e20` an OverflowError, `--gain 1e308` and `--sigma 1e300` printed None and inf."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 2 and err.getvalue().count("\n") == 1 and needle in err.getvalue()


# ---------------------------------------------------------------- the public API


def _tiny_composition():
    import numpy as np

    from rmtbase.scoring.composition.run import assemble

    n_l, n_h = 3, 2
    rng = np.random.default_rng(0)
    comp = np.full((3, n_l, n_h, n_l, n_h), np.nan)
    for a in range(n_l):
        for c in range(a + 1, n_l):
            comp[:, a, :, c, :] = rng.uniform(0.05, 0.3, (3, n_h, n_h))
    norms = {"qk": np.ones((n_l, n_h)), "ov": np.ones((n_l, n_h))}
    return assemble(comp, np.zeros((n_l, n_h, n_h)), norms,
                    np.sort(rng.uniform(0.05, 0.2, 200)), attrs={"d": 64, "d_h": 16})


@pytest.fixture(scope="module")
def api():
    """{name: (call(value) -> None, the keyword's bounds as a bounds rule)}, with every loader
    and scorer the calls could reach failing the test."""
    import jax

    import rmtbase
    import rmtbase.baseline.cache as cache
    import rmtbase.baseline.null as null_mod
    import rmtbase.circuits.core.loader as cmodel
    import rmtbase.circuits.task.search as task_search
    import rmtbase.models as models
    import rmtbase.scoring.composition.run as comp_run
    from rmtbase.analytic import product, variance_gamma
    from rmtbase.analytic.constants import constants
    from rmtbase.baseline.null import null_draws
    from rmtbase.circuits import find_circuits
    from rmtbase.circuits.task.search import find_task_circuit
    from rmtbase.probe import probe_model

    def work(*a, **k):
        raise AssertionError("work started before the refusal")

    comp = _tiny_composition()
    Int, Real = bounds.Int, bounds.Real
    calls = {
        "composition.draws": (lambda v: rmtbase.composition("no/such/m", draws=v),
                              Int(MIN_NULL_DRAWS, MAX_DRAWS)),
        "composition.seed": (lambda v: rmtbase.composition("no/such/m", seed=v), bounds.Seed()),
        "composition.alpha": (lambda v: rmtbase.composition("no/such/m", alpha=v),
                              Real(0.0, 1.0, open=True)),
        "score_model.draws": (lambda v: rmtbase.score_model("no/such/m", draws=v),
                              Int(MIN_NULL_DRAWS, MAX_DRAWS)),
        "score_model.max_draws": (lambda v: rmtbase.score_model("no/such/m", max_draws=v),
                                  Int(2, MAX_DRAWS)),
        "score_model.element_draws": (
            lambda v: rmtbase.score_model("no/such/m", element_draws=v), Int(0, MAX_DRAWS)),
        "score_model.spectrum_draws": (
            lambda v: rmtbase.score_model("no/such/m", spectrum_draws=v), Int(0, MAX_DRAWS)),
        "score_model.alpha": (lambda v: rmtbase.score_model("no/such/m", alpha=v),
                              Real(0.0, 1.0, open=True)),
        "score_model.seed": (lambda v: rmtbase.score_model("no/such/m", seed=v), bounds.Seed()),
        "find_circuits.k": (lambda v: find_circuits("no/such/m", comp, k=v), Int(1, MAX_COUNT)),
        "find_circuits.seed": (lambda v: find_circuits("no/such/m", comp, seed=v),
                               bounds.Seed()),
        "probe_model.window": (lambda v: probe_model("no/such/m", window=v), Int(3, MAX_COUNT)),
        "variance.d_h": (lambda v: variance_gamma.variance(v), Int(1, MAX_DIM)),
        "expected_sum_lambda.d": (lambda v: product.expected_sum_lambda(v, 1), Int(1, MAX_DIM)),
        "expected_sum_lambda.sigma_q": (lambda v: product.expected_sum_lambda(8, 2, sigma_q=v),
                                        Real(1e-10, 1e10)),
        "constants.digits": (lambda v: constants(v, progress=False), Int(1, 1000)),
        "null_draws.memory_budget": (
            lambda v: null_draws(jax.random.key(0), 8, 2, 4, memory_budget=v),
            Int(1, MAX_BYTES)),
        **{f"find_task_circuit.{k}": ((lambda v, k=k: find_task_circuit("no/such/m", "t",
                                                                      **{k: v})), rule)
           for k, rule in (("top", Int(1, MAX_COUNT)), ("points", Int(1, 1000)),
                           ("steps", Int(0, 1000)), ("prune_steps", Int(1, 1000)),
                           ("batch", Int(1, MAX_COUNT)), ("holdout", Real(0.0, 0.9)),
                           ("prune_budget", Int(0, MAX_COUNT)))},
    }
    with pytest.MonkeyPatch.context() as mp:
        for module, name in ((models, "model_info"), (models, "load_heads"),
                             (cache, "null_table"), (cmodel, "load_model"),
                             (comp_run, "_layers"), (task_search, "load"),
                             (task_search, "load_described"),
                             (task_search, "read_composition"), (null_mod, "_run")):
            mp.setattr(module, name, work)
        yield calls


def _api_value(rule) -> st.SearchStrategy:
    """A Python value outside ``rule``: out of range, a bool, a float for an integer, NaN, a
    string, a list."""
    other = st.sampled_from([True, False, "3", [3], float("nan"), float("inf"), b"1",
                             10**400, -(10**400)])
    if isinstance(rule, bounds.Real):
        return st.one_of(st.floats(max_value=rule.lo, exclude_max=not rule.open),
                         st.floats(min_value=rule.hi, exclude_min=not rule.open), other)
    lo, hi = (0, 2**32 - 1) if isinstance(rule, bounds.Seed) else (rule.lo, rule.hi)
    return st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                     st.floats(allow_nan=True).filter(lambda f: f != int(f) if math.isfinite(f)
                                                      else True), other)


def _drive_api(api, data) -> None:
    name = data.draw(st.sampled_from(sorted(api)))
    call, rule = api[name]
    value = data.draw(_api_value(rule))
    keyword = name.split(".")[1]
    with pytest.raises(RmtbaseError) as info:
        call(value)
    msg = str(info.value)
    assert isinstance(info.value, InputError) and "\n" not in msg, (name, value, msg)
    assert keyword.split("_")[0] in msg or keyword in msg or "dimensions" in msg, (name, msg)


@QUICK
@given(data=st.data())
def test_every_keyword_refuses_what_is_outside_its_bounds(api, data):
    _drive_api(api, data)



@pytest.mark.slow
@SLOW
@given(data=st.data())
def test_every_keyword_refuses_what_is_outside_its_bounds_many(api, data):
    _drive_api(api, data)


def test_find_circuits_refuses_a_receiver_or_layer_named_twice(api):
    from rmtbase.circuits import find_circuits

    comp = _tiny_composition()
    with pytest.raises(InputError, match=r"^receivers_of_interest names L2H0 twice$"):
        find_circuits("no/such/m", comp, receivers_of_interest=[(2, 0), (1, 1), (2, 0)])
    with pytest.raises(InputError, match=r"^layers names a layer twice"):
        find_circuits("no/such/m", comp, layers=[1, 2, 1])
