"""The composition section of report.html (rmtbase.report.composition_report) on a random
GPT-2 with a planted K-composition circuit, through ``rmtbase score --composition``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rmtbase.cli import main


def _planted_gpt2(path, n_layer=3, n_head=4, n_embd=64, frm=(0, 3), to=(2, 1)):
    """Untrained GPT-2 whose layer ``to[0]`` head ``to[1]`` has W_K rows in the span of layer
    ``frm[0]`` head ``frm[1]``'s W_OV output: W_K,h2 ← A W_O,h1ᵀ (A Gaussian d_h × d_h). GPT-2's
    Conv1D weights are input-major: c_attn (d, 3d) holds W_K,hᵀ in columns d + h d_h …, c_proj
    (d, d) holds W_O,hᵀ in rows h d_h …"""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    dh = n_embd // n_head
    wo_t = model.transformer.h[frm[0]].attn.c_proj.weight[frm[1] * dh:(frm[1] + 1) * dh, :]
    a = torch.randn(dh, dh)
    with torch.no_grad():
        col = n_embd + to[1] * dh
        model.transformer.h[to[0]].attn.c_attn.weight[:, col:col + dh] = (a @ wo_t).T
    model.save_pretrained(path)
    return path


def test_report_has_the_composition_section_with_the_planted_pair(tmp_path, capsys):
    """The page has one composition section; its table (by standing) starts with the planted
    pair (kind k, L0H3 → L2H1: rank 1 of the receiver's 8 sources and of the kind's 48 pairs,
    flagged, effect > 2, p small), the figure is embedded, and the section comes before the
    other figures (1,000 draws: the planted pair lies beyond them, its p from the GPD tail,
    fitted from 400 draws on). Without --composition the page has no section."""
    m = _planted_gpt2(tmp_path / "g")
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["score", str(m), "--composition", "--draws", "1000", "--stats", "spectral",
                 "--out", str(out), "--quiet"]) == 0
    page = (out / "report.html").read_text()
    assert page.count('<section id="composition">') == 1
    sec = page[page.index('<section id="composition">'):]
    sec = sec[:sec.index("</section>")]
    assert "Head–head composition" in sec
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", sec)]
    rows = re.findall(r"<tr>(.*?)</tr>", sec)[1:]  # the header row first
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", rows[0])]
    got = dict(zip(head, cells, strict=True))
    assert cells[:3] == ["k", "L0H3", "L2H1"], cells
    assert (got["rank_in_receiver"], got["sources"], got["rank_in_kind"]) == ("1", "8", "1")
    assert "kind_to" in got  # the heads' kinds (weight geometry) beside the pair
    assert cells[-1] == "yes"
    vals = [float(v) for v in re.findall(r'data-v="([^"]+)"', rows[0])]
    score, effect, p = vals[:3]
    assert effect > 2 and p <= 1e-3
    assert 'alt="composition.png"' in sec and "data:image/png;base64," in sec
    assert page.index('id="composition"') < page.index('id="figures"')
    import xarray as xr

    ds = xr.open_dataset(out / "composition.nc")
    assert len(rows) == min(50, 3 * 48)  # 3 layers x 4 heads: 48 pairs a kind
    assert np.isclose(score, float(ds.composition.sel(kind="k", layer_from=0, head_from=3,
                                                      layer_to=2, head_to=1)))
    from rmtbase.report.circuit_next import HEADING
    from rmtbase.report.write import write_report

    # the circuits this model can run, with their commands (rmtbase.report.circuit_next)
    block = (out / "summary.txt").read_text().split(HEADING, 1)[1]
    for cmd in ("rmtbase circuits MODEL ", "rmtbase circuits MODEL --task ioi",
                "rmtbase circuits MODEL --task FILE"):
        assert cmd in block and cmd in page, cmd
    assert page.count('<section id="circuits-next">') == 1
    plain = tmp_path / "plain"  # the same score written without the composition
    write_report(xr.load_dataset(out / "scores.nc"), plain, figures=False)
    assert 'id="composition"' not in (plain / "report.html").read_text()
    assert 'id="circuits-next"' not in (plain / "report.html").read_text()
    assert HEADING not in (plain / "summary.txt").read_text()


def test_rows_follow_standing_not_p(tmp_path):
    """A random model with nothing flagged: the table still lists pairs, by standing (rank
    among the receiver's sources, then over the kind: the order checked here against the
    Dataset's ranks, computed independently by a sort of each receiver's scores), none flagged;
    no figure without png."""
    from rmtbase.report.composition_report import composition_section, pair_rows
    from rmtbase.scoring.composition.run import composition

    m = _planted_gpt2(tmp_path / "g", n_layer=2, n_head=2, n_embd=32, frm=(0, 0), to=(0, 0))
    ds = composition(m, draws=500)
    assert int(ds.composition_flag.sum()) == 0
    rows, cols = pair_rows(ds, top=12)
    assert len(rows) == 12 and all(r[-1] == "no" for r in rows)
    keys = [(r[cols.index("rank_in_receiver")], r[cols.index("rank_in_kind")]) for r in rows]
    assert keys == sorted(keys)
    comp = ds.composition.values
    for r in rows:  # the rank among the receiver's sources, by a plain sort
        k = ["q", "k", "v"].index(r[0])
        (a, b), (c, e) = [tuple(int(x) for x in h[1:].split("H")) for h in r[1:3]]
        srcs = np.sort(comp[k, :c, :, c, e].ravel())[::-1]
        assert r[cols.index("sources")] == srcs.size
        assert r[cols.index("rank_in_receiver")] == 1 + int(np.sum(srcs > comp[k, a, b, c, e]))
    html = composition_section(ds, None, top=5)
    assert "by standing" in html and "<img" not in html


def _random_composition(n_l=3, n_h=2, seed=0):
    """A composition Dataset of random scores (assemble, Gaussian null of 200 sorted draws)."""
    from rmtbase.scoring.composition.run import assemble

    rng = np.random.default_rng(seed)
    comp = np.full((3, n_l, n_h, n_l, n_h), np.nan)
    for a in range(n_l):
        for c in range(a + 1, n_l):
            comp[:, a, :, c, :] = rng.uniform(0.05, 0.3, (3, n_h, n_h))
    norms = {"qk": np.ones((n_l, n_h)), "ov": np.ones((n_l, n_h))}
    return assemble(comp, np.zeros((n_l, n_h, n_h)), norms,
                    np.sort(rng.uniform(0.05, 0.2, 200)), attrs={"d": 64, "d_h": 16})


def test_found_lines_say_each_receivers_confirmed_sources_by_path_and_sign():
    """A hand-made circuit list: one line per circuit (two induction heads with the same K
    source on one line, the range of their effects; the suppressing Q source on its own), a
    redundant receiver, a joint effect of the other sign, a receiver with nothing confirmed and
    an unlabelled receiver's dependencies each get their line; the last names the
    counterfactual (zero for rows without one) and the legend; every line is returned and the
    terminal shows the first ones and says where the rest is."""
    from rmtbase.report.circuit_lines import TERMINAL_LINES, found_lines, terminal

    ds = _random_composition()
    row = {"kind": "k", "path": "direct", "from": "L0H1", "label_from": "previous-token",
           "label_to": "induction", "effect_se": 0.01, "confirmed": True, "metric": "induction",
           "score_to": 0.8, "label_length": 10, "role": "supports", "rank_attribution": 1,
           "joint_effect": 0.5, "joint_se": 0.02}
    circuits = [{**row, "to": "L1H0", "rank_weights": 1, "effect_causal": 0.4},
                {**row, "to": "L2H1", "rank_weights": 4, "effect_causal": 0.3,
                 "joint_effect": 0.7},
                {**row, "kind": "q", "to": "L2H1", "rank_weights": 2, "effect_causal": -0.2,
                 "role": "suppresses", "joint_effect": 0.1, "joint_contradicts": True},
                {**row, "kind": "v", "to": "L2H1", "confirmed": False, "rank_weights": 1,
                 "effect_causal": 0.01, "metric": "output_change"},
                {**row, "from": "L0H0", "to": "L2H0", "confirmed": False, "redundant": True,
                 "rank_weights": 1, "effect_causal": 0.02},
                {**row, "from": "L0H0", "to": "L1H1", "confirmed": False, "rank_weights": 1,
                 "effect_causal": 0.0},
                {**row, "from": "L0H0", "to": "L1H2", "confirmed": False, "dependency": True,
                 "label_to": "none", "metric": "attention_tv", "effect_causal": 0.2,
                 "rank_weights": 1}]
    lines = found_lines(ds, circuits, patched=True, meta={"pairs_unlike_random": 3})
    draws = ds["composition_p"].attrs["draws"]
    assert lines == [
        "K: L0H1 +0.3..+0.4 → L1H0, L2H1 induction",
        "Q: L0H1 -0.2±0.01 → L2H1 induction",
        "redundant (no single source confirmed, all earlier ones together pass): L2H0 K",
        "all earlier sources together of the other sign than the confirmed ones' sum: L2H1 Q",
        "no source confirmed on any path: L1H1 induction",
        "no behaviour label (dependencies, not circuits): L1H2 ← K L0H0 0.2±0.01",
        f"composition: 3 of 36 pairs unlike random at {draws} draws, 19 open",
        "effects under zero ablation; what each number means: the legend in summary.txt"]
    # none flagged but 19 pairs open at these draws: undecided, never "no pair differs"
    assert found_lines(ds, circuits, patched=True,
                       meta={"pairs_unlike_random": 0})[0].startswith("composition undecided")
    none = found_lines(ds, [], patched=True, meta={"repeat_lengths": "5, 10"})
    assert none == ["no circuit found: no head after layer 0 reached a behaviour label "
                    "(repeat lengths tried: 5, 10; threshold 0.4 above chance)",
                    f"composition: 19 of 36 pairs unlike random at {draws} draws, 19 open"]
    many = [f"line {i}" for i in range(30)]
    shown = terminal(many)  # a heading row beside them: 23 rows, the last where the rest is
    assert len(shown) == TERMINAL_LINES - 1 and shown[:-1] == many[:TERMINAL_LINES - 2]
    assert shown[-1] == f"… {30 - TERMINAL_LINES + 2} more line(s): all of them in " \
                        "summary.txt and --json"
    assert terminal(many[:5]) == many[:5]
    screen = found_lines(ds)  # no patching: the strongest pair of each kind, not confirmed
    assert len(screen) == 4 and "not confirmed" in screen[-1]
    for kind, line in zip("kqv", screen[:3], strict=True):
        t = ds.composition.sel(kind=kind).values
        a, b, c, e = np.unravel_index(np.nanargmax(t), t.shape)
        assert f"L{a}H{b} → L{c}H{e} (rank 1 of 12" in line
    labelled = found_lines(ds, labels={(2, 1): "induction", (0, 0): "previous-token"})
    k = ds.composition.sel(kind="k").values[:2, :, 2, 1]  # L2H1's 4 earlier sources
    a, b = np.unravel_index(np.argmax(k), k.shape)
    assert labelled[0].startswith(f"L2H1 (induction): top source by weights K L{a}H{b} (")
    assert len(labelled) == 2 and "not confirmed" in labelled[-1]


@pytest.mark.parametrize("n_open, note, first", [
    (19, None, "composition undecided: 19 of 36 pairs open at {d} draws (none flagged; more "
               "draws settle them): no claim that the heads' composition is random"),
    (0, "rmtbase: with 2 permutations BH over all 36 pair entries cannot flag any pair",
     "composition undecided: 36 of 36 pairs open at {d} draws (none flagged; more draws "
     "settle them): no claim that the heads' composition is random"),
    (0, None, "no head pair differs from random (composition: 0 of 36 pairs flagged at {d} "
              "draws, 0 open): no circuit is expected"),
])
def test_no_pair_differs_only_when_the_null_decided_it(n_open, note, first):
    """With no pair flagged but pairs open (or draws too few for BH to flag any), the first line
    said "no head pair differs from random … no circuit is expected": it read
    pairs_unlike_random alone. Now that claim needs nothing open; otherwise the line says the
    composition is undecided, naming the open pairs and the draws."""
    from rmtbase.report.circuit_lines import found_lines

    ds = _random_composition()
    ds.attrs["composition_open_pairs"] = n_open
    if note:
        ds.attrs["composition_draws_note"] = note
    d = ds["composition_p"].attrs["draws"]
    lines = found_lines(ds, [], patched=True, meta={"pairs_unlike_random": 0})
    assert lines[0] == first.format(d=d)
    assert sum("no head pair differs" in x for x in lines) == (first.startswith("no head"))


def test_figure_draws_the_chosen_pairs_legibly():
    """plot_circuit on a random 6 x 8 composition: without labels the 10 strongest pairs of
    each kind (30 arrows), with a confirmed circuit list only those pairs (2 arrows, solid), with
    labels only pairs into the labelled receivers; the title says which; no problem found by
    tests/test_figure_legibility.py's checks (nothing clipped, text >= 7 pt) and a size below
    15 x 10 inches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch
    from test_figure_legibility import legibility

    from rmtbase.report.composition_figure import plot_circuit

    ds = _random_composition(n_l=6, n_h=8, seed=3)
    conf = [{"kind": "k", "from": "L0H1", "to": "L3H2", "confirmed": True},
            {"kind": "q", "from": "L2H0", "to": "L5H7", "confirmed": True},
            {"kind": "v", "from": "L1H0", "to": "L5H7", "confirmed": False}]
    labels = {(3, 2): "induction", (0, 1): "previous-token"}
    for kw, n_arrows, words in [({}, 30, "10 strongest pairs of each kind"),
                                ({"circuits": conf, "labels": labels}, 2, "confirmed"),
                                ({"labels": labels}, 9, "top 3 sources")]:
        ax = plot_circuit(ds, **kw)
        fig = ax.figure
        arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
        assert len(arrows) == n_arrows, (kw, len(arrows))
        assert words in ax.get_title()
        n, problems = legibility(fig)
        assert n == 1 and not problems, problems
        w, h = fig.get_size_inches()
        assert w <= 15 and h <= 10
        plt.close(fig)
