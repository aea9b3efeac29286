"""A remote file read by byte ranges (HTTP ``Range`` / fsspec), cached in the user cache.

:class:`RemoteFile` stands where a local path would for :mod:`rmtbase.models._safetensors`:
``read_range(lo, hi)`` returns bytes ``[lo, hi)``, ``size`` is the length, ``prefetch(ranges)``
fetches ranges in few requests (touching ranges merged). Requests: :mod:`.transport` (RFC 9110
§14 ``206`` answers checked).

**Fallback.** A server that ignores ``Range``, a malformed answer or an error switches the file
to a whole download (one ``rmtbase: note:`` line): the ``whole`` callable given, else a streamed
download into the user cache, renamed into place when whole. The bytes are the same either way.

**Cache.** Fetched ranges go to ``<user cache>/remote/<key>/<lo>-<hi>`` (atomically), ``key`` a
hash of the URL and the server's content validator (:func:`.transport.content_validator`), so a
second read asks the server only for the first 8 bytes and a changed file gets another folder.
A server with no validator is not cached; a signed URL's query string never reaches the disk."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from ..progress import message
from .atomic import clean_stale, name_max, tmp_name, write_atomic
from .transport import (
    FAILURES,
    NoRanges,
    check_range,
    content_validator,
    is_http,
    open_url,
    open_whole,
    url_fs,
)
from .user_cache import cache_dir

#: Touching ranges are merged into one request up to this many bytes.
MAX_REQUEST = 256 * 2**20


class RemoteFile:
    """The file at ``url`` (http, https or an fsspec URL), read by byte ranges.

    ``headers``: sent with every HTTP request. ``whole``: returns a local path of the whole file
    if ranges fail. ``label``: the file's name in notes. ``bytes_fetched`` / ``requests`` count
    what came over the wire."""

    def __init__(self, url: str, *, headers: dict | None = None, whole=None,
                 label: str | None = None):
        self.url, self.headers, self.label = url, dict(headers or {}), label or url
        self._whole = whole
        self.size: int | None = None
        self.local: Path | None = None  # set once the file was read whole
        self.bytes_fetched = 0
        self.requests = 0
        self._dir: Path | None = None   # disk cache folder (None: memory only)
        self._blocks: list[tuple[int, int]] = []
        self._mem: dict[tuple[int, int], bytes] = {}  # the last prefetch, when not on disk

    def __str__(self) -> str:
        return self.label

    # -- reading -------------------------------------------------------------------------
    def read_range(self, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of the file (fewer only where the file ends first)."""
        if self.local is None and self.size is None:
            self._start()
        if self.local is not None:
            return _pread(self.local, lo, hi)
        hi = min(hi, self.size)
        if hi <= lo:
            return b""
        got = self._cached(lo, hi)
        if got is not None:
            return got
        try:
            data = self._fetch(lo, hi)
        except FAILURES as exc:
            self._fall_back(exc)
            return _pread(self.local, lo, hi)
        self._keep(lo, hi, data)
        return data

    def prefetch(self, ranges) -> None:
        """Fetch the uncached byte ranges ``[(lo, hi), …]``, touching ranges merged into one request
        (up to :data:`MAX_REQUEST` bytes)."""
        if self.local is None and self.size is None:
            self._start()
        if self.local is not None:
            return
        self._mem = {}
        merged: list[list[int]] = []
        for lo, hi in sorted((int(a), min(int(b), self.size)) for a, b in ranges):
            if hi <= lo or self._cover(lo, hi) is not None:
                continue
            if merged and lo <= merged[-1][1] and max(hi, merged[-1][1]) - merged[-1][0] \
                    <= MAX_REQUEST:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        for lo, hi in merged:
            try:
                data = self._fetch(lo, hi)
            except FAILURES as exc:
                self._fall_back(exc)
                return
            self._keep(lo, hi, data, memory=True)

    # -- the first request: size, validator, range support ----------------------------------
    def _start(self) -> None:
        try:
            total, validator, plain, head = self._probe()
        except FAILURES as exc:
            self._fall_back(exc)
            return
        if plain is not None:  # 200: the body is the whole file
            self._fall_back(NoRanges(f"the server answered a range request with "
                                     f"{plain.status}"), plain)
            return
        self.size = total
        if validator is not None:
            self._open_cache(validator)
        if head is not None and self._cover(0, len(head)) is None:
            self._keep(0, len(head), head, memory=True)  # the header length: read next

    def _probe(self):
        """``(size, validator, None, first bytes)`` from a request for the first 8 bytes, or
        ``(None, None, response, None)`` when the server answered with the whole file."""
        self.requests += 1
        if not is_http(self.url):
            fs, path = url_fs(self.url)
            info = fs.info(path)
            total = int(info["size"])
            v = info.get("ETag") or info.get("etag") or info.get("mtime") \
                or info.get("LastModified") or info.get("last_modified")
            return total, None if v is None else f"fsspec:{v}:{total}", None, None
        resp = open_url(self.url, self.headers, (0, 8))
        if resp.status != 206:
            return None, None, resp, None
        with resp:
            total = check_range(resp, 0, 8)
            head = resp.read(9)
            self.bytes_fetched += len(head)
            if len(head) != min(8, total):
                raise NoRanges(f"asked for the first 8 bytes, got {len(head)}")
            return total, content_validator(resp), None, head

    def _fetch(self, lo: int, hi: int) -> bytes:
        self.requests += 1
        if is_http(self.url):
            with open_url(self.url, self.headers, (lo, hi)) as resp:
                if resp.status != 206:
                    raise NoRanges(f"the server answered a range request with {resp.status}")
                check_range(resp, lo, hi)
                data = resp.read(hi - lo + 1)
        else:
            fs, path = url_fs(self.url)
            data = fs.cat_file(path, start=lo, end=hi)
        self.bytes_fetched += len(data)
        if len(data) != hi - lo:
            raise NoRanges(f"asked for {hi - lo} bytes at {lo}, got {len(data)}")
        return bytes(data)

    # -- the whole file ----------------------------------------------------------------
    def _fall_back(self, exc: BaseException, resp=None) -> None:
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]

        def note() -> None:  # through the progress channel: a live bar's line ends first
            message(f"rmtbase: note: cannot read {self.label} by byte ranges ({reason}); "
                    "downloading the whole file")

        try:
            if self._whole is not None:
                if resp is not None:
                    resp.close()
                note()
                self.local = Path(self._whole())
            else:
                self.local = self._download(resp, note)
        except FAILURES as err:
            raise OSError(f"cannot download {self.label}: {type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else ''}") from err
        finally:
            self._mem = {}
        self.size = self.local.stat().st_size

    def _download(self, resp, note) -> Path:
        """The whole file streamed into the user cache atomically (``resp``: a response already
        carrying it), reused when its validator was downloaded before."""
        validator = None if resp is None else content_validator(resp)
        target = cache_dir() / "remote" / _key(self.url, validator or "none") / "whole"
        if validator is not None and target.is_file():
            resp.close()  # the same content was downloaded before
            return target
        note()
        # streamed outside write_atomic's deferred block: a Ctrl-C during a stalled read ends
        # the download at once (as during a range read), not after the socket's TIMEOUT
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(target)
        part = target.parent / tmp_name(target.name, "tmp", name_max(target.parent))
        try:
            src = resp
            if src is None:
                self.requests += 1
                src = open_whole(self.url, self.headers)
            with src, open(part, "wb") as out:
                shutil.copyfileobj(src, out, 2**20)
                out.flush()
                os.fsync(out.fileno())
            self.bytes_fetched += part.stat().st_size
            return write_atomic(target, lambda tmp: os.replace(part, tmp))
        finally:
            part.unlink(missing_ok=True)

    # -- the disk cache ----------------------------------------------------------------
    def _open_cache(self, validator: str) -> None:
        folder = cache_dir() / "remote" / _key(self.url, validator)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            blocks = []
            for p in folder.iterdir():
                m = re.fullmatch(r"(\d+)-(\d+)", p.name)
                if m and p.stat().st_size == int(m[2]) - int(m[1]):
                    blocks.append((int(m[1]), int(m[2])))
        except OSError:
            return  # an unwritable cache: ranges are kept in memory only
        self._dir, self._blocks = folder, sorted(blocks)

    def _cover(self, lo: int, hi: int) -> tuple[int, int] | None:
        for b in list(self._mem) + self._blocks:
            if b[0] <= lo and hi <= b[1]:
                return b
        return None

    def _cached(self, lo: int, hi: int) -> bytes | None:
        b = self._cover(lo, hi)
        if b is None:
            return None
        if b in self._mem:
            return self._mem[b][lo - b[0]:hi - b[0]]
        try:
            data = _pread(self._dir / f"{b[0]}-{b[1]}", lo - b[0], hi - b[0])
        except OSError:
            data = b""
        if len(data) == hi - lo:
            return data
        self._blocks.remove(b)  # gone or damaged: fetched again
        return None

    def _keep(self, lo: int, hi: int, data: bytes, memory: bool = False) -> None:
        """Store fetched bytes in the disk cache, else (``memory``: a prefetch, read next)
        in memory until the next prefetch."""
        if self._dir is not None:
            try:
                write_atomic(self._dir / f"{lo}-{hi}", lambda tmp: tmp.write_bytes(data))
                self._blocks.append((lo, hi))
                return
            except OSError:
                self._dir = None
        if memory:
            self._mem[(lo, hi)] = data


def _key(url: str, validator: str) -> str:
    return hashlib.sha256(f"{url}\n{validator}".encode()).hexdigest()[:40]


def _pread(path, lo: int, hi: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(lo)
        return f.read(max(0, hi - lo))


__all__ = ["RemoteFile"]
