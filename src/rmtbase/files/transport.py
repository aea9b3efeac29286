"""The requests of a remote file (:class:`rmtbase.files.ranges.RemoteFile`).

HTTP(S) through :mod:`urllib`: a range request's answer must be ``206`` with the matching
``Content-Range`` (RFC 9110 §14; :func:`check_range`, else :class:`NoRanges`); headers given
(e.g. the Hugging Face token) are dropped on a redirect to another host. Other schemes
(``s3://``, ``gs://``) through :mod:`fsspec` (:func:`url_fs`). A failed request raises one of
:data:`FAILURES`; :mod:`.ranges` then reads the file whole."""

from __future__ import annotations

import http.client
import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit

#: Seconds a request may wait for the server.
TIMEOUT = 60.0
#: What a failed request raises (a cut connection can be an ``http.client.IncompleteRead``).
FAILURES = (OSError, http.client.HTTPException)
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.IGNORECASE)


class NoRanges(OSError):
    """The server does not serve byte ranges (or answered a range request wrongly)."""


class _DropAuthOnRedirect(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, but drops ``Authorization`` on the way to another
    host, and remembers each redirect's headers (the hub's ``X-Linked-Etag``)."""

    def __init__(self):
        super().__init__()
        self.hops = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.hops.append(headers)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urlsplit(newurl).netloc != urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


def open_url(url: str, headers: dict, rng: tuple[int, int] | None):
    """The response to a GET of ``url`` (``rng``: ask for bytes [lo, hi))."""
    h = {**headers, "Accept-Encoding": "identity"}
    if rng is not None:
        h["Range"] = f"bytes={rng[0]}-{rng[1] - 1}"
    redirects = _DropAuthOnRedirect()
    opener = urllib.request.build_opener(redirects)
    try:
        resp = opener.open(urllib.request.Request(url, headers=h), timeout=TIMEOUT)
        resp.hops = redirects.hops
        return resp
    except urllib.error.HTTPError as exc:
        exc.close()  # its body is not read; the status says what went wrong
        raise


def open_whole(url: str, headers: dict | None = None):
    """A readable binary stream of the whole file at ``url`` (HTTP(S) or fsspec)."""
    if is_http(url):
        return open_url(url, dict(headers or {}), None)
    fs, path = url_fs(url)
    return fs.open(path, "rb")


def is_http(url: str) -> bool:
    return urlsplit(url).scheme.lower() in ("http", "https")


def content_validator(resp) -> str | None:
    """What identifies a response's content: ``ETag``, else a redirect's ``X-Linked-Etag`` /
    ``ETag``, else ``Last-Modified``; None if none."""
    if resp.headers.get("ETag"):
        return f"etag:{resp.headers['ETag']}"
    for hop in getattr(resp, "hops", ()):
        for name in ("X-Linked-Etag", "ETag"):
            if hop.get(name):
                return f"hop-{name.lower()}:{hop[name]}"
    modified = resp.headers.get("Last-Modified")
    return f"modified:{modified}" if modified else None


def check_range(resp, lo: int, hi: int) -> int:
    """The total size a 206 response names; NoRanges unless it is bytes [lo, hi)."""
    m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
    if not m or int(m[1]) != lo or m[3] == "*" or int(m[2]) != min(hi, int(m[3])) - 1:
        resp.close()
        raise NoRanges(f"bad Content-Range {resp.headers.get('Content-Range')!r} for "
                       f"bytes {lo}-{hi - 1}")
    return int(m[3])


def url_fs(url: str):
    """``(filesystem, path)`` of an fsspec URL; OSError when fsspec or the scheme's filesystem
    is not installed."""
    try:
        import fsspec
    except ImportError as exc:
        raise OSError(f"reading {urlsplit(url).scheme}:// URLs needs fsspec") from exc
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise OSError(str(exc)) from exc
