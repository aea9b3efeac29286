"""The MODEL and ``--revision`` arguments of ``rmtbase score``: globs expanded in natural
order, revisions split at commas, a local-only MODEL checked to exist (:func:`check_local`)."""

from __future__ import annotations

import glob
import os
import re

from ..errors import InputError

_GLOB = re.compile(r"[*?[]")


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def expand_models(items) -> list[str]:
    """Model arguments with globs (``ckpts/step*``) expanded in natural order (step2 before
    step10); a glob matching nothing is an error; others (URLs too) pass unchanged."""
    out = []
    for item in items:
        if _GLOB.search(item) and "://" not in item and not os.path.exists(item):
            hits = sorted(glob.glob(os.path.expanduser(item)), key=_natural)
            if not hits:
                raise InputError(f"no checkpoint folder matches {item!r}")
            out.extend(hits)
        else:
            out.append(item)
    return out


def revisions(text):
    if text is None:
        return None
    revs = [r.strip() for r in text.split(",")]
    if not all(revs):
        raise InputError(f"--revision has an empty entry: {text!r}")
    if len(set(revs)) < len(revs):
        raise InputError(f"--revision names a revision twice: {text!r}")
    return revs


def check_local(model) -> None:
    """One-line :class:`~rmtbase.errors.InputError` when ``model`` can only be a local path (a
    ``.gguf`` name, or starting with ``.``, ``/`` or ``~``) and nothing is there."""
    import os

    from ..errors import InputError

    if model is None:
        return
    text = str(model)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):  # a URL (rmtbase.models.remote)
        return
    local = text.lower().endswith(".gguf") or text.startswith((".", "/", "~")) \
        or os.sep + os.sep in text
    if local and not os.path.exists(os.path.expanduser(text)):
        what = "GGUF file" if text.lower().endswith(".gguf") else "model folder"
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise InputError(f"no such {what}: {shown}")


__all__ = ["check_local", "expand_models", "revisions"]
