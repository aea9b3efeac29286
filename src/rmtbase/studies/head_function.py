"""Study ``head_function`` (issue 23): do a head's weight statistics say what it does on text?

For one model (default the embedded MiniLM; ``rmtbase study head_function --model DIR`` for
any folder with a tokenizer) the study scores every head (:func:`rmtbase.scoring.score.
score_model`, all statistics, Gaussian null) and probes it on the shipped English text
(:func:`rmtbase.probe.probe_model`), then relates the two over heads:

* **Spearman ρ** of every weight variable against every behaviour (:data:`rmtbase.probe.
  BEHAVIOURS`; a behaviour undefined for the model, such as ``next_token`` of a causal model,
  is left out). Weight variables: each scored statistic's raw value (``value`` of
  ``<matrix>.<stat>``), ``-log10 head_p``, and ``distance``, ``head_effect``, ``n_spikes`` when
  the score has them. A variable that is not finite for every head is left out.
* **Within-layer permutation p** (two-sided about the permutation distribution's mean,
  add-one): the behaviour is permuted among the
  heads of each layer (``n_perm`` = 10,000, 1,000 with ``--quick``, which also scores against
  at least 200 null draws and the first quarter of the default text; fixed seed), the weight
  variable held fixed, so that layer-level trends shared by both sides (depth changes both
  weights and attention) do not count as evidence about individual heads. BH q over the whole
  table.
* **Overlap** of the k most anomalous heads with the k most specialised for each behaviour
  (k = max(3, round(n/10))): anomaly is ``|distance|`` when the score has it, else
  ``|head_effect|``, else the largest |z| over the head's decision statistics (not |effect|,
  which is bounded and ties at its cap for many heads of a trained model);
  specialised is the largest value (smallest for ``entropy`` and ``mean_distance``, the most
  focused and most local heads). Beside it the expected overlap k²/n and the hypergeometric
  tail P(X ≥ overlap).

Writes ``correlations.csv``, ``overlap.csv``, ``heads.csv`` (the joined per-head values),
``summary.txt`` and ``rho.png`` (heatmap of ρ, weight variable × behaviour; dots where
q ≤ 0.05).

Caveat for rotary models (Llama, SmolLM2, Qwen, …): the scored W_QK = W_Qᵀ W_K is the form at
relative position 0. Under RoPE, attention between positions i and j uses W_Qᵀ R(j − i) W_K,
so a previous-token head can place its structure in how W_Q and W_K rotate against each other
at offset 1 while its position-0 spectrum stays close to the null's; a null-like spectrum is no
evidence that a rotary head lacks a positional function. (BERT-style models such as MiniLM add
learned absolute positions to the residual stream instead, and W_QK is their whole bilinear
form.) Measured on SmolLM2-135M-Instruct (Q4_1 GGUF dequantised, 270 heads): ``qk.
spectral_entropy`` vs ``prev_token`` ρ = +0.64 and ``-log10 head_p`` vs ``prev_token``
ρ = −0.51: its previous-token heads are among its *least* anomalous (none of the 27 most
anomalous heads is among the 27 strongest previous-token heads).
"""

from __future__ import annotations

import numpy as np

from . import _output as io

#: Behaviours whose *smallest* values mark the most specialised heads.
LOW_IS_SPECIAL = ("entropy", "mean_distance")
#: Per-head variables of a score taken beside the statistics' values when present.
EXTRA_VARS = ("distance", "head_effect", "n_spikes")
N_PERM, N_PERM_QUICK = 10_000, 1_000


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x).astype(np.float64)


def _unit(r: np.ndarray) -> np.ndarray:
    """Ranks centred and scaled to unit norm along the last axis (Pearson of ranks = dot)."""
    c = r - r.mean(axis=-1, keepdims=True)
    n = np.linalg.norm(c, axis=-1, keepdims=True)
    return np.divide(c, n, out=np.zeros_like(c), where=n > 0)


def layer_permutations(layer: np.ndarray, n_perm: int, seed: int) -> np.ndarray:
    """(n_perm, n) index arrays, each permuting positions only within equal ``layer`` labels."""
    rng = np.random.default_rng(seed)
    n = layer.size
    out = np.tile(np.arange(n), (n_perm, 1))
    for lab in np.unique(layer):
        idx = np.flatnonzero(layer == lab)
        out[:, idx] = idx[rng.permuted(np.tile(np.arange(idx.size), (n_perm, 1)), axis=1)]
    return out


def spearman_table(weights: dict[str, np.ndarray], behaviours: dict[str, np.ndarray],
                   layer: np.ndarray, *, n_perm: int = N_PERM, seed: int = 0) -> list[dict]:
    """Rows ``{weight, behaviour, n, rho, p_perm}``: Spearman ρ of each pair over the heads
    (flattened (layer, head) arrays, all finite) with the within-layer permutation p."""
    perm = layer_permutations(np.asarray(layer), n_perm, seed)
    wnames = list(weights)
    wx = _unit(np.stack([_ranks(weights[w]) for w in wnames]))        # (W, n)
    rows = []
    for b, y in behaviours.items():
        ry = _ranks(y)
        rho = wx @ _unit(ry)                                           # (W,)
        null = _unit(ry[perm]) @ wx.T                                   # (n_perm, W)
        # two-sided about the permutation mean: within-layer permutations keep the
        # layer-level part of rho, so the null is not centred at 0
        m = null.mean(axis=0)
        exceed = (np.abs(null - m) >= np.abs(rho - m)[None, :] - 1e-12).sum(axis=0)
        p = (1 + exceed) / (1 + n_perm)
        rows += [dict(weight=w, behaviour=b, n=int(y.size), rho=float(rho[i]),
                      p_perm=float(p[i])) for i, w in enumerate(wnames)]
    q = _bh([r["p_perm"] for r in rows])
    for r, qi in zip(rows, q, strict=True):
        r["q"] = float(qi)
    return rows


def _bh(p) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p)
    q = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def anomaly(ds) -> tuple[str, np.ndarray]:
    """(name, per-head anomaly (layer, head)) for the overlap (module docstring)."""
    for v in ("distance", "head_effect"):
        if v in ds and ds[v].dims == ("layer", "head"):
            return f"|{v}|", np.abs(np.asarray(ds[v].values, dtype=float))
    # effect is bounded (p floors tie at its cap on strongly trained models): z is not
    z = ds["z"].where(ds["in_family"]).transpose("layer", "head", "stat")
    return "max |z|", np.nan_to_num(np.abs(np.asarray(z.values, dtype=float))).max(-1)


def overlap_table(anom: np.ndarray, behaviours: dict[str, np.ndarray], k: int) -> list[dict]:
    """Rows ``{behaviour, k, n, overlap, expected, p_hyper}`` (module docstring)."""
    from scipy.stats import hypergeom

    n = anom.size
    top_anom = set(np.argsort(-anom, kind="stable")[:k].tolist())
    rows = []
    for b, y in behaviours.items():
        key = y if b in LOW_IS_SPECIAL else -y
        top_b = set(np.argsort(key, kind="stable")[:k].tolist())
        o = len(top_anom & top_b)
        rows.append(dict(behaviour=b, k=k, n=n, overlap=o, expected=k * k / n,
                         p_hyper=float(hypergeom.sf(o - 1, n, k, k))))
    return rows


def weight_variables(ds) -> dict[str, np.ndarray]:
    """Flattened per-head weight variables of a score, finite for every head (docstring)."""
    out = {}
    for s in ds["stat"].values:
        out[str(s)] = np.asarray(ds["value"].sel(stat=s).transpose("layer", "head").values,
                                 dtype=float).ravel()
    p = np.asarray(ds["head_p_value"].values, dtype=float).ravel()
    out["-log10 head_p"] = -np.log10(np.clip(p, 1e-300, 1.0))
    for v in EXTRA_VARS:
        if v in ds and ds[v].dims == ("layer", "head"):
            out[v] = np.asarray(ds[v].values, dtype=float).ravel()
    return {k: v for k, v in out.items() if np.isfinite(v).all() and np.ptp(v) > 0}


def _figure(rows, wnames, bnames, title):
    fig, axes = io.figure(size=(0.9 * len(bnames) + 3.0, 0.2 * len(wnames) + 1.4))
    ax = axes[0, 0]
    rho = np.full((len(wnames), len(bnames)), np.nan)
    sig = np.zeros_like(rho, dtype=bool)
    for r in rows:
        i, j = wnames.index(r["weight"]), bnames.index(r["behaviour"])
        rho[i, j], sig[i, j] = r["rho"], r["q"] <= 0.05
    im = ax.imshow(rho, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    yi, xi = np.nonzero(sig)
    ax.plot(xi, yi, "k.", ms=3)
    ax.set_xticks(range(len(bnames)), bnames, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(wnames)), wnames, fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="Spearman ρ", shrink=0.6)
    return fig


def run(out_dir, quick=False, seed=0, model=None, text=None) -> dict:
    """Run the study; see the module docstring. ``model``: folder, .gguf or hub id (None: the
    embedded MiniLM); ``text``: UTF-8 file (None: the shipped text; ``quick`` uses its first
    quarter)."""
    from ..models import default_model_path
    from ..probe import join, probe_model, read_text
    from ..probe.join import behaviour_names
    from ..probe.text import Text
    from ..scoring.score import score_model

    out = io.prepare(out_dir)
    txt = read_text(text)
    if quick and text is None:
        cut = txt.text[: len(txt.text) // 4]
        txt = Text(cut, txt.sha256 + " (first quarter)", txt.name + "[:1/4]")
    where = default_model_path() if model is None else model
    name = "sentence-transformers/all-MiniLM-L6-v2" if model is None else None
    small = dict(draws=200, max_draws=1000) if quick else {}
    ds = score_model(None if model is None else model, progress=False, seed=seed,
                     spectrum_draws=0, **small)
    ds = join(ds, probe_model(where, text=txt, name=name, progress=False))
    bvars = [b for b in behaviour_names(ds) if np.isfinite(ds[b].values).all()]
    beh = {b[len("behaviour_"):]: np.asarray(ds[b].values, dtype=float).ravel() for b in bvars}
    weights = weight_variables(ds)
    layer = np.repeat(np.arange(ds.sizes["layer"]), ds.sizes["head"])
    n_perm = N_PERM_QUICK if quick else N_PERM
    rows = spearman_table(weights, beh, layer, n_perm=n_perm, seed=seed)
    n = layer.size
    k = max(3, round(n / 10))
    aname, anom = anomaly(ds)
    ov = overlap_table(anom.ravel(), beh, k)
    for r in ov:
        r["anomaly"] = aname
    data = [io.write_csv(rows, out / "correlations.csv"), io.write_csv(ov, out / "overlap.csv")]
    per_head = [dict(layer=int(li), head=int(h), **{w: float(v[i]) for w, v in weights.items()},
                     **{b: float(v[i]) for b, v in beh.items()})
                for i, (li, h) in enumerate(np.ndindex(ds.sizes["layer"], ds.sizes["head"]))]
    data.append(io.write_csv(per_head, out / "heads.csv"))
    label = ds.attrs.get("probe_model", ds.attrs.get("model", ""))
    top = sorted(rows, key=lambda r: -abs(r["rho"]))
    lines = [f"head_function: {label}, {n} heads ({ds.sizes['layer']} layers), "
             f"{ds.attrs.get('probe_n_tokens')} tokens of {ds.attrs.get('probe_text_name')}, "
             f"{ds.attrs.get('probe_attention')} attention",
             f"Spearman rho over heads; p: {n_perm} within-layer permutations; q: BH over "
             f"{len(rows)} pairs", "", f"{'weight':28s} {'behaviour':14s} {'rho':>7s} "
             f"{'p_perm':>8s} {'q':>7s}"]
    lines += [f"{r['weight']:28s} {r['behaviour']:14s} {r['rho']:+7.3f} {r['p_perm']:8.4f} "
              f"{r['q']:7.3f}" for r in top[:25]]
    lines += ["", f"overlap of the {k} most anomalous heads ({aname}) with the {k} most "
              "specialised per behaviour:"]
    lines += [f"  {r['behaviour']:14s} {r['overlap']} (expected {r['expected']:.1f}, "
              f"P(X >= overlap) = {r['p_hyper']:.3g})" for r in ov]
    data.append(io.write_text("\n".join(lines) + "\n", out / "summary.txt"))
    fig = _figure(rows, list(weights), list(beh), f"{label}: weight statistic × behaviour "
                  "(dots: q ≤ 0.05, within-layer permutations)")
    figs = [io.save_figure(fig, out / "rho.png")]
    summary = {"model": label, "heads": n, "pairs": len(rows),
               "pairs_q<=0.05": sum(r["q"] <= 0.05 for r in rows)}
    for r in top[:3]:
        summary[f"{r['weight']} vs {r['behaviour']}"] = \
            f"rho {r['rho']:+.3f}, p_perm {r['p_perm']:.3g}"
    for r in rows:
        if (r["weight"], r["behaviour"]) in (("qk.excess_kurtosis", "entropy"),
                                             ("qk.spectral_entropy", "prev_token")):
            summary[f"{r['weight']} vs {r['behaviour']}"] = \
                f"rho {r['rho']:+.3f}, p_perm {r['p_perm']:.3g}"
    return {"figures": [str(f) for f in figs], "data": [str(d) for d in data],
            "summary": summary}
