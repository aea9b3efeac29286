"""Figures that report.html embeds: each saved under ``figures/`` of an
:class:`~rmtbase.files.output.OutputFolder`, its PNG bytes kept for the page."""

from __future__ import annotations

from pathlib import Path


def figure_saver(out, images: dict, keep=None):
    """``save(fig, name)``: writes ``fig`` to ``figures/<name>`` in ``out`` and keeps its PNG
    bytes in ``images[name]`` (every figure, or only the names in ``keep``); returns ``name``."""
    def save(fig, name):
        rel = Path("figures") / name
        out.save_figure(fig, rel)
        if keep is None or name in keep:
            images[name] = (out.tmp / rel).read_bytes()
        return name
    return save
