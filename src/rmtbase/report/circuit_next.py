"""Which circuit searches a scored model can run next, with their commands: the block that ends
``summary.txt`` and the section of ``report.html`` of a score with composition or probe data.

Both searches (``rmtbase circuits``, ``--task``) run the ``architecture`` (``model_type``) in
:data:`rmtbase.circuits.core.families.SUPPORTED`, an encoder neither. The model is named as
the score names it, never by an absolute path."""

from __future__ import annotations

import html as _html

#: The heading of the block, in ``summary.txt`` and ``report.html``.
HEADING = "Circuits to run next"


def wants_next(ds, extras: dict | None) -> bool:
    """Whether the score has composition or probe data (``composition.nc`` among the files, or
    ``behaviour_*`` variables)."""
    if extras and "composition.nc" in extras:
        return True
    return any(str(v).startswith("behaviour_") for v in ds.data_vars)


def next_lines(attrs: dict) -> list[str]:
    """The block's lines for a score's attributes (``model``, ``architecture``)."""
    from ..circuits.core.families import ENCODERS, SUPPORTED

    mt = str(attrs.get("architecture", ""))
    name = str(attrs.get("model", "MODEL"))
    where = f"MODEL: the folder, file or hub id you scored ({name})"
    if mt in ENCODERS:
        return [f"{HEADING}: none. {name} is an encoder ({mt}); rmtbase circuits and "
                f"circuits --task need a causal language model (docs/tasks.md)."]
    if mt not in SUPPORTED:
        return [f"{HEADING}: none. The circuit searches do not run {mt!r} models "
                f"(docs/path-patching.md lists those they run)."]
    lines = [f"{HEADING} ({where}):",
             "  rmtbase circuits MODEL               # circuits of head behaviours, by path "
             "patching"]
    return lines + ["  rmtbase circuits MODEL --task ioi    # the edges behind a shipped task's "
                    "output",
                    "  rmtbase circuits MODEL --task FILE   # your own prompt pairs "
                    "(docs/tasks.md)"]


def next_section(lines: list[str]) -> str:
    """The ``report.html`` section of :func:`next_lines`."""
    body = "\n".join(lines[1:]) if len(lines) > 1 else ""
    lead = lines[0]
    return (f'<section id="circuits-next"><h2>{HEADING}</h2><p>{_html.escape(lead)}</p>'
            + (f"<pre>{_html.escape(body)}</pre>" if body else "") + "</section>\n")


__all__ = ["HEADING", "next_lines", "next_section", "wants_next"]
