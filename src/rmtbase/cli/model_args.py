"""The MODEL and ``--revision`` arguments of ``rmtbase score`` (:mod:`rmtbase.cli.score`):
globs of checkpoint folders expanded in natural order, comma-separated revisions split."""

from __future__ import annotations

import glob
import os
import re

from ..errors import InputError

_GLOB = re.compile(r"[*?[]")


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def expand_models(items) -> list[str]:
    """Model arguments with globs (``ckpts/step*``) expanded, in natural order (step2 before
    step10); a glob that matches nothing is an error. Other arguments (URLs among them: a
    query string's ``?`` is no glob) pass unchanged."""
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


__all__ = ["expand_models", "revisions"]
