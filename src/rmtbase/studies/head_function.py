"""Study ``head_function``: do a head's weight statistics say what it does on text?

One model (default the embedded MiniLM) is scored and probed on the shipped text; each weight
variable (statistics, ``-log10 head_p``, ``distance``, ``head_effect``, ``n_spikes``, the
profile, kinds, baseline rows ``scale`` and ``layer``) is tested against each behaviour by
:mod:`._association` (``n_perm`` 10,000). Writes ``correlations.csv``, ``heads.csv``,
``summary.txt``, ``rho.png``. For rotary models W_QK is the relative-position-0 form."""

from __future__ import annotations

import numpy as np

from ..errors import InputError, ModelError
from ..progress import stage
from . import _output as io
from ._association import association_table

#: Per-head variables of a score taken beside the statistics' values when present.
EXTRA_VARS = ("distance", "head_effect", "n_spikes")
N_PERM, N_PERM_QUICK = 10_000, 1_000
#: Fewest heads a rank correlation over heads is computed on.
MIN_HEADS = 4
#: The baseline weight rows (module docstring).
BASELINES = ("scale", "layer")


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


def profile_variables(model) -> dict[str, np.ndarray]:
    """Flattened per-head profile of ``model``'s factors (:mod:`rmtbase.stats.alignment`) and
    its scale σ_Q·σ_K (rms of W_Q times rms of W_K); GQA keys are each query head's own."""
    from ..models import load_heads
    from ..stats.alignment import alignment, input_focus, symmetry

    cols: dict[str, list] = {k: [] for k in ("alignment", "symmetry", "q.input_focus",
                                             "k.input_focus", "scale")}
    for h in load_heads(model):
        wq, wk = np.asarray(h.wq, dtype=np.float32), np.asarray(h.wk, dtype=np.float32)
        cols["alignment"].append(np.asarray(alignment(wq, wk)))
        cols["symmetry"].append(np.asarray(symmetry(wq, wk)))
        cols["q.input_focus"].append(np.asarray(input_focus(wq)))
        cols["k.input_focus"].append(np.asarray(input_focus(wk)))
        cols["scale"].append(np.sqrt(np.mean(wq.astype(np.float64) ** 2, axis=(1, 2))
                                     * np.mean(wk.astype(np.float64) ** 2, axis=(1, 2))))
    return {k: np.concatenate(v).astype(np.float64) for k, v in cols.items()}


def kind_variables(ds) -> dict[str, np.ndarray]:
    """Per kind a 0/1 variable over heads, ``kind <name>`` (1 where among ``head_kinds``)."""
    from ..decision.kinds import ALL_KINDS, kinds_of

    got = kinds_of(ds)
    if got is None:
        return {}
    kinds = [set(str(k).split("+")) for k in got[1].ravel()]
    return {f"kind {k}": np.array([k in ks for ks in kinds], dtype=np.float64)
            for k in ALL_KINDS}


def _figure(rows, wnames, bnames, title):
    fig, axes = io.figure(1, 2, size=(0.9 * len(bnames) + 3.0, 0.2 * len(wnames) + 1.6))
    for ax, col, name in ((axes[0, 0], "rho", "Spearman ρ"),
                          (axes[0, 1], "partial", "partial ρ | scale, layer")):
        val = np.full((len(wnames), len(bnames)), np.nan)
        sig = np.zeros_like(val, dtype=bool)
        for r in rows:
            i, j = wnames.index(r["weight"]), bnames.index(r["behaviour"])
            val[i, j] = r["rho"] if col == "rho" else r["partial_rho"]
            sig[i, j] = r[f"q_{col}"] <= 0.05
        im = ax.imshow(val, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                       interpolation="nearest")
        yi, xi = np.nonzero(sig)
        ax.plot(xi, yi, "k.", ms=3)
        ax.set_xticks(range(len(bnames)), bnames, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(wnames)), wnames, fontsize=7)
        ax.set_title(f"{name} (dots: q ≤ 0.05)", fontsize=9)
    fig.suptitle(title, fontsize=9)
    fig.colorbar(im, ax=axes[0, :].tolist(), label="ρ", shrink=0.6)
    return fig


def run(out_dir, quick=False, seed=0, model=None, text=None) -> dict:
    """Run the study. ``model``: folder, .gguf or hub id (None: MiniLM); ``text``: UTF-8 file
    (None: the shipped text)."""
    from ..models import default_model_path
    from ..probe import join, probe_model, read_text
    from ..probe.join import behaviour_names
    from ..probe.run import check_model
    from ..probe.text import Text
    from ..scoring.score import score_model

    check_model(model)  # no tokenizer: refused before the score runs
    from ..models import model_info

    info = model_info(default_model_path() if model is None else model)
    if int(info.n_layers) * int(info.n_heads) < MIN_HEADS:
        raise InputError(f"head_function correlates variables over heads; {info.name} has "
                         f"{int(info.n_layers) * int(info.n_heads)} (at least {MIN_HEADS} "
                         "needed)")
    out = io.prepare(out_dir)
    txt = read_text(text)
    if quick and text is None:
        cut = txt.text[: len(txt.text) // 4]
        txt = Text(cut, txt.sha256 + " (first quarter)", txt.name + "[:1/4]")
    where = default_model_path() if model is None else model
    name = "sentence-transformers/all-MiniLM-L6-v2" if model is None else None
    small = dict(draws=200, max_draws=1000) if quick else {}
    stage("head_function", f"scoring {info.name}", enabled=not quick)
    ds = score_model(None if model is None else model, progress=not quick, seed=seed,
                     spectrum_draws=0, **small)
    stage("head_function", f"probing {info.name} on {txt.name}", enabled=not quick)
    ds = join(ds, probe_model(where, text=txt, name=name, progress=not quick))
    bvars = [b for b in behaviour_names(ds) if np.isfinite(ds[b].values).all()]
    beh = {b[len("behaviour_"):]: np.asarray(ds[b].values, dtype=float).ravel() for b in bvars}
    weights = weight_variables(ds)
    prof = profile_variables(where)
    layer = np.repeat(np.arange(ds.sizes["layer"]), ds.sizes["head"])
    if prof["scale"].size != layer.size:
        raise ModelError(f"{where}: {prof['scale'].size} heads read from the weights, "
                         f"{layer.size} scored")
    scale = prof.pop("scale")
    weights = {"scale": scale, "layer": layer.astype(np.float64), **prof, **weights,
               **kind_variables(ds)}
    weights = {k: v for k, v in weights.items() if np.isfinite(v).all() and np.ptp(v) > 0}
    if not beh or not [w for w in weights if w not in BASELINES]:
        what = "behaviour" if not beh else "weight statistic"
        raise InputError(f"no {what} of {info.name} varies over its heads (identical heads?); "
                         "nothing to correlate")
    n_perm = N_PERM_QUICK if quick else N_PERM
    rows = association_table(weights, beh, layer, {"scale": np.log(scale)}, n_perm=n_perm,
                             seed=seed)
    n = layer.size
    data = [io.write_csv(rows, out / "correlations.csv")]
    per_head = [dict(layer=int(li), head=int(h),
                     **{w: float(v[i]) for w, v in weights.items() if w != "layer"},
                     **{b: float(v[i]) for b, v in beh.items()})
                for i, (li, h) in enumerate(np.ndindex(ds.sizes["layer"], ds.sizes["head"]))]
    data.append(io.write_csv(per_head, out / "heads.csv"))
    label = ds.attrs.get("probe_model", ds.attrs.get("model", ""))
    head = (f"{'weight':24s} {'behaviour':14s} {'rho':>7s} {'p_rho':>8s} {'partial':>8s} "
            f"{'p_part':>8s} {'q_part':>7s} {'p_within':>8s}")

    def line(r):
        part = "" if np.isnan(r["partial_rho"]) else f"{r['partial_rho']:+8.3f}"
        return (f"{r['weight']:24s} {r['behaviour']:14s} {r['rho']:+7.3f} {r['p_rho']:8.4f} "
                f"{part:>8s} {r['p_partial']:8.4f} {r['q_partial']:7.3f} "
                f"{r['p_within_layer']:8.4f}")

    base = [r for r in rows if r["weight"] in BASELINES]
    rest = sorted((r for r in rows if r["weight"] not in BASELINES),
                  key=lambda r: -abs(r["partial_rho"]))
    lines = [f"head_function: {label}, {n} heads ({ds.sizes['layer']} layers), "
             f"{ds.attrs.get('probe_n_tokens')} tokens of {ds.attrs.get('probe_text_name')}, "
             f"{ds.attrs.get('probe_attention')} attention",
             f"Spearman rho over heads with its permutation p; partial rho given scale "
             f"(sigma_Q sigma_K) and layer, with its residual-permutation p; p_within: rho "
             f"against within-layer permutations; {n_perm} permutations each; q: BH over "
             f"{len(rows)} pairs per column", "", "baselines:", head]
    lines += [line(r) for r in base]
    kind_rows = [r for r in rest if r["weight"].startswith("kind ")]
    if kind_rows:  # each kind against each behaviour: rho of the 0/1 kind with its p
        lines += ["", "kinds (1 where the head is of the kind, docs/kinds.md):", head]
        lines += [line(r) for r in sorted(kind_rows, key=lambda r: (r["weight"],
                                                                     r["behaviour"]))]
    lines += ["", "by |partial rho|:", head] + [line(r) for r in rest[:25]]
    data.append(io.write_text("\n".join(lines) + "\n", out / "summary.txt"))
    fig = _figure(rows, list(weights), list(beh), f"{label}: weight variable × behaviour "
                  f"over {n} heads")
    figs = [io.save_figure(fig, out / "rho.png")]
    summary = {"model": label, "heads": n, "pairs": len(rows),
               "pairs_q_partial<=0.05": sum(r["q_partial"] <= 0.05 for r in rows)}
    for r in rest[:3]:
        summary[f"{r['weight']} vs {r['behaviour']}"] = \
            f"rho {r['rho']:+.3f}, partial {r['partial_rho']:+.3f} (p {r['p_partial']:.3g})"
    return {"figures": [str(f) for f in figs], "data": [str(d) for d in data],
            "summary": summary}
