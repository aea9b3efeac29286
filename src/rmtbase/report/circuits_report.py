"""The output folder of ``rmtbase circuits``, all or nothing.

``composition.nc``, ``circuits.nc``, ``summary.txt`` (what was found, :mod:`.circuit_lines`,
each induction circuit's output loss among it; every receiver's lines and the legend,
:mod:`.circuit_legend`; the heads' labels; no line over
:data:`~rmtbase.report.line_width.MAX_LINE` characters), ``figures/circuits.png``
(:func:`.composition_figure.plot_circuit`) and ``report.html`` (:mod:`.circuits_page`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: The output folder's kind (its manifest's ``kind``).
KIND = "rmtbase circuits"


def label_lines(cds) -> list[str]:
    """One line per labelled head: ``L17H3 induction 0.88 at repeat 50``."""
    lab = cds["label"].transpose("layer", "head").values
    score = cds["label_score"].transpose("layer", "head").values
    length = (cds["label_length"].transpose("layer", "head").values
              if "label_length" in cds else np.zeros(lab.shape, int))
    out = []
    for li in range(lab.shape[0]):
        for hi in range(lab.shape[1]):
            if str(lab[li, hi]) != "none":
                at = f" at repeat {int(length[li, hi])}" if int(length[li, hi]) else ""
                out.append(f"L{li}H{hi} {lab[li, hi]} {float(score[li, hi]):.2f}{at}")
    return out


def summary_text(ctx: dict, cds) -> str:
    """``summary.txt``: what was found (every line), every receiver's lines, the legend, then
    the heads' labels; a line too long wrapped (:func:`rmtbase.report.line_width.fit_text`)."""
    from .circuit_legend import detail_lines
    from .line_width import fit_text

    lines = ["What was found (circuits.nc: every earlier source screened, path patching "
             "confirms):"]
    lines += [f"  {t}" for t in ctx["found"]]
    lines += detail_lines(ctx["circuits"], dict(cds.attrs), bool(ctx.get("losses")))
    labels = label_lines(cds)
    lines += ["", f"Heads with a behaviour label ({len(labels)}; sequences: "
                  f"{cds.attrs.get('sequences', '')}):"]
    lines += [f"  {t}" for t in labels] or ["  none"]
    return fit_text("\n".join(lines) + "\n")


def write_circuits(ctx: dict, cds, out_dir, *, figures: bool = True) -> dict[str, Path]:
    """Write the folder of the module docstring; ``ctx``: the presentation's context
    (:func:`rmtbase.report.circuit_context.context`). Returns {file name: final path}."""
    from ..files.output import OutputFolder
    from .circuits_page import circuits_page_html

    summary = summary_text(ctx, cds)
    images: dict[str, bytes] = {}
    with OutputFolder(out_dir, kind=KIND) as out:
        out.write_netcdf("composition.nc", ctx["composition"])
        out.write_netcdf("circuits.nc", cds)
        out.write_text("summary.txt", summary)
        if figures:
            import matplotlib.pyplot as plt

            from .composition_figure import plot_circuit

            ax = plot_circuit(ctx["composition"], circuits=ctx["circuits"],
                              labels=ctx["labels"])
            out.save_figure(ax.figure, "figures/circuits.png")
            plt.close(ax.figure)
            images["circuits.png"] = (out.tmp / "figures" / "circuits.png").read_bytes()
        out.write_text("report.html", circuits_page_html(ctx, cds, summary, images))
    return out.written


__all__ = ["KIND", "label_lines", "summary_text", "write_circuits"]
