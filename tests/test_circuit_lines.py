"""The circuit findings as a person reads them (rmtbase.report.circuit_lines, circuit_legend,
circuit_text): receivers by layer and head as numbers and sources by |effect|, one line per
circuit with its receivers together, the V sources and the counterfactual-dependent rows
summed up in one line each, a terminal screen within 24 x 80 that names where the rest is, the
legend said once in summary.txt, the lines of one receiver as it is done, and the figure with
every confirmed Q and K edge. Synthetic rows built here; no model."""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from rmtbase.report.circuit_lines import (
    TERMINAL_LINES,
    TERMINAL_WIDTH,
    found_lines,
    receiver_lines,
    terminal,
)

ROW = {"path": "direct", "label_from": "previous-token", "effect_se": 0.01,
       "metric": "induction", "score_to": 0.8, "role": "supports", "ablation": "mean",
       "depends": "", "confirmed": True, "label_to": "induction"}


def _row(kind, frm, to, effect, **kw) -> dict:
    return {**ROW, "kind": kind, "from": frm, "to": to, "effect_causal": effect, **kw}


def _layer_head(name: str) -> tuple[int, int]:
    m = re.fullmatch(r"L(\d+)H(\d+)", name)
    return int(m.group(1)), int(m.group(2))


def _receivers_named(line: str) -> list[str]:
    """The receivers a circuit line names after its arrow, in its order."""
    return re.findall(r"L\d+H\d+", line.split("→", 1)[1])


def test_receivers_by_layer_and_head_as_numbers_and_sources_by_effect():
    """Receivers L11H2, L13H3 and L5H1 (text order puts L5H1 last), each with its own source:
    the circuit lines come L5H1, L11H2, L13H3, as (layer, head) numbers sort them; a
    previous-token receiver in layer 1 comes after the induction heads (label first); within
    a receiver the sources go by |effect| (a suppressing -0.5 first), in the circuit line and
    in the receiver's own line."""
    rows = [_row("k", "L2H0", "L11H2", 0.3), _row("k", "L3H0", "L13H3", 0.3),
            _row("k", "L1H0", "L5H1", 0.1), _row("k", "L4H4", "L5H1", 0.3),
            _row("k", "L0H2", "L5H1", -0.5, role="suppresses"),
            _row("k", "L0H0", "L1H3", 0.4, label_to="previous-token", metric="prev_token")]
    lines = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    circuit = [t for t in lines if t.startswith("K: ")]
    firsts = [_receivers_named(t)[0] for t in circuit]
    assert firsts == ["L5H1", "L11H2", "L13H3", "L1H3"]
    induction = firsts[:3]
    assert induction == sorted(induction, key=_layer_head) != sorted(induction)
    assert circuit[0] == "K: L0H2 -0.5±0.01, L4H4 +0.3±0.01, L1H0 +0.1±0.01 → L5H1 induction"
    mine = receiver_lines([r for r in rows if r["to"] == "L5H1"])
    assert mine == ["L5H1 induction · K: L0H2 -0.5±0.01, L4H4 +0.3±0.01, L1H0 +0.1±0.01"]


def test_receivers_sharing_sources_kind_and_label_share_a_line():
    """Three induction heads whose only confirmed K source is L3H1 direct: one line naming the
    three (layer, head order) with the range of their effects; a fourth with
    a second source, one whose source acts via MLP and a duplicate-token head with the same
    source each get their own line; faithfulness: the range over the receivers and the largest
    floor, left out where not measured (NaN). Sources are named while the line keeps within 78
    columns: the second source of L9H1 is counted (+1 more) and named in the receiver's own
    line."""
    f = {"faithfulness": 0.9, "faithfulness_se": 0.03, "faithfulness_empty": 0.1}
    rows = [_row("k", "L3H1", "L17H5", 0.51, effect_se=0.02, **f),
            _row("k", "L3H1", "L8H0", 0.38, faithfulness=0.8, faithfulness_se=0.05,
                 faithfulness_empty=0.2),
            _row("k", "L3H1", "L12H3", 0.42, **f),
            _row("k", "L3H1", "L9H1", 0.4, **f), _row("k", "L2H2", "L9H1", 0.2, **f),
            _row("k", "L3H1", "L10H0", 0.3, path="via_mlp", faithfulness=np.nan),
            _row("k", "L3H1", "L6H6", 0.3, label_to="duplicate-token",
                 metric="duplicate_token")]
    found = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    lines = [t for t in found if t.startswith("K: ")]
    assert len(lines[1]) <= TERMINAL_WIDTH - 2 < len(lines[1].replace("+1 more", "L2H2 +0.2±0.01"))
    assert receiver_lines([r for r in rows if r["to"] == "L9H1"])[0] == (
        "L9H1 induction · K: L3H1 +0.4±0.01, L2H2 +0.2±0.01; faithful 0.9±0.03 (empty 0.1)")
    assert lines == [
        "K: L3H1 +0.38..+0.51 → L8H0, L12H3, L17H5 induction; faithful 0.8..0.9 (se ≤ 0.05, "
        "empty ≤ 0.2)",
        "K: L3H1 +0.4±0.01 +1 more → L9H1 induction; faithful 0.9±0.03 (empty 0.1)",
        "K: L3H1 via MLP +0.3±0.01 → L10H0 induction",
        "K: L3H1 +0.3±0.01 → L6H6 duplicate-token"]


def test_v_sources_and_counterfactual_dependent_rows_are_one_line_each():
    """Twelve confirmed V sources of three receivers: one line with the counts and the largest;
    rows that pass only under zero ablation (depends "zero") in one line with both numbers, a
    source's receivers together, K before V; rows mean and resample disagree on (depends "counterfactual")
    in another; neither counted as a circuit; each receiver's own lines say its V sources all,
    its dependent rows and an idle source."""
    rows = [_row("k", "L16H0", to, 0.5, idle=to == "L17H5") for to in ("L17H3", "L17H5")]
    rows += [_row("v", f"L{i}H0", to, 0.1 + 0.01 * i, metric="output_change", role="changes")
             for to in ("L17H3", "L17H5", "L18H1") for i in range(4)]
    rows += [_row("k", "L1H3", to, 0.014, confirmed=False, depends="zero", effect_zero=0.14,
                  effect_mean=0.014) for to in ("L17H5", "L17H3")]
    rows += [_row("k", "L2H0", "L18H1", 0.2, confirmed=False, depends="counterfactual",
                  effect_mean=0.2, effect_resample=0.01, effect_zero=np.nan)]
    rows.insert(0, _row("v", "L0H5", "L17H3", 0.05, confirmed=False, depends="zero",
                        effect_zero=0.2, effect_mean=0.05, metric="output_change"))
    lines = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    assert lines[0] == "K: L16H0 +0.5±0.01 → L17H3 induction"
    assert lines[1] == "K: L16H0 +0.5±0.01 idle → L17H5 induction"
    v = [t for t in lines if t.startswith("V: ")]
    assert v == ["V: 12 source(s) confirmed of 3 receiver(s); largest L3H0 → L17H3 0.13±0.01"]
    assert [t for t in lines if t.startswith("depends")] == [
        "depends on zero ablation only (not confirmed): K L1H3 → L17H3, L17H5: zero +0.14, "
        "mean +0.014; V L0H5 → L17H3: zero 0.2, mean 0.05",
        "depends on the counterfactual (not confirmed): K L2H0 → L18H1: resample +0.01, "
        "mean +0.2"]
    assert lines[-1] == ("effects under mean ablation; what each number means: the legend in "
                         "summary.txt")
    assert not any(t.startswith("K: L1H3") or t.startswith("K: L2H0") for t in lines)
    mine = receiver_lines([r for r in rows if r["to"] == "L17H5"])
    assert mine == ["L17H5 induction · K: L16H0 +0.5±0.01 idle",
                    "L17H5 induction · V: L3H0 0.13±0.01, L2H0 0.12±0.01, L1H0 0.11±0.01, "
                    "L0H0 0.1±0.01",
                    "L17H5 induction · depends on zero ablation only: K L1H3: zero +0.14, "
                    "mean +0.014"]


def test_the_search_rows_read_like_the_files():
    """The search's own rows (layer and head numbers, no names or labels): receiver_lines
    names the heads and reads the receiver's label from its statistic; a receiver with
    nothing confirmed says its largest effect; an unlabelled one its dependencies."""
    raw = [{"kind": "k", "path": "direct", "layer_from": 3, "head_from": 1, "layer_to": 12,
            "head_to": 4, "metric": "induction", "effect_causal": 0.4, "effect_se": 0.02,
            "confirmed": True, "role": "supports"},
           {"kind": "q", "path": "via_mlp", "layer_from": 2, "head_from": 0, "layer_to": 12,
            "head_to": 4, "metric": "induction", "effect_causal": 0.03, "effect_se": 0.02,
            "confirmed": False, "role": "supports"}]
    assert receiver_lines(raw) == ["L12H4 induction · K: L3H1 +0.4±0.02"]
    quiet = [dict(raw[1])]
    assert receiver_lines(quiet) == ["L12H4 induction · no source confirmed on any path "
                                     "(largest: Q L2H0 via MLP +0.03±0.02)"]
    dep = [dict(raw[0], confirmed=False, dependency=True, metric="attention_tv")]
    assert receiver_lines(dep) == ["L12H4 (no behaviour label; dependencies, not circuits): "
                                   "K L3H1 0.4±0.02"]
    assert receiver_lines([]) == []


def test_the_terminal_fits_24_rows_of_80_columns_and_names_where_the_rest_is():
    """Three induction circuits after forty previous-token ones, forty-five V sources and
    thirty zero-dependent rows: the found lines are many more than a screen; the terminal's
    rows (a heading row and a two-space indent beside them) fit 24 x 80, are whole lines from
    the first (a line wraps to at most two rows, cut with "…"), show every induction circuit,
    and the last says how many lines are left and where they all are."""
    rows = [_row("k", f"L{i}H1", f"L{20 + i}H3", 0.3 + 0.01 * i) for i in range(3)]
    rows += [_row("k", f"L{i % 9}H{i % 7}", f"L{10 + i // 9}H{i % 9}", 0.25,
                  label_to="previous-token", metric="prev_token") for i in range(40)]
    rows += [_row("v", f"L{i % 9}H{i % 5}", f"L{20 + i % 3}H3", 0.2, metric="output_change",
                  role="changes") for i in range(45)]
    rows += [_row("k", f"L{i % 9}H8", f"L{10 + i // 9}H{i % 9}", 0.01, confirmed=False,
                  depends="zero", effect_zero=0.2, label_to="previous-token",
                  metric="prev_token") for i in range(30)]
    lines = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    previous = [t for t in lines if t.endswith("previous-token") and t.startswith("K: ")]
    assert [_receivers_named(t)[0] for t in previous] == [
        f"L{10 + i // 9}H{i % 9}" for i in range(40)]
    shown = terminal(lines)
    assert len(lines) > TERMINAL_LINES
    assert 1 + len(shown) <= TERMINAL_LINES
    assert all(len("  " + t) <= TERMINAL_WIDTH for t in shown)
    left = int(re.fullmatch(r"… (\d+) more line\(s\): all of them in summary.txt and --json",
                            shown[-1]).group(1))
    whole = [t for t in shown[:-1] if not t.startswith("  ")]
    assert all(lines[i].startswith(t) for i, t in enumerate(whole))
    assert left == len(lines) - len(whole)
    text = " ".join(t.strip() for t in shown)
    for i in range(3):
        assert f"→ L{20 + i}H3 induction" in text
    assert "depends on zero ablation only" in text and "V: 45 source(s) confirmed" in text
    assert "K: L0H0 +0.25±0.01 → L10H0 previous-token" in shown
    long = ["x" * 30 + " y" * 200]
    cut = terminal(long)
    assert len(cut) == 2 and cut[-1].endswith("…") and all(len(t) <= 78 for t in cut)
    assert terminal(lines[:3]) == [r for t in lines[:3] for r in _wrapped(t)]


def _wrapped(line: str) -> list[str]:
    import textwrap

    return textwrap.wrap(line, TERMINAL_WIDTH - 2, subsequent_indent="  ",
                         break_on_hyphens=False)


def test_the_legend_says_each_number_once_under_the_counterfactual(tmp_path):
    """summary.txt: the found lines whole, then every receiver's lines, then the legend, in
    which each term is defined once and the rule names the counterfactual (mean: resample is
    the check); nothing says "explained"; a file without an ablation was written under zero
    ablation and says so."""
    import xarray as xr

    from rmtbase.report.circuit_legend import legend, rule
    from rmtbase.report.circuits_report import summary_text

    rows = [_row("k", "L3H1", "L5H1", 0.4, faithfulness=0.9, faithfulness_se=0.03,
                 faithfulness_empty=0.1),
            _row("v", "L2H0", "L5H1", 0.3, metric="output_change", role="changes")]
    meta = {"ablation": "mean", "expected_false_confirmations": 0.4}
    found = found_lines(None, rows, patched=True, meta=meta)
    cds = xr.Dataset({"label": (("layer", "head"), np.array([["none"] * 2] * 5 + [
        ["none", "induction"]])), "label_score": (("layer", "head"), np.zeros((6, 2)))},
        attrs=meta)
    text = summary_text({"found": found, "circuits": rows}, cds)
    for t in found:
        assert f"  {t}\n" in text
    assert text.index("By receiver") < text.index("Legend:") < text.index("Heads with")
    assert "  L5H1 induction · K: L3H1 +0.4±0.01; faithful 0.9±0.03 (empty 0.1)" in text
    assert "  L5H1 induction · V: L2H0 0.3±0.01" in text
    assert "explained" not in text
    said = legend(meta)
    for term in ("effect±se (K, Q)", "effect±se (V)", "path:", "a..b", "confirmed:",
                 "faithful f±se", "idle:", "depends on zero ablation only:", "redundant:",
                 "dependencies:", "expected false confirmations"):
        assert sum(t.startswith(term) for t in said) == 1, term
    flat = " ".join(text.split())  # a line wrapped within 200 characters, read whole
    assert sum(flat.count(" ".join(t.split())) for t in said) == len(said)
    assert max(map(len, text.splitlines())) <= 200
    assert "mean ablation" in rule(meta) and "resample" in rule(meta)
    assert "removed" not in " ".join(said)
    assert "under zero ablation" in rule({}) and "resample" not in rule({})
    assert legend({})[0].count("set to zero") == 1


def test_the_command_says_each_receiver_as_it_is_done(monkeypatch, capsys):
    """on_receiver: where the search takes ``on_receiver`` (its Search record has the field),
    a callback that writes the receiver's lines on stderr, each row within 80 columns; nothing
    with --json or --quiet, or where the search has no such field."""
    import dataclasses

    import rmtbase.circuits.head.find as F
    from rmtbase.cli.circuits import on_receiver

    args = types.SimpleNamespace(json=False, quiet=False)
    if "on_receiver" not in F.Search.__dataclass_fields__:
        assert on_receiver(args) == {}

        @dataclasses.dataclass(frozen=True)
        class Search:
            ablation: str = "mean"
            on_receiver: object = None

        monkeypatch.setattr(F, "Search", Search)
    say = on_receiver(args)["on_receiver"]
    rows = [_row("k", "L3H1", "L5H1", 0.4)] + [
        _row("v", f"L{i}H0", "L5H1", 0.3, metric="output_change") for i in range(5)] * 6
    capsys.readouterr()
    say(rows)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "rmtbase circuits: found L5H1 induction · K: L3H1 +0.4±0.01"
    assert err[1].startswith("rmtbase circuits: found L5H1 induction · V: L0H0 0.3±0.01")
    assert err[-1].endswith("…") and len(err) == 3
    assert all(len(t) <= TERMINAL_WIDTH for t in err)
    for off in ({"json": True}, {"quiet": True}):
        assert on_receiver(types.SimpleNamespace(**{"json": False, "quiet": False, **off})) \
            == {}


def test_the_figure_draws_every_confirmed_qk_edge_and_v_faint():
    """Five confirmed K edges and sixty confirmed V edges: every K edge drawn at full colour
    (the old cap of 40 edges by standing left K edges out), at most MAX_EDGES V edges, the
    largest by |effect|, faint; the title says so; legible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch
    from test_composition_report import _random_composition
    from test_figure_legibility import legibility

    from rmtbase.report.composition_figure import KIND_COLOURS, MAX_EDGES, V_ALPHA, plot_circuit

    ds = _random_composition(n_l=6, n_h=8, seed=3)
    k = [_row("k", f"L{i}H1", f"L5H{i}", 0.3) for i in range(5)]
    pairs = [(a, b, c, e) for a in range(5) for b in range(8) for c in range(a + 1, 6)
             for e in range(8)][::7][:60]
    v = [_row("v", f"L{a}H{b}", f"L{c}H{e}", 0.1 + 0.01 * i, metric="output_change")
         for i, (a, b, c, e) in enumerate(pairs)]
    ax = plot_circuit(ds, circuits=k + v, labels={(5, i): "induction" for i in range(5)})
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    red = matplotlib.colors.to_rgba(KIND_COLOURS["k"])[:3]
    green = matplotlib.colors.to_rgba(KIND_COLOURS["v"])[:3]
    solid_k = [p for p in arrows if p.get_edgecolor()[:3] == pytest.approx(red)]
    faint_v = [p for p in arrows if p.get_edgecolor()[:3] == pytest.approx(green)]
    assert len(solid_k) == 5 and len(faint_v) == MAX_EDGES
    assert all(p.get_alpha() == V_ALPHA for p in faint_v)
    assert all(p.get_alpha() > V_ALPHA for p in solid_k)
    assert "5 Q/K pair(s) confirmed by path patching, all drawn" in ax.get_title()
    assert f"the {MAX_EDGES} largest by |effect|" in ax.get_title()
    n, problems = legibility(ax.figure)
    assert n == 1 and not problems, problems
    plt.close(ax.figure)


def test_the_score_screen_fits_24_rows_with_its_heading_and_counts():
    """``score --composition --probe``'s screen (summary_lead, terminal): the heading, the
    found lines and the count of pairs unlike random together fit 24 rows of 80 columns; its
    summary.txt block holds every found line, every receiver's lines and the legend."""
    from test_composition_report import _random_composition

    from rmtbase.report.composition_report import summary_lead

    rows = [_row("k", f"L{i % 9}H{i // 9}", f"L{10 + i}H3", 0.3) for i in range(40)]
    found = found_lines(None, rows, patched=True, meta={"ablation": "mean"})
    ctx = {"composition": _random_composition(n_l=6, n_h=8), "patched": True, "labels": {},
           "found": found, "circuits": rows, "meta": {"ablation": "mean"}}
    screen = summary_lead(ctx, terminal=True).rstrip("\n").split("\n")
    assert len(screen) == TERMINAL_LINES and all(len(t) <= TERMINAL_WIDTH for t in screen)
    assert screen[0].startswith("What was found") and "unlike random" in " ".join(screen[-2:])
    assert any("more line(s): all of them in summary.txt" in t for t in screen)
    whole = summary_lead(ctx)
    assert all(f"  {t}\n" in whole for t in found)
    assert "By receiver" in whole and "Legend:" in whole
