"""The shard index of a sharded checkpoint (``*.index.json``): its ``weight_map`` (tensor name →
shard), checked, every shard inside the model folder; problems are a ModelError naming the index."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath, PureWindowsPath

from ..errors import ModelError
from ._errors import one_line


def check_shard_name(name, index: Path, folder: Path | None) -> None:
    """ModelError unless the shard name is a relative path without ``..`` that stays inside
    ``folder``, resolved lexically (a hub snapshot's symlinks into ``../../blobs`` are allowed)."""
    text = name if isinstance(name, str) else repr(name)
    bad = (not isinstance(name, str) or not name or "\x00" in name
           or PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute()
           or PureWindowsPath(name).drive
           or ".." in PurePosixPath(name.replace("\\", "/")).parts)
    if not bad and folder is not None:
        root = os.path.normpath(os.path.abspath(folder))
        full = os.path.normpath(os.path.join(root, name))
        bad = os.path.commonpath([root, full]) != root
    if bad:
        raise ModelError(f"shard index {index} names {text!r}, which is outside the model "
                         "folder; refusing to read it")


def read_index(path, folder: Path | None) -> dict[str, str]:
    """``{tensor name: shard file}`` of the shard index at ``path`` (as the reader's ``fetch``
    gave it), each shard checked by :func:`check_shard_name` against ``folder``."""
    try:
        weight_map = json.loads(path.read_text())["weight_map"]
    except RecursionError as exc:
        raise ModelError(f"cannot read shard index {path}: nested too deeply") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = f"no {one_line(exc)}" if isinstance(exc, KeyError) else one_line(exc)
        raise ModelError(f"cannot read shard index {path}: {reason}") from exc
    if not isinstance(weight_map, dict):
        raise ModelError(f"cannot read shard index {path}: 'weight_map' is not a mapping")
    for shard in set(weight_map.values()):
        check_shard_name(shard, path, folder)
    return {str(k): str(v) for k, v in weight_map.items()}
