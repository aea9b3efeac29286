"""All-or-nothing output folders: build in a temporary sibling, swap in at the end.

:class:`OutputFolder` (a context manager) writes into ``<parent>/.<name>.tmp-<pid>-<hex>``,
each file all or nothing (:mod:`.atomic`); on success a ``manifest.json`` (every file's size
and SHA-256, the command, rmtbase's version) is written last and the folder replaces ``<name>``
in one step (``renameat2(RENAME_EXCHANGE)``, else two renames). On error or interrupt the
temporary folder is removed and ``<name>`` left as it was; those of killed runs are removed by
the next run into the same place.

:func:`check_output_dir` validates the target before any work: absent, empty, or an earlier
output of the same kind holding only its manifest's files; anything else (a file, other
contents, a folder inside another output, an unwritable parent, a name too long) is refused with
one line, as is a folder another process is writing (:mod:`.output_lock`). A run never deletes
a file it did not write. ``overwrite=False`` (the command line without ``--overwrite``) refuses
an earlier output too."""

from __future__ import annotations

import ctypes
import datetime as _dt
import errno
import glob
import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path

from .._version import __version__
from ..errors import InputError
from . import atomic, output_lock
from .atomic import fsync_dir, pid_alive
from .interrupts import check as check_interrupt
from .interrupts import deferred, fault_point
from .memory import fmt_bytes

MANIFEST = "manifest.json"
NAME_MAX = 255
#: Free space below which an output folder is refused before the work (its files, scores.nc,
#: figures and report.html, cannot be estimated ahead; a full disk is found up front).
MIN_FREE = 16 * 2**20


def _tmp_name(name: str, tag: str = "tmp") -> str:
    return f".{name}.{tag}-{os.getpid()}-{secrets.token_hex(4)}"


def _manifest_kind(path: Path) -> str | None:
    try:
        return json.loads((path / MANIFEST).read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        return None


def foreign_files(path: Path) -> list[str]:
    """Files (relative paths) in the earlier output ``path`` that its manifest does not list:
    written there by something else, and lost if the folder were replaced."""
    try:
        listed = set(json.loads((path / MANIFEST).read_text()).get("files") or {})
    except (OSError, ValueError, AttributeError):
        listed = set()
    out = []
    for root, dirs, files in os.walk(path):
        rel_root = Path(root).relative_to(path)
        for f in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = (rel_root / f).as_posix()
            if rel != MANIFEST and rel not in listed:
                out.append(rel)
        if not files and not dirs and rel_root != Path("."):
            out.append(rel_root.as_posix() + "/")
    return sorted(out)


def _enclosing_output(p: Path) -> tuple[Path, str] | None:
    """(folder, kind) of an rmtbase output folder that holds ``p``, if any."""
    for anc in p.parents:
        if (anc / MANIFEST).is_file():
            kind = _manifest_kind(anc)
            if isinstance(kind, str) and kind.startswith("rmtbase"):
                return anc, kind
    return None


def check_output_path(path) -> Path:
    """``path`` resolved, or :class:`InputError` if it exists and is not a folder: the part of
    :func:`check_output_dir` the CLI makes at start-up, before its heavy imports."""
    p = Path(os.path.expanduser(os.fspath(path)))
    if p.is_symlink():
        p = p.resolve()
    p = p.absolute()
    if p.exists() and not p.is_dir():
        raise InputError(f"{p} exists and is not a folder; give a folder for the output")
    return p


def check_output_dir(path, kind: str, *, overwrite: bool = True) -> Path:
    """The output folder ``path`` resolved, or :class:`InputError` saying why it cannot be;
    ``overwrite=False`` also refuses an earlier output of the same ``kind``."""
    p = check_output_path(path)
    inside = _enclosing_output(p)
    if inside is not None:
        raise InputError(f"{p} is inside {inside[0]}, an earlier {inside[1]} output that its "
                         "next run replaces whole; choose a folder outside it")
    if p.is_dir() and any(p.iterdir()) and _manifest_kind(p) != kind:
        raise InputError(f"{p} is not empty and is not an earlier {kind} output (no "
                         f"manifest.json of {kind}); rmtbase never replaces a folder it did "
                         "not write: choose another --out or empty it")
    if p.is_dir() and any(p.iterdir()) and not overwrite:
        raise InputError(f"{p} holds an earlier {kind} output; pass --overwrite to replace "
                         "it, or give another --out")
    _refuse_foreign(p, kind)
    if len(os.fsencode(_tmp_name(p.name, "old"))) > NAME_MAX:
        raise InputError(f"output folder name {p.name[:40]}… is too long ({len(p.name)} "
                         f"characters; at most {NAME_MAX - 30})")
    if p.is_dir() and os.path.ismount(p):  # the final swap would fail (EBUSY) after the work
        raise InputError(f"{p} is a mount point; the output folder is replaced whole, so give "
                         "a folder inside it")
    anc = p.parent
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir() or not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the output folder {p}: {anc} is not writable")
    probe = anc / _tmp_name(p.name, "probe")[:NAME_MAX]
    try:  # what access() cannot tell: a read-only file system, for root too
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        why = "read-only file system" if exc.errno == errno.EROFS else (exc.strerror or str(exc))
        raise InputError(f"cannot write the output folder {p}: {anc} does not take a new "
                         f"folder ({why})") from None
    free = atomic.free_bytes(anc)
    if free is not None and free < MIN_FREE:  # a full disk, found before the work
        raise InputError(f"cannot write the output folder {p}: its file system has "
                         f"{fmt_bytes(free)} free, less than the {fmt_bytes(MIN_FREE)} an "
                         "output needs at least")
    output_lock.acquire(p)  # one writer: a second run into the same folder is refused now
    return p


def _refuse_foreign(p: Path, kind: str) -> None:
    if p.is_dir() and _manifest_kind(p) == kind:
        extra = foreign_files(p)
        if extra:
            more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
            raise InputError(f"{p} is an earlier {kind} output, but holds files it did not "
                             f"write ({', '.join(extra[:3])}{more}), which replacing it would "
                             "delete; move them or choose another folder")


def _clean_stale(parent: Path, name: str) -> None:
    for q in parent.glob(f".{glob.escape(name)}.*-*-*"):
        try:
            pid = int(q.name.rsplit("-", 2)[-2])
        except ValueError:
            continue
        if q.is_dir() and not pid_alive(pid):
            shutil.rmtree(q, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


class OutputFolder:
    """Context manager for an all-or-nothing output folder (module docstring)."""

    def __init__(self, path, *, kind: str):
        self.kind = kind
        self.final = check_output_dir(path, kind)
        self.tmp: Path | None = None
        self.made: list[Path] = []
        self.written: dict[str, Path] = {}

    def __enter__(self) -> OutputFolder:
        parent = self.final.parent
        # the folders made here for the output (``--out`` of a study, OUT/NAME) go again on
        # failure, innermost first and only while empty: an interrupted run leaves nothing
        self.made = [a for a in (parent, *parent.parents) if not a.exists()]
        try:  # __exit__ does not run when __enter__ is interrupted
            parent.mkdir(parents=True, exist_ok=True)
            _clean_stale(parent, self.final.name)
            self.tmp = parent / _tmp_name(self.final.name)
            with deferred():
                self.tmp.mkdir()
            fault_point("output:created")
        except BaseException:
            self._discard()
            raise
        return self

    def _discard(self) -> None:
        """Remove the temporary folder and the folders made for the output, if empty."""
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        for folder in self.made:
            try:
                folder.rmdir()
            except OSError:  # not empty (or gone): it is not only ours
                break
        output_lock.release(self.final)

    def _path(self, rel) -> Path:
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        self.written[str(Path(rel).as_posix())] = self.final / rel
        return p

    def write_text(self, rel, text: str) -> None:
        atomic.write_text(self._path(rel), text)

    def write_netcdf(self, rel, ds) -> None:
        """Write ``ds`` as ``rel`` with CF attributes added (:func:`rmtbase.files.cf.annotate`;
        ``ds`` itself is not changed)."""
        from .cf import annotate

        ds = annotate(ds, kind=self.kind, name=Path(rel).name)
        with deferred():  # the stage below is inside the held block, as the write is
            fault_point("output:netcdf")
            atomic.write_netcdf(ds, self._path(rel))
        fault_point("output:written")

    def save_figure(self, fig, rel, dpi: int = 100) -> None:
        atomic.save_figure(fig, self._path(rel), dpi=dpi)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self._discard()
            return False
        try:
            fault_point("output:swap")
            check_interrupt()  # one swallowed on its way up ends the run before the swap
            _refuse_foreign(self.final, self.kind)  # files added while this run worked
            self._manifest()
            fsync_dir(self.tmp)
            if self.final.exists():
                if _exchange(self.tmp, self.final):
                    old = self.tmp
                else:
                    old = self.final.parent / _tmp_name(self.final.name, "old")
                    os.rename(self.final, old)
                    os.rename(self.tmp, self.final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(self.tmp, self.final)
            fsync_dir(self.final.parent)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        finally:
            output_lock.release(self.final)
        return False

    def _manifest(self) -> None:
        files = {}
        for rel in sorted(self.written):
            p = self.tmp / rel
            files[rel] = {"bytes": p.stat().st_size,
                          "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        doc = {"kind": self.kind, "rmtbase_version": __version__,
               "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
               "files": files}
        (self.tmp / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n")
        self.written[MANIFEST] = self.final / MANIFEST
