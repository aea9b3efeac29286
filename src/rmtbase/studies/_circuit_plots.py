"""Figures of study ``circuits`` (each draws into a given ``ax``)."""

from __future__ import annotations

import numpy as np


def loss_and_composition(ds, ax) -> None:
    """Repeated- and other-token loss over steps (left, nats, ln V dashed); the circuit pairs',
    other pairs' and largest other pair's K-composition (right)."""
    steps = np.asarray(ds["step"].values)
    ax.plot(steps, ds["repeat_loss"].values, color="C0", label="repeated-token loss")
    ax.plot(steps, ds["other_loss"].values, color="C0", alpha=0.4, lw=0.8,
            label="other-token loss")
    if "ln_vocab" in ds.attrs:
        ax.axhline(float(ds.attrs["ln_vocab"]), color="0.5", ls="--", lw=0.8, label="ln V")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (nats)")
    ax2 = ax.twinx()
    cs = np.asarray(ds["checkpoint_step"].values)
    kc = np.asarray(ds["k_composition"].values)
    circ = np.asarray(ds["circuit_pair"].values, bool)
    if circ.any():
        ax2.plot(cs, kc[:, circ].mean(axis=1), "o-", color="C3",
                 label="K-comp., circuit pairs (mean)")
    if (~circ).any():
        ax2.plot(cs, kc[:, ~circ].mean(axis=1), "o:", color="0.3", ms=3,
                 label="K-comp., other pairs (mean)")
        ax2.plot(cs, kc[:, ~circ].max(axis=1), "s--", color="0.3", ms=3,
                 label="K-comp., largest other pair")
    ax2.set_ylabel("K-composition")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="center right")
    ax.set_title(f"seed {ds.attrs.get('seed', '?')}: loss and K-composition (layer 0 → 1)",
                 fontsize=9)


def ranking(ds, ax) -> None:
    """Every (layer-0 head → layer-1 head) pair's K-composition at the last checkpoint, in
    decreasing order; the probe's circuit pairs in red."""
    k = np.asarray(ds["k_composition"].values)[-1].ravel()
    circ = np.asarray(ds["circuit_pair"].values, bool).ravel()
    order = np.argsort(-k, kind="stable")
    x = np.arange(1, k.size + 1)
    ax.bar(x, k[order], color=np.where(circ[order], "C3", "0.6"))
    ax.set_xlabel("pair rank (1 = highest K-composition)")
    ax.set_ylabel("K-composition")
    ax.set_title(f"seed {ds.attrs.get('seed', '?')}: {int(circ.sum())} circuit pair(s) (red), "
                 f"AUC {float(ds.attrs.get('auc', np.nan)):.2f}", fontsize=9)


def profile(ds, ax, axis: str = "symmetry") -> None:
    """One factor axis of every head over the checkpoints: the probe's induction heads red,
    previous-token heads blue, the others grey; the loss-drop interval shaded."""
    cs = np.asarray(ds["checkpoint_step"].values)
    val = np.asarray(ds["profile"].sel(axis=axis).values)  # (checkpoint, layer, head)
    role = np.asarray(ds["circuit_head"].values, bool)
    kd = int(ds.attrs.get("loss_drop_checkpoint", 0))
    if 1 <= kd < cs.size:
        ax.axvspan(cs[kd - 1], cs[kd], color="0.9", label="loss drop")
    for layer in range(val.shape[1]):
        for h in range(val.shape[2]):
            circ = role[layer, h]
            color = ("C3" if layer == 1 else "C0") if circ else "0.6"
            label = (f"L{layer}H{h} ({'induction' if layer == 1 else 'prev-token'})"
                     if circ else None)
            ax.plot(cs, val[:, layer, h], marker="o" if circ else None, color=color, ms=3,
                    lw=1.4 if circ else 0.8, ls="-" if layer == 1 else "--", label=label)
    ax.set_xlabel("training step")
    ax.set_ylabel(axis)
    ax.legend(fontsize=6, loc="best")
    ax.set_title(f"seed {ds.attrs.get('seed', '?')}: W_QK {axis} per head (layer 0 dashed)",
                 fontsize=9)


__all__ = ["loss_and_composition", "profile", "ranking"]
