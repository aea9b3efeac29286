"""The default output folder of ``rmtbase score`` (``rmtbase-score/<model stem>…``) and a
model's short name for a folder (:func:`model_stem`)."""

from __future__ import annotations

import re
from pathlib import Path

DEFAULT_ROOT = "rmtbase-score"


_UNSAFE = re.compile(r"[^A-Za-z0-9._+@-]+")


def model_stem(model) -> str:
    """A model's short name for a folder: the file stem of a ``.gguf``, the last part of a
    folder path or hub id, ``all-MiniLM-L6-v2`` for the embedded default."""
    if model is None:
        return "all-MiniLM-L6-v2"
    text = str(model).rstrip("/\\")
    name = Path(text).name or text
    if name.lower().endswith(".gguf"):
        name = name[:-5]
    name = _UNSAFE.sub("_", name).strip("._") or "model"
    return name[:80]


def default_out(models, revisions=None, *, base=None, ov: bool = False,
                root: str = DEFAULT_ROOT) -> str:
    """``<root>/<name>`` (``rmtbase-score/…`` by default): the model stem (``-<revision>``; ``<first>..<last>`` for several
    entries; ``<tuned>-vs-<base>`` for a delta), ``-ov`` with ``--ov``."""
    names = [model_stem(m) for m in (models or [None])]
    revs = list(revisions or [])
    if len(names) == 1 and len(revs) == 1:
        name = f"{names[0]}-{_UNSAFE.sub('_', revs[0])}"
    elif len(names) == 1 and len(revs) > 1:
        name = f"{names[0]}-{_UNSAFE.sub('_', revs[0])}..{_UNSAFE.sub('_', revs[-1])}"
    elif len(names) > 1:
        name = "+".join(names) if len(names) <= 3 else f"{names[0]}..{names[-1]}"
    else:
        name = names[0]
    if base is not None:
        name = f"{name}-vs-{model_stem(base)}"
    if ov:
        name += "-ov"
    return str(Path(root) / name[:200])


__all__ = ["DEFAULT_ROOT", "default_out", "model_stem"]
