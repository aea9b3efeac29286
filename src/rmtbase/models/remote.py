"""A model folder at a URL: ``config.json`` and safetensors shards read over HTTP(S) or fsspec.

Reads ``<url>/config.json``, then ``<url>/model.safetensors.index.json`` if present (else
``<url>/model.safetensors``), and each shard by byte ranges
(:class:`rmtbase.files.ranges.RemoteFile`). ``hf://org/name[@revision]`` names a hub
repository. Pickled checkpoints are not read from URLs."""

from __future__ import annotations

import hashlib
import http.client
import re
import shutil
from pathlib import Path
from urllib.parse import quote, urlsplit

from ..errors import ModelError
from ..files.atomic import write_atomic
from ..files.ranges import RemoteFile
from ..files.transport import open_whole
from ..files.user_cache import cache_dir
from ._errors import one_line
from .weights import SAFETENSORS, SAFETENSORS_INDEX

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``scheme://…``) rather than a hub id or a path."""
    return bool(_SCHEME.match(text))


def hub_repo(text: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of an ``hf://org/name[@revision]`` URL; None for other text.
    ModelError for an ``hf://`` URL that names no repository."""
    if not text.lower().startswith("hf://"):
        return None
    rest = text[5:].strip("/")
    repo, _, revision = rest.partition("@")
    if repo.count("/") > 1 or not repo or not all(repo.split("/")):
        raise ModelError(f"{text!r} is not an hf://org/name[@revision] model address")
    return repo, revision or None


def _join(url: str, name: str) -> str:
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/" + quote(name)
    return parts._replace(path=path).geturl()


def fetch_small(url: str, name: str, *, missing_ok: bool = False) -> Path | None:
    """Local copy of the small file ``name`` of the model at ``url`` (config, index), fetched
    whole into the user cache; None if the server has no such file and ``missing_ok``."""
    src = _join(url, name)
    key = hashlib.sha256(src.encode()).hexdigest()[:40]
    target = cache_dir() / "remote" / "files" / f"{key}-{name}"

    def fill(tmp: Path) -> None:
        with open_whole(src) as resp, open(tmp, "wb") as out:
            shutil.copyfileobj(resp, out, 2**20)

    try:
        return write_atomic(target, fill)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        code = getattr(exc, "code", None)
        if missing_ok and (code == 404 or isinstance(exc, FileNotFoundError)):
            return None
        raise ModelError(f"cannot get {name} of {url}: {type(exc).__name__}: "
                         f"{one_line(exc)}") from exc


def url_weight_files(url: str):
    """``(files, fetch)`` for :class:`~rmtbase.models.weights.FileWeights`: the index and
    config come as local copies, shards as :class:`RemoteFile` s read by byte ranges."""
    index = fetch_small(url, SAFETENSORS_INDEX, missing_ok=True)
    files = [SAFETENSORS_INDEX] if index is not None else [SAFETENSORS]

    def fetch(filename: str):
        if filename == SAFETENSORS_INDEX:
            return index
        if filename.endswith(".safetensors"):
            return RemoteFile(_join(url, filename), label=f"{filename} of {url}")
        return fetch_small(url, filename)

    return files, fetch


__all__ = ["fetch_small", "hub_repo", "is_url", "url_weight_files"]
