"""A model input resolved to its config and a way to open its weights: a hub id (with
``revision``), a local folder, a ``.gguf`` file (its header read here, so refusals come first), a
URL, a loaded ``transformers`` model or a TransformerLens model. :func:`resolve` returns a
:class:`Resolved`; ``revision`` for anything but a hub id is an InputError."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, ModelError
from . import hub, remote
from ._errors import one_line
from ._state_dict import StateDictWeights
from .weights import FileWeights


@dataclass
class Resolved:
    """A model input resolved to its config and a way to open its weights."""

    name: str
    revision: str | None
    source: str  # "hub" | "folder" | "object" | "gguf" | "url" | "transformer_lens"
    cfg: dict
    model_class: str
    obj: object = None  # a loaded model; a GGUF file's header
    folder: Path | None = None

    def open_weights(self, allow_pickle: bool):
        if self.source == "gguf":
            from .gguf import GGUFWeights

            return GGUFWeights(self.folder, self.cfg, header=self.obj)
        if self.source == "object":
            return StateDictWeights(self.obj, self.name)
        if self.source == "transformer_lens":
            from .transformer_lens import TLWeights

            return TLWeights(self.obj, self.name, self.cfg)
        if self.source == "url":
            files, getter = remote.url_weight_files(self.name)
            return FileWeights(files, getter, self.name)
        if self.source == "folder":
            try:
                files = [p.name for p in self.folder.iterdir() if p.is_file()]
            except OSError as exc:
                raise ModelError(f"cannot list {self.folder}: {one_line(exc)}") from exc
            return FileWeights(files, self.folder.joinpath, str(self.folder),
                               allow_pickle=allow_pickle, folder=self.folder)
        files, getter = hub.weight_files(self.name, self.revision)
        label = self.name if self.revision is None else f"{self.name}@{self.revision}"
        return FileWeights(files, getter, label, allow_pickle=allow_pickle)


def read_config(path: Path) -> dict:
    try:
        cfg = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {one_line(exc)}") from exc
    except RecursionError as exc:
        raise ModelError(f"{path} is nested too deeply to be a model config") from exc
    except ValueError as exc:
        raise ModelError(f"{path} is not valid JSON: {one_line(exc)}") from exc
    if not isinstance(cfg, dict):
        raise ModelError(f"{path} does not hold a JSON object")
    return cfg


def _looks_like_path(text: str) -> bool:
    return (text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1
            or os.path.isabs(text))


def _local(text: str) -> tuple[Path, str]:
    """``(path, kind)`` of a local path, kind ``"dir"``, ``"file"`` or ``""``; a path the OS cannot
    look up is a ModelError naming it."""
    try:
        path = Path(text).expanduser()
        return path, "dir" if path.is_dir() else "file" if path.exists() else ""
    except (OSError, RuntimeError, ValueError) as exc:
        raise ModelError(f"no such model folder: {text!r} ({one_line(exc)})") from exc


def resolve(model, revision: str | None) -> Resolved:
    if isinstance(model, (str, os.PathLike)):
        try:
            text = os.fspath(model)
        except TypeError as exc:  # an os.PathLike returning bytes
            raise InputError(f"model path must be text, got {model!r}") from exc
        if not isinstance(text, str):
            raise InputError(f"model path must be text, got {model!r}")
        if not isinstance(model, os.PathLike) and remote.is_url(text):
            return _resolve_url(text, revision)
        path, kind = _local(text)
        if kind == "dir":
            if revision is not None:
                raise InputError("revision= applies only to hub ids, not to a local folder")
            cfg_path = path / "config.json"
            if not cfg_path.is_file():
                raise ModelError(f"no config.json in {path}")
            cfg = read_config(cfg_path)
            return Resolved(str(path), None, "folder", cfg, class_of(cfg), folder=path)
        if kind == "file":
            from .gguf import gguf_config
            from .gguf_header import is_gguf

            if not is_gguf(path):
                raise ModelError(f"{path} is a file but not a GGUF file (not a regular file "
                                 "starting with the GGUF magic bytes); give the model's folder "
                                 "(config.json + weights) or a .gguf file")
            if revision is not None:
                raise InputError("revision= applies only to hub ids, not to a GGUF file")
            from .gguf_header import read_header

            header = read_header(path)
            cfg = gguf_config(path, header)  # the header only: refusals come before any tensor
            return Resolved(str(path), None, "gguf", cfg, class_of(cfg), obj=header,
                             folder=path)
        if isinstance(model, os.PathLike) or _looks_like_path(text) or not text:
            raise ModelError(f"no such model folder: {text!r}")
        cfg = read_config(hub.fetch_config(text, revision))
        return Resolved(text, revision, "hub", cfg, class_of(cfg))
    from .transformer_lens import SOURCE, is_transformer_lens, tl_config

    if is_transformer_lens(model):  # before .config: a bridge answers its HF model's config
        if revision is not None:
            raise InputError("revision= applies only to hub ids, not to a loaded model")
        cfg, name, cls = tl_config(model)
        return Resolved(name, None, SOURCE, cfg, cls, obj=model)
    config = getattr(model, "config", None)
    if config is not None and hasattr(model, "state_dict"):
        if revision is not None:
            raise InputError("revision= applies only to hub ids, not to a loaded model")
        try:
            cfg = config.to_dict()
        except Exception as exc:
            raise ModelError(f"cannot read the config of the loaded model: "
                             f"{one_line(exc)}") from exc
        name = str(cfg.get("_name_or_path") or getattr(config, "name_or_path", "") or
                   type(model).__name__)
        return Resolved(name, None, "object", cfg, type(model).__name__, obj=model)
    raise InputError("model must be a hub id, a folder path or a loaded transformers model "
                     f"(nn.Module with .config), got {type(model).__name__}")


def _resolve_url(text: str, revision: str | None) -> Resolved:
    """A model at a URL: ``hf://org/name[@revision]`` is a hub repository, any other URL the
    folder of a model (:mod:`rmtbase.models.remote`)."""
    repo = remote.hub_repo(text)
    if repo is not None:
        repo_id, rev = repo
        if rev is not None and revision is not None and rev != revision:
            raise InputError(f"{text!r} names revision {rev!r} but revision={revision!r}")
        rev = rev or revision
        cfg = read_config(hub.fetch_config(repo_id, rev))
        return Resolved(repo_id, rev, "hub", cfg, class_of(cfg))
    if revision is not None:
        raise InputError("revision= applies only to hub ids (and hf:// URLs), not to a URL")
    cfg = read_config(remote.fetch_small(text, "config.json"))
    return Resolved(text, None, "url", cfg, class_of(cfg))


def class_of(cfg: dict) -> str:
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return ""
