"""Hugging Face hub access for :mod:`rmtbase.models`: list a repository, fetch files lazily.

Small files are downloaded into the hub cache when first needed; uncached safetensors shards
are read by byte ranges (:class:`rmtbase.files.ranges.RemoteFile`), falling back to a download.
Offline the hub cache is the only source; an unreachable host (:func:`unreachable`) is not asked."""

from __future__ import annotations

import functools
from functools import partial
from pathlib import Path

from ..errors import ModelError
from ._errors import one_line
from .weights import PICKLE, PICKLE_INDEX, SAFETENSORS, SAFETENSORS_INDEX

_PROBE = (SAFETENSORS_INDEX, SAFETENSORS, PICKLE_INDEX, PICKLE)


def _where(repo_id: str, revision: str | None) -> str:
    return repo_id if revision is None else f"{repo_id}@{revision}"


#: Seconds the first contact with the hub may take before it counts as unreachable.
HUB_TIMEOUT = 3.0


@functools.lru_cache(maxsize=8)
def unreachable(endpoint: str) -> str | None:
    """Why the hub at ``endpoint`` cannot be reached within :data:`HUB_TIMEOUT` s, or None (also
    behind a proxy); one TCP connection, remembered for the process."""
    import os
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                                       "HTTP_PROXY", "http_proxy")):
        return None
    url = urlsplit(endpoint)
    if not url.hostname:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_TIMEOUT).close()
    except OSError as exc:
        return f"{url.hostname}: {exc.strerror or type(exc).__name__}"
    return None


def _hub_down() -> str | None:
    """Why the configured hub (``HF_ENDPOINT``) cannot be reached, None if it can or offline
    mode is on (the hub client then uses its cache only)."""
    from huggingface_hub import constants

    return None if _offline() else unreachable(constants.ENDPOINT)


def _download(repo_id: str, filename: str, revision: str | None) -> Path:
    from huggingface_hub import hf_hub_download

    why = _hub_down()
    if why is not None:  # the local cache only, without the hub client's retries
        local = _cached(repo_id, filename, revision)
        if local is not None:
            return local
        raise ModelError(f"cannot get {filename} of {_where(repo_id, revision)}: the Hugging "
                         f"Face hub cannot be reached ({why}) and it is not in the local "
                         "Hugging Face cache (nor a local folder)")
    return Path(hf_hub_download(repo_id, filename, revision=revision))


def _list_files(repo_id: str, revision: str | None) -> list[str]:
    from huggingface_hub import list_repo_files

    why = _hub_down()
    if why is not None:  # the caller falls back to the local cache
        raise OSError(f"the Hugging Face hub cannot be reached ({why})")
    return list(list_repo_files(repo_id, revision=revision))


def fetch(repo_id: str, revision: str | None, filename: str) -> Path:
    """Local path of ``filename`` in the repository (downloaded if not cached)."""
    try:
        return _download(repo_id, filename, revision)
    except ModelError:
        raise
    except Exception as exc:  # huggingface_hub's many error types, network errors
        if _offline() and type(exc).__name__ in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
            # the hub's text says "check your connection", which is not the reason here
            raise ModelError(f"cannot get {filename} of {_where(repo_id, revision)}: offline "
                             f"mode is on ({_offline()}=1) and it is not in the local Hugging "
                             "Face cache (nor a local folder)") from exc
        raise ModelError(f"cannot get {filename} of {_where(repo_id, revision)} from the "
                         f"Hugging Face hub (not a local folder either): "
                         f"{type(exc).__name__}: {one_line(exc)}") from exc


def _offline() -> str | None:
    """The environment variable that puts the hub client offline, if one does."""
    import os

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return name
    return None


def file_url(repo_id: str, filename: str, revision: str | None) -> str:
    """The URL of ``filename`` in the repository, as :func:`huggingface_hub.hf_hub_url` builds
    it (``HF_ENDPOINT``, revision quoted; ``main`` when None)."""
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, revision=revision)


def request_headers() -> dict[str, str]:
    """The headers huggingface_hub sends (token, user agent):
    :func:`huggingface_hub.utils.build_hf_headers`."""
    from huggingface_hub.utils import build_hf_headers

    return dict(build_hf_headers())


def _cached(repo_id: str, filename: str, revision: str | None) -> Path | None:
    """The file's path in the local hub cache, if it is there (no network)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        got = try_to_load_from_cache(repo_id, filename, revision=revision)
    except Exception:
        return None
    return Path(got) if isinstance(got, str) else None


def fetch_weights(repo_id: str, revision: str | None, filename: str):
    """A weight file: a safetensors shard not in the hub cache as a
    :class:`~rmtbase.files.ranges.RemoteFile`, anything else (or offline) as a local path."""
    if not filename.endswith(".safetensors") or _offline():
        return fetch(repo_id, revision, filename)
    local = _cached(repo_id, filename, revision)
    if local is not None:
        return local
    from ..files.ranges import RemoteFile

    try:
        url, headers = file_url(repo_id, filename, revision), request_headers()
    except Exception as exc:
        raise ModelError(f"cannot address {filename} of {_where(repo_id, revision)} on the "
                         f"hub: {one_line(exc)}") from exc
    return RemoteFile(url, headers=headers, whole=partial(fetch, repo_id, revision, filename),
                      label=f"{filename} of {_where(repo_id, revision)}")


def fetch_config(repo_id: str, revision: str | None) -> Path:
    """Local path of the repository's ``config.json``."""
    return fetch(repo_id, revision, "config.json")


def weight_files(repo_id: str, revision: str | None):
    """``(files, fetch)`` for :class:`~rmtbase.models.weights.FileWeights`."""
    getter = partial(fetch_weights, repo_id, revision)
    try:
        files = _list_files(repo_id, revision)
    except Exception:
        files = []
        for name in _PROBE:  # offline: whatever the cache holds
            try:
                fetch(repo_id, revision, name)
            except ModelError:
                continue
            files.append(name)
            break
    return files, getter
