"""Study ``circuits``: do the weights alone find a circuit that is known to be there?

A small attention-only GPT-2 is trained on repeated random segments (:mod:`._induction_train`)
through the induction phase change (Olsson et al. 2022), keeping HF checkpoint folders. The
probe labels previous-token heads (layer 0, ≥ :data:`PREV_MIN`) and induction heads (layer 1,
≥ :data:`INDUCTION_MIN`); their pairs are the circuit. Measured: each pair's K-composition
(Elhage et al. 2021) rank, ``outranked_worst``, AUC and ``circuit_p_worst``; the intervals of
the largest repeat-loss fall and of the largest circuit-vs-other K rise (``k_contrast``,
``drop_lag``); factor-axis lags (:func:`profile_lags`, :func:`profile_drop_ratio`); copying
scores (:mod:`._copying`); the single-head verdict. Writes
``circuits.nc``, ``heads.csv``, ``summary.txt``, figures and ``checkpoints/``; ``docs/circuits.md``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from . import _output as io
from ._circuit_checkpoint import (
    _add_profile,
    _composition_last,
    _tokenizer,
    factor_axes,
    k_composition,
    probe_text,
)
from ._circuit_measures import (
    auc,
    largest_step,
    outranked,
    profile_drop_ratio,
    profile_lags,
)
from ._circuit_resume import check_before_training, done, keep_finished, place, train_or_resume

#: Probe thresholds that label a head (module docstring).
PREV_MIN = 0.4
INDUCTION_MIN = 0.4
QUICK_STEPS = 30
#: The nulls' draws (composition, copying) of the quick run (the pipeline only).
QUICK_DRAWS = (200, 100)
#: Null draws of :func:`rmtbase.composition` at the last checkpoint (smallest p 1/4001).
COMPOSITION_DRAWS = 4000
#: Null draws of the copying score (:mod:`._copying`; smallest p 1/1001).
COPYING_DRAWS = 1000


def run_seed(out: Path, seed: int, recipe, *, profile: bool = True,
             draws: tuple[int, int] = (COMPOSITION_DRAWS, COPYING_DRAWS),
             resume: Path | None = None) -> dict:
    """Train one model into ``out/checkpoints`` and measure it; ``draws``: the nulls' draws;
    ``resume``: a folder whose training is reused. Returns the per-seed numbers and arrays."""
    import xarray as xr

    from ..probe import probe_model
    tok = _tokenizer(recipe.vocab)
    folders: dict[int, Path] = {}

    def keep(step, net):
        from .._library_bars import no_library_bars

        f = out / "checkpoints" / f"step_{step:05d}"
        with no_library_bars():  # transformers' "Writing model shards" bar
            net.save_pretrained(f)
            tok.save_pretrained(f)
        folders[step] = f

    res, folders = train_or_resume(out, recipe, seed, keep, resume)
    steps = sorted(folders)
    text = probe_text(recipe, seed)
    probes = [probe_model(folders[s], text=text, window=recipe.seq_len, progress=False)
              for s in steps]
    kc = np.stack([k_composition(folders[s])[0, :, 1, :] for s in steps])  # (ckpt, from, to)
    last = probes[-1]
    prev = np.asarray(last["prev_token"].values[0])
    ind = np.asarray(last["induction"].values[1])
    circuit = (prev >= PREV_MIN)[:, None] & (ind >= INDUCTION_MIN)[None, :]
    final = kc[-1]
    order = (-final).ravel().argsort(kind="stable").argsort() + 1  # rank 1 = highest
    ranks = order.reshape(final.shape)
    curve = res["curve"]
    at = {int(s): i for i, s in enumerate(curve["step"])}
    rep_ckpt = np.array([curve["repeat_loss"][at[s]] for s in steps])
    circ_k = kc[:, circuit].mean(axis=1) if circuit.any() else np.full(len(steps), np.nan)
    contrast = circ_k - (kc[:, ~circuit].mean(axis=1) if (~circuit).any() else 0.0)
    comp = _composition_last(folders[steps[-1]], seed, draws[0])
    kp = comp["p"]
    k_drop = largest_step(np.log(rep_ckpt), fall=True)
    k_rise = (largest_step(circ_k[1:], fall=False) + 1 if circuit.any() and len(steps) > 2
              else -1)
    k_rise_all = largest_step(circ_k, fall=False) if circuit.any() else -1
    k_rise_contrast = largest_step(contrast, fall=False) if circuit.any() else -1
    from ..scoring.profile.factors import FACTOR_AXES
    from ._copying import copying

    cp = copying(folders[steps[-1]], draws=draws[1], seed=seed)

    fa = np.stack([factor_axes(folders[s]) for s in steps])  # (ckpt, axis, layer, head)
    lags = profile_lags(fa, k_drop)
    ratio = profile_drop_ratio(fa, k_drop)
    prev_h, ind_h = np.zeros(lags.shape[1:], bool), np.zeros(lags.shape[1:], bool)
    prev_h[0], ind_h[1] = prev >= PREV_MIN, ind >= INDUCTION_MIN
    heads = prev_h | ind_h
    summary = {
        "seed": seed, "cpu_s": round(res["cpu_s"], 1), "steps": recipe.steps,
        "repeat_loss_start": float(rep_ckpt[0]), "repeat_loss_end": float(rep_ckpt[-1]),
        "ln_vocab": float(np.log(recipe.vocab)),
        "n_prev_heads": int((prev >= PREV_MIN).sum()),
        "n_induction_heads": int((ind >= INDUCTION_MIN).sum()),
        "n_circuit_pairs": int(circuit.sum()), "n_pairs": int(circuit.size),
        "prev_token_max": float(prev.max()), "induction_max": float(ind.max()),
        "circuit_rank_worst": int(ranks[circuit].max()) if circuit.any() else -1,
        "outranked_worst": outranked(final, circuit),
        "auc": auc(final, circuit),
        "circuit_p_worst": float(kp[circuit].max()) if circuit.any() else float("nan"),
        "composition_draws": draws[0], "copying_draws": draws[1],
        "k_vs_rmtbase_composition": float(np.max(np.abs(comp["k"] - final) / comp["k"])),
        "loss_drop_checkpoint": k_drop, "k_rise_checkpoint": k_rise_contrast,
        "drop_lag": (abs(k_rise_contrast - k_drop) if circuit.any() else -1),
        "drop_lag_raw": (abs(k_rise - k_drop) if k_rise > 0 else -1),
        "drop_lag_with_first": (abs(k_rise_all - k_drop) if circuit.any() else -1),
        "copying_induction_min": (float(cp["score"][ind_h].min()) if ind_h.any()
                                  else float("nan")),
        "copying_p_induction_worst": (float(cp["p"][ind_h].max()) if ind_h.any()
                                      else float("nan")),
        "copying_prev_max": float(cp["score"][prev_h].max()) if prev_h.any() else float("nan"),
        **{f"profile_{what}_{role}_{a}": (fn(i, sel) if sel.any() else float("nan"))
           for i, a in enumerate(FACTOR_AXES)
           for role, sel in (("induction", ind_h), ("prev", prev_h), ("other", ~heads))
           for what, fn in (("lag", lambda i, m: int(lags[i][m].max())),
                            ("drop_ratio", lambda i, m: float(np.median(ratio[i][m]))))},
    }
    beh = {b: (("checkpoint", "layer", "head"), np.stack([p[b].values for p in probes]))
           for b in ("prev_token", "induction", "duplicate_token")}
    ds = xr.Dataset(
        {"loss": ("step", curve["loss"]), "repeat_loss": ("step", curve["repeat_loss"]),
         "other_loss": ("step", curve["other_loss"]), **beh,
         "k_composition": (("checkpoint", "head_from", "head_to"), kc),
         "k_contrast": ("checkpoint", contrast),
         "circuit_pair": (("head_from", "head_to"), circuit.astype(np.int8)),
         "k_rank": (("head_from", "head_to"), ranks.astype(np.int32)),
         "k_composition_p": (("head_from", "head_to"), kp),
         "profile": (("checkpoint", "axis", "layer", "head"), fa),
         "profile_lag": (("axis", "layer", "head"), lags.astype(np.int32)),
         "profile_drop_ratio": (("axis", "layer", "head"), ratio),
         "circuit_head": (("layer", "head"), heads.astype(np.int8)),
         "copying": (("layer", "head"), cp["score"]),
         "copying_p": (("layer", "head"), cp["p"])},
        coords={"step": curve["step"], "checkpoint_step": ("checkpoint", np.array(steps)),
                "checkpoint": np.arange(len(steps)), "layer": np.arange(recipe.n_layer),
                "head": np.arange(prev.size), "head_from": np.arange(prev.size),
                "head_to": np.arange(ind.size), "axis": list(FACTOR_AXES)})
    for v, (units, name) in _ATTRS.items():
        ds[v].attrs.update(units=units, long_name=name)
    if profile:
        ds = _add_profile(ds, folders[steps[-1]], seed)
    ds.attrs.update({k: v for k, v in summary.items()})
    ds.attrs["recipe"] = repr(dataclasses.asdict(recipe))
    return {"summary": summary, "dataset": ds, "folders": folders}


_ATTRS = {
    "loss": ("1", "cross-entropy over all tokens of the evaluation batch (nats)"),
    "repeat_loss": ("1", "cross-entropy on the repeated tokens 2..L (nats; chance ln V)"),
    "other_loss": ("1", "cross-entropy on the other tokens (nats)"),
    "prev_token": ("1", "probe: mean attention on the previous token"),
    "induction": ("1", "probe: mean attention on the token after an earlier occurrence"),
    "duplicate_token": ("1", "probe: mean attention on earlier occurrences of the token"),
    "k_composition": ("1", "K-composition of (layer-0 head_from -> layer-1 head_to)"),
    "k_contrast": ("1", "circuit pairs' mean K-composition minus the other pairs' mean"),
    "circuit_pair": ("1", "1 where the probe labels head_from previous-token and head_to "
                          "induction at the last checkpoint"),
    "k_rank": ("1", "rank of the pair's K-composition at the last checkpoint (1 = highest)"),
    "k_composition_p": ("1", "rmtbase.composition's one-sided add-one p of the pair's "
                             "K-composition at the last checkpoint (Gaussian-factor null)"),
    "profile": ("1", "factor axes of each head's W_Q, W_K (rmtbase score's profile values, "
                     "no null)"),
    "profile_lag": ("1", "checkpoints between a head's largest change of the axis (after the "
                         "first interval) and the repeated-token loss drop"),
    "profile_drop_ratio": ("1", "a head's change of the axis over the loss-drop interval / its "
                                "median change per interval (first interval left out)"),
    "circuit_head": ("1", "1 for the probe's previous-token (layer 0) and induction "
                          "(layer 1) heads at the last checkpoint"),
    "copying": ("1", "copying score sum(Re lambda)/sum|lambda| of W_U W_OV W_E^T at the last "
                     "checkpoint (studies._copying)"),
    "copying_p": ("1", "one-sided add-one p of the copying score, Gaussian W_O, W_V null with "
                       "the model's embeddings"),
    "step": ("1", "training step"), "checkpoint_step": ("1", "training step of the checkpoint"),
    "checkpoint": ("1", "checkpoint index"), "layer": ("1", "layer index"),
    "head": ("1", "head index"), "head_from": ("1", "layer-0 head"),
    "head_to": ("1", "layer-1 head"),
}


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study for ``seed``; a failure after training keeps the checkpoints to resume from."""
    from ._induction_train import Recipe

    out = io.prepare(out_dir)
    recipe = Recipe() if not quick else Recipe(steps=QUICK_STEPS, n_checkpoints=4)
    check_before_training(recipe)
    resume = place(out, seed, quick)
    try:  # a late failure keeps the training (and says how to resume from it)
        res = _write(out, seed, quick, recipe, resume)
    except (Exception, KeyboardInterrupt):
        keep_finished(out, resume)
        raise
    done(resume)
    return res


def _write(out: Path, seed: int, quick: bool, recipe, resume: Path) -> dict:
    from . import _circuit_plots as plots

    res = run_seed(out, seed, recipe, profile=not quick, resume=resume,
                   draws=QUICK_DRAWS if quick else (COMPOSITION_DRAWS, COPYING_DRAWS))
    ds, s = res["dataset"], res["summary"]
    data = [io.write_netcdf(ds, out / "circuits.nc")]
    figs = []
    fig, axes = io.figure(1, 1, size=(6.0, 3.8))
    plots.loss_and_composition(ds, axes[0, 0])
    figs.append(io.save_figure(fig, out / "circuits_loss.png"))
    fig, axes = io.figure(1, 1, size=(5.0, 3.6))
    plots.ranking(ds, axes[0, 0])
    figs.append(io.save_figure(fig, out / "circuits_rank.png"))
    fig, axes = io.figure(1, 2, size=(10.0, 3.6))
    plots.profile(ds, axes[0, 0], "symmetry")
    plots.profile(ds, axes[0, 1], "alignment")
    figs.append(io.save_figure(fig, out / "circuits_profile.png"))
    lines = [f"{k}: {v}" for k, v in s.items()]
    data.append(io.write_text("\n".join(lines) + "\n", out / "summary.txt"))
    return {"figures": [str(p) for p in figs], "data": [str(p) for p in data], "summary": s}


__all__ = ["INDUCTION_MIN", "PREV_MIN", "auc", "factor_axes", "k_composition", "largest_step",
           "outranked", "probe_text", "profile_drop_ratio", "profile_lags", "run",
           "run_seed"]
