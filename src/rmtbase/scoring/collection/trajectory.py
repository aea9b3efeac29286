"""Score many checkpoints or models into one Dataset: :func:`score_collection`.

Entries are scored with the same options and stacked by
:func:`rmtbase.scoring.collection.combine.combine`; under Dask one task per entry, retried
(:data:`RETRIES`), equal to a one-process run; ``entries=DIR`` makes a run resumable. Entries
whose null sizes differ from the largest of their shape are rescored from those sizes, so
results do not depend on cache, order or workers.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass

from ...baseline.sweep import ClusterError, Dispatch, check_scheduler, dispatch_of
from ...errors import InputError
from ...stats.gaussian_null import GaussianNull
from ...stats.null_protocol import Null
from ..description import model_label
from .combine import COLLECTION_DIMS, combine, distinct_suffixes, unique_labels
from .runs import RETRIES, DaskRunner, EntryStore, LocalRunner, add_band, say, score_one


@dataclass(frozen=True)
class Spec:
    """One entry to score: a model (hub id, folder or object), its revision and its label."""

    model: object
    revision: str | None
    label: str


def _local(model) -> bool:
    """Whether ``model`` names a local folder or file (not a hub id, not an object)."""
    return isinstance(model, str | os.PathLike) and os.path.exists(os.fspath(model))


def _label(model, revision) -> str:
    if revision is not None:
        return str(revision)
    if _local(model):
        return os.path.basename(os.path.normpath(os.fspath(model)))
    if isinstance(model, str | os.PathLike):
        return os.fspath(model)
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or "model"
    return model_label(name)  # a loaded model's local path: its folder name


def make_specs(models, revisions=None, labels=None) -> list[Spec]:
    """Entries from ``models`` and ``revisions``; labels default to revision, folder or file name,
    or hub id, repeated local names told apart by
    :func:`rmtbase.scoring.collection.combine.distinct_suffixes`, then ``#i``."""
    models = [models] if isinstance(models, str | os.PathLike) or not _seq(models) else \
        list(models)
    revisions = None if revisions is None else list(revisions)
    if not models:
        raise InputError("give at least one model")
    if revisions is not None:
        if not revisions:
            raise InputError("revisions is empty")
        if len(models) == 1:
            pairs = [(models[0], r) for r in revisions]
        elif len(revisions) == 1:
            pairs = [(m, revisions[0]) for m in models]
        else:
            raise InputError("give several revisions of one model, or one revision for several "
                             "models, not both")
    else:
        pairs = [(m, None) for m in models]
    if labels is None:
        labels = [_label(m, r) for m, r in pairs]
        if revisions is None:
            labels = _separate([m for m, _ in pairs], labels)
    elif len(labels) != len(pairs):
        raise InputError(f"{len(labels)} labels for {len(pairs)} entries")
    return [Spec(m, r, lab) for (m, r), lab in zip(pairs, unique_labels(labels), strict=True)]


def _separate(models, labels) -> list[str]:
    """``labels`` with each repeated label of local entries replaced by the shortest distinct
    ends of those entries' paths (:func:`make_specs`)."""
    labels = list(labels)
    for lab in {x for x in labels if labels.count(x) > 1}:
        idx = [i for i, x in enumerate(labels) if x == lab and _local(models[i])]
        for i, new in zip(idx, distinct_suffixes([models[i] for i in idx]), strict=True):
            labels[i] = new
    return labels


def _seq(x) -> bool:
    return isinstance(x, list | tuple)


#: The :class:`~rmtbase.models.types.ModelInfo` sizes that, with the architecture, make two
#: entries the same shape (their null tables are shared).
_SIZES = ("d", "d_h", "n_layers", "n_heads", "n_kv_heads")


def _shape(info) -> tuple:
    """The key of an entry's shape: (architecture, *sizes), hashable."""
    return (info.architecture, *(int(getattr(info, k)) for k in _SIZES))


def _default_dim(revisions, infos) -> str:
    """The dimension when none is given: ``checkpoint`` for revisions or entries of one
    architecture and shape, else ``model``."""
    same = len({_shape(i) for i in infos}) == 1
    return "checkpoint" if revisions is not None or same else "model"


def _check_dask_models(specs, here: bool) -> None:
    """Dask runs take hub ids or folders (a task is sent its model's name, not an object)."""
    if not here and any(not isinstance(s.model, str | os.PathLike) for s in specs):
        raise InputError("Dask runs take hub ids or folders, not loaded model objects")


def score_collection(models, *, revisions=None, labels=None, dim: str | None = None,
                     dispatch: Dispatch | None = None, spectrum_draws: int = 200, entries=None,
                     **options):
    """Score every entry (model × revision) and stack them.

    revisions: several of one model, or one for all; dim: "checkpoint" or "model"; dispatch: where
    the entries run (:class:`rmtbase.baseline.sweep.Dispatch`: a Dask ``scheduler``, ``workers``
    or ``client``, else in process; ``progress``), its fields also as keywords; entries: per-entry
    folder; the other ``options``: :func:`rmtbase.scoring.score.score_model`'s keywords."""
    from ...models import model_info
    from ..settings import ScoreSettings

    dispatch = dispatch_of(dispatch, options, "score_collection")
    if "settings" in options:  # entry keys and the band read score_model's keywords
        raise TypeError("score_collection() takes score_model's settings as keywords")
    workers, scheduler, client = dispatch.workers, dispatch.scheduler, dispatch.client
    progress = dispatch.progress
    specs = make_specs(models, revisions, labels)
    fields = {f.name for f in dataclasses.fields(ScoreSettings)}  # checked once, up front
    null = ScoreSettings(**{k: v for k, v in options.items() if k in fields}).null
    if dim is not None and dim not in COLLECTION_DIMS:
        raise InputError(f"dim must be one of {', '.join(COLLECTION_DIMS)}, got {dim!r}")
    infos = [model_info(s.model, revision=s.revision) for s in specs]  # fails early, cheaply
    if dim is None:
        dim = _default_dim(revisions, infos)
    import jax

    x64 = bool(jax.config.read("jax_enable_x64"))
    seed = int(options.get("seed", 0))
    here = workers is None and scheduler is None and client is None
    _check_dask_models(specs, here)
    check_scheduler(scheduler)  # an address nothing answers at: one line before any work
    store = None if entries is None else EntryStore(entries, specs, options, x64,
                                                (spectrum_draws, seed))
    runner = LocalRunner(specs, options, x64, progress, store) if here else \
        DaskRunner(specs, options, x64, progress, store, workers, scheduler, client)
    results = _run_all(runner, _shape_first(infos), store, progress)
    # the Gaussian band only for a null whose band it is (an entry's own band is not kept)
    scored = [add_band(results[i], spectrum_draws if null.gaussian_spectrum_band else 0, seed)
              for i in range(len(specs))]
    out = combine(scored, [s.label for s in specs], dim)
    out.attrs["computed_by"] = "one process" if here else f"{len(specs)} Dask tasks"
    return out


def _run_all(runner, order, store, progress) -> dict:
    """{entry: Dataset} of every entry, run in ``order`` by ``runner`` and re-scored where
    another entry of its shape needed a larger null. What an interrupt or a lost Dask cluster
    leaves is said: the finished entries in ``store``, which the same call continues from."""
    try:
        with runner as run:
            results = run(order)
            for _ in range(MAX_ROUNDS):
                behind = _behind(results)
                if not behind:
                    break
                say(progress, f"re-scoring {len(behind)} entries against the larger null "
                               "that another entry of the same shape needed")
                results.update(run(sorted(behind), force=True, start=behind))
    except ClusterError as exc:
        if store is not None and store.wrote:
            raise ClusterError(f"{exc}; {store.wrote} finished entries are kept in "
                               f"{store.folder}: run the same command again to continue"
                               ) from None
        raise
    except KeyboardInterrupt:
        if store is not None and store.wrote:
            print(f"rmtbase: {store.wrote} finished entries are kept in {store.folder}; run the "
                  "same command again to continue", file=sys.stderr, flush=True)
        raise
    return results


def score_component_collection(models, *, revisions=None, labels=None, dim: str | None = None,
                               progress: bool = True, **options):
    """Whole-matrix scores of every entry, stacked by
    :func:`rmtbase.scoring.collection.combine.combine_components`; entries, labels and ``dim`` as
    :func:`score_collection`, ``options`` :func:`rmtbase.scoring.matrices.components.score_components`'s,
    in process. Each entry equals its score alone."""
    from ...models import model_info
    from ..matrices.components import score_components
    from .combine import combine_components

    specs = make_specs(models, revisions, labels)
    if dim is not None and dim not in COLLECTION_DIMS:
        raise InputError(f"dim must be one of {', '.join(COLLECTION_DIMS)}, got {dim!r}")
    if dim is None:
        dim = _default_dim(revisions, [model_info(s.model, revision=s.revision) for s in specs])
    scored = []
    for k, s in enumerate(specs):
        ds = score_components(s.model, revision=s.revision, progress=progress, **options)
        scored.append(ds)
        say(progress, f"scored the whole matrices of {s.label} ({k + 1}/{len(specs)}): "
                       f"{int(ds['component_flag'].sum())} of {int((ds['storage'] != '').sum())} "
                       "differ from the null")
    out = combine_components(scored, [s.label for s in specs], dim)
    out.attrs["computed_by"] = "one process"
    return out


#: Rounds of re-scoring entries whose null another entry enlarged (each round starts them
#: from the largest sizes, which only grow, up to the rules' caps).
MAX_ROUNDS = 10


def _profile_sizes(text) -> tuple:  # "float32: 18000, q4_0: 2000" -> ((storage, n), ...)
    pairs = [p.rsplit(":", 1) for p in str(text or "").split(",") if ":" in p]
    return tuple(sorted((s.strip(), int(n)) for s, n in pairs))


def _null_size(ds) -> dict:
    """{"table", "joint", "spectral": draws, "profile": ((storage, n), ...)} of an entry (0 /
    empty where its score has none): ``baseline_draws``, ``joint_null_draws``, … ."""
    a = ds.attrs
    return {"table": int(a.get("baseline_draws", 0)), "joint": int(a.get("joint_null_draws", 0)),
            "spectral": int(a.get("spectral_null_draws", 0)),
            "profile": _profile_sizes(a.get("profile_null_draws"))}


def _largest(x: dict, y: dict) -> dict:
    """Elementwise the larger of two :func:`_null_size` (the profile per storage), the table
    at least the joint draws (where an entry re-scored from them ends: a table grown)."""
    prof = dict(x["profile"])
    for s, n in y["profile"]:
        prof[s] = max(prof.get(s, 0), n)
    out = {k: max(x[k], y[k]) for k in ("joint", "spectral")}
    return {"table": max(x["table"], y["table"], out["joint"]), **out,
            "profile": tuple(sorted(prof.items()))}


def _per_head(ds) -> bool:
    """Whether ``ds`` was scored against a null without a shared table to grow
    (:attr:`~rmtbase.stats.null_kind.Null.shared_table`)."""
    return not Null.parse(ds.attrs.get("null_kind", GaussianNull.name)).shared_table


def _key(ds) -> tuple:
    return ds.attrs.get("d"), ds.attrs.get("d_h"), ds.attrs.get("null_storage")


def _behind(results: dict) -> dict[int, dict]:
    """{entry: ``null_start``} of the entries whose null sizes (:func:`_null_size`) differ from
    the largest among the entries of their shape and null storage; each is re-scored from
    those sizes (module docstring), not through what the cache holds."""
    best = {}
    for ds in results.values():
        if not _per_head(ds):
            best[_key(ds)] = _largest(best.get(_key(ds), _null_size(ds)), _null_size(ds))
    return {i: best[_key(ds)] for i, ds in sorted(results.items())
            if not _per_head(ds) and _null_size(ds) != best[_key(ds)]}


def _shape_first(infos) -> list[list[int]]:
    """Batches: the first entry of each shape, then the rest (so the first one's null tables
    are cached before the others start)."""
    first, rest, seen = [], [], set()
    for i, info in enumerate(infos):
        (rest if _shape(info) in seen else first).append(i)
        seen.add(_shape(info))
    return [b for b in (first, rest) if b]


__all__ = ["RETRIES", "Spec", "make_specs", "score_collection", "score_component_collection",
           "score_one"]
