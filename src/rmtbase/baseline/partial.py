"""Resumable table runs: completed blocks of draws kept beside the target until it is written.

With ``out`` every completed block of :data:`~rmtbase.baseline.tables.DRAW_BLOCK` draws goes
atomically to ``.t.nc.partial-<key>/`` beside ``t.nc`` (one ``.npz`` each); the same command
resumes from them and writes what an uninterrupted run would, then removes the folder. The key
hashes all that fixes the σ = 1 draws (format, rmtbase/JAX versions, backend, PRNG, ensemble,
statistics, seed, depth, dtype, storage); a bad block file is recomputed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np

from ..files.atomic import NAME_MAX, pid_alive, write_atomic


def store_key(spec) -> str:
    """Hex key of the σ = 1 draws of ``spec`` (module docstring)."""
    import jax

    from .._version import __version__
    from .table_file import TABLE_FORMAT

    fields = dataclasses.asdict(spec)
    for k in ("draws", "sigma_q", "sigma_k", "chunk_size"):
        fields.pop(k, None)
    if "storage" in fields:  # a record (TableSpec): keyed by its name, as before
        fields["storage"] = spec.storage.name
        if spec.storage.block > 1:  # λ may take the Gram route: blocks drawn before it are
            from .draw_route import GRAM_VERSION  # not resumed

            fields["lambda_route"] = GRAM_VERSION
    fields.update(format=TABLE_FORMAT, rmtbase=__version__, jax=jax.__version__,
                  backend=jax.default_backend(), prng=str(jax.config.jax_default_prng_impl))
    text = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _folder_name(target: Path, key: str) -> str:
    suffix = f".partial-{key}"
    base = os.fsdecode(os.fsencode(target.name)[: NAME_MAX - 1 - len(suffix)])
    return f".{base}{suffix}"


class PartialStore:
    """Completed blocks of a table run, beside ``target`` (see the module docstring)."""

    def __init__(self, target, spec):
        self.target = Path(target)
        self.key = store_key(spec)
        self.dtype = np.dtype(spec.dtype)
        self.dir = self.target.parent / _folder_name(self.target, self.key)
        self.enabled = not self.dir.is_symlink()  # a planted link must not redirect writes

    def _file(self, d: int, d_h: int, b: int) -> Path:
        return self.dir / f"d{d}-dh{d_h}-b{b}.npz"

    def blocks(self) -> int:
        """Number of stored block files."""
        return len(list(self.dir.glob("d*-dh*-b*.npz"))) if self.dir.is_dir() else 0

    def load(self, d: int, d_h: int, b: int, n: int) -> dict | None:
        """The first ``n`` draws of block ``b`` of cell (d, d_h), or None if not stored."""
        f = self._file(d, d_h, b)
        if not self.enabled or not f.is_file():
            return None
        try:
            with np.load(f, allow_pickle=False) as z:
                if str(z["__key__"]) != self.key:
                    raise ValueError("stored under another key")
                out = {k: z[k] for k in z.files if k != "__key__"}
        except Exception as exc:  # noqa: BLE001 - a damaged block is computed again
            warnings.warn(f"rmtbase: ignoring stored block {f}: {exc}", RuntimeWarning,
                          stacklevel=2)
            return None
        if not out or any(v.ndim < 1 or v.shape[0] < n for v in out.values()):
            return None
        if any(v.dtype != self.dtype for k, v in out.items() if k != "qk.spectrum"):
            return None
        return {k: v[:n] for k, v in out.items()}

    def save(self, d: int, d_h: int, b: int, draws: dict) -> None:
        """Store block ``b`` of cell (d, d_h) atomically; a failure only disables the store."""
        if not self.enabled:
            return
        def fill(tmp: Path) -> None:
            with open(tmp, "xb") as fh:
                np.savez(fh, __key__=np.array(self.key), **draws)

        try:
            self.dir.mkdir(exist_ok=True)
            write_atomic(self._file(d, d_h, b), fill)
        except OSError as exc:
            self.enabled = False
            warnings.warn(f"rmtbase: cannot store completed blocks in {self.dir} ({exc}); "
                          "this run cannot be resumed", RuntimeWarning, stacklevel=2)

    def finish(self) -> None:
        """Remove this store and the stores other settings left for the same target (not
        those of a live run: their temporary files name a live process)."""
        parent = self.target.parent
        prefix = _folder_name(self.target, self.key)[: -len(self.key)]
        try:
            folders = [p for p in parent.iterdir() if p.name.startswith(prefix) and p.is_dir()]
        except OSError:
            return
        for folder in folders:
            if folder != self.dir and _busy(folder):
                continue
            shutil.rmtree(folder, ignore_errors=True)


def _busy(folder: Path) -> bool:
    """Whether a live process is writing into ``folder`` (a temporary file names its pid)."""
    for p in folder.glob(".*.tmp"):
        try:
            if pid_alive(int(p.name.rsplit(".", 2)[-2].split("-")[0])):
                return True
        except (ValueError, IndexError):
            continue
    return False
