"""What ``rmtbase score MODEL`` runs, as one library call: :func:`run_score`.

score → outlier directions → composition → circuit search → whole matrices → heavy-tail
metrics → text probe → behaviour labels, each stage the library function of its own, on one
:class:`ScoreRequest`; the answer is one :class:`ScoreRun` holding every Dataset, which
:func:`rmtbase.report.write.write_report` writes as ``rmtbase score`` does, byte for byte."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InputError
from ..scoring.settings import ComponentSettings, CompositionSettings, ScoreSettings

if TYPE_CHECKING:  # numpy and xarray: imported where a search is built
    from ..circuits.head.find import Search


@dataclass(frozen=True)
class ScoreRequest:
    """What to run on one model (``rmtbase score MODEL``'s options, checked when built).

    model: hub id, folder, .gguf file or loaded model (None: the embedded MiniLM); revision;
    settings: the head score's (:class:`~rmtbase.scoring.settings.ScoreSettings`); allow_pickle;
    ov: both circuits (QK and OV) as one collection; directions: the outlier directions;
    components: whole-matrix names (:func:`rmtbase.models.components.parse_components`), with
    ``component_settings``; composition: the head-pair composition's settings
    (:class:`~rmtbase.scoring.settings.CompositionSettings`; None: no composition); probe: the
    text probe joined to the score and, with a composition, the circuit search; text: the probe's
    UTF-8 text file (None: the shipped English text); search: the circuit search's settings
    (:class:`~rmtbase.circuits.head.find.Search`, reaching
    :func:`~rmtbase.circuits.find_circuits` as it is), only with a composition and the probe;
    None there: the record's defaults with the score's seed and the probe's ``text`` (without
    a text the search patches on repeated random tokens at ``Search.lengths``). A search
    given reads the probe's text: its ``text`` must be ``text``. heavy_tail: WeightWatcher's
    metrics of every matrix against their null, ``heavy_tail_draws`` per shape (None: the
    default), at ``settings.quantized_null``."""

    model: object = None
    revision: str | None = None
    settings: ScoreSettings = field(default_factory=ScoreSettings)
    allow_pickle: bool = False
    ov: bool = False
    directions: bool = False
    components: tuple | None = None
    component_settings: ComponentSettings = field(default_factory=ComponentSettings)
    composition: CompositionSettings | None = None
    probe: bool = False
    text: str | None = None
    search: Search | None = None
    heavy_tail: bool = False
    heavy_tail_draws: int | None = None

    def __post_init__(self):
        for name, cls in (("settings", ScoreSettings), ("component_settings", ComponentSettings)):
            if not isinstance(getattr(self, name), cls):
                raise InputError(f"{name} must be a {cls.__name__}, got {getattr(self, name)!r}")
        if self.composition is not None and not isinstance(self.composition,
                                                           CompositionSettings):
            raise InputError(f"composition must be a CompositionSettings or None, got "
                             f"{self.composition!r}")
        if self.text is not None and not self.probe:
            raise InputError("--text needs --probe")
        if (self.ov or self.directions) and (self.components is not None or self.probe):
            raise InputError("--ov and --directions apply to one MODEL scored alone; they do "
                             "not combine with --components or --probe")
        if self.components is not None:
            self.settings.null.require("scores_components", "--components")
        self._check_heavy_tail()
        if self.probe and self.revision is not None:
            raise InputError("--probe loads the model with transformers at its default "
                             "revision; leave out --revision")
        self._check_search()

    def _check_heavy_tail(self) -> None:
        if not self.heavy_tail:
            if self.heavy_tail_draws is not None:
                raise InputError("--heavy-tail-draws needs --heavy-tail")
            return
        if self.ov:
            raise InputError("--heavy-tail scores one model's matrices; it does not combine "
                             "with --ov")
        self.settings.null.require("scores_components", "--heavy-tail")
        if self.heavy_tail_draws is not None:
            from ..checks import MAX_DRAWS, check_int

            check_int("heavy_tail_draws", self.heavy_tail_draws, minimum=2, maximum=MAX_DRAWS)

    def _check_search(self) -> None:
        """``search`` with a composition and the probe (built from the defaults when None),
        reading the probe's text; None otherwise."""
        searched = self.composition is not None and self.probe
        if self.search is None:
            if searched:
                from ..circuits.head.find import Search

                object.__setattr__(self, "search", Search(seed=self.settings.seed,
                                                          text=self.text))
            return
        from ..circuits.head.find import Search

        if not isinstance(self.search, Search):
            raise InputError(f"search must be a circuits.head.find.Search or None, got "
                             f"{self.search!r}")
        if not searched:
            raise InputError("search: the circuit search runs with a composition and the "
                             "probe (--composition --probe)")
        if self.search.text != self.text:
            raise InputError(f"search.text must be the probe's text ({self.text!r}), got "
                             f"{self.search.text!r}")


@dataclass
class Prepared:
    """What :func:`check_request` found before any work: the probe's text (None without the
    probe) and the circuit search's plan (:func:`rmtbase.pipeline.checks.check_search`; None
    without a composition and the probe)."""

    probe_text: str | None = None
    search: dict | None = None

    @property
    def text_probe(self) -> bool:
        """Whether the text probe runs (with the circuit search, only given a tokenizer)."""
        return self.probe_text is not None and (self.search is None or self.search["text"])


@dataclass
class ScoreRun:
    """Every Dataset of one run: the head ``scores`` (with the text probe's ``behaviour_*``
    and, with a composition, ``head_label`` joined), the whole-matrix ``components``, the
    ``composition``, the circuit search's ``circuits``, the text ``probe`` alone, the outlier
    ``directions``, the ``heavy_tail`` table (with ``esd``); None where not run."""

    scores: object
    components: object = None
    composition: object = None
    circuits: object = None
    probe: object = None
    directions: object = None
    heavy_tail: object = None

    @property
    def extras(self) -> dict:
        """The further netCDF files beside ``scores.nc``, {file name: Dataset}, in the order
        they are written."""
        named = (("directions.nc", self.directions), ("composition.nc", self.composition),
                 ("circuits.nc", self.circuits))
        return {name: ds for name, ds in named if ds is not None}


def check_request(request: ScoreRequest, *, quiet: bool = False) -> Prepared:
    """Every precondition of ``request`` that reads the model, before any work (one line
    each): the circuit search's (a tokenizer, a family path patching follows, repeat lengths),
    the text probe's, finite weights for a run of the whole model, the composition's, and every
    head's W_O, W_V for ``ov``. Notes of what will run on stderr unless ``quiet``."""
    from ..models.finite import check_finite_model
    from .checks import check_composition, check_probe, check_search

    out = Prepared()
    if request.probe:
        from ..probe import read_text

        out.probe_text = read_text(request.text)
        if request.composition is not None:  # the circuit search: patching? a tokenizer?
            out.search = check_search(request.model, request.search, quiet)
        if out.text_probe:
            check_probe(request.model)  # no tokenizer, too little memory: before the score
        check_finite_model(request.model, request.allow_pickle)  # the whole model runs
    if request.composition is not None:  # one layer, no V/O, memory: before any work
        check_composition(request.model, request.revision, request.composition,
                          request.allow_pickle, quiet)
    if request.ov:  # every layer's V and O tensors, every head's W_V and W_O, before QK
        from ..scoring.ov import check_ov

        check_ov(request.model, request.revision, request.allow_pickle, heads=True)
    return out


def _directions(ds, request: ScoreRequest):
    """The outlier directions of every circuit scored in ``ds``
    (:mod:`rmtbase.scoring.measures.directions`; the weights are read a second time)."""
    from ..models import default_model_path, load_heads
    from ..models.ov import load_ov_heads
    from ..scoring.collection.combine import entries
    from ..scoring.measures.directions import combine_directions, directions_dataset

    path = request.model if request.model is not None else default_model_path()
    items = entries(ds) if "circuit" in ds.dims else [("qk", ds)]
    tables = []
    for circuit, e in items:
        load = load_ov_heads if circuit == "ov" else load_heads
        tables.append(directions_dataset(load(path, revision=request.revision,
                                              allow_pickle=request.allow_pickle), e, circuit))
    return combine_directions(tables) if len(tables) > 1 else tables[0]


def _composition(request: ScoreRequest, prepared: Prepared, progress: bool):
    """(composition, circuits or None, the model loaded for the search or None): the
    composition and, where path patching runs, the circuit search on the same model and seed
    (the loaded model kept for the text probe: one load)."""
    from ..models import default_model_path
    from ..progress import stage
    from ..scoring.composition.run import composition

    model = request.model if request.model is not None else default_model_path()
    stage("rmtbase", "composition: every cross-layer head pair, Q, K and V", enabled=progress)
    comp = composition(model, revision=request.revision, settings=request.composition,
                       allow_pickle=request.allow_pickle, progress=progress)
    if "composition_draws_note" in comp.attrs and progress:  # what the draws leave open
        print(comp.attrs["composition_draws_note"], file=sys.stderr)
    if not (prepared.search and prepared.search["patch"]):
        return comp, None, None
    from ..circuits import find_circuits
    from ..probe.loader import load

    stage("rmtbase", "circuits: heads labelled by behaviour, top sources path-patched",
          enabled=progress)
    loaded = load(model, tokenizer="required" if prepared.text_probe else "no")
    circuits = find_circuits(loaded, comp, search=request.search, progress=progress)
    return comp, circuits, loaded if prepared.text_probe else None


def _probe(model, text: str, progress: bool):
    """The text probe of ``model`` (the embedded MiniLM under its hub name for None)."""
    from ..probe import probe_model

    name = None
    if model is None:
        from ..models import default_model_path
        from ..probe.run import DEFAULT_MODEL_NAME

        model, name = default_model_path(), DEFAULT_MODEL_NAME
    return probe_model(model, text=text, name=name, progress=progress)


def run_score(request: ScoreRequest | None = None, *, progress: bool = True,
              prepared: Prepared | None = None) -> ScoreRun:
    """Run ``request`` (module docstring; None: the embedded MiniLM's default score) and
    return every Dataset as one :class:`ScoreRun`. ``prepared``: :func:`check_request`'s
    answer when the caller checked first (else it is called here, before any work);
    ``progress``: bars, stages and notes on stderr."""
    from ..probe import join
    from ..scoring.score import score_model
    from .labels import head_labels, with_labels

    request = ScoreRequest() if request is None else request
    if not isinstance(request, ScoreRequest):
        raise InputError(f"request must be a ScoreRequest, got {request!r}")
    prepared = check_request(request, quiet=not progress) if prepared is None else prepared
    kw = dict(revision=request.revision, progress=progress, settings=request.settings,
              allow_pickle=request.allow_pickle)
    if request.ov:
        from ..scoring.ov import score_circuits

        scores = score_circuits(request.model, **kw)
    else:
        scores = score_model(request.model, **kw)
    run = ScoreRun(scores)
    if request.directions:
        run.directions = _directions(scores, request)
    loaded = None
    if request.composition is not None:  # with the probe also the circuit search
        run.composition, run.circuits, loaded = _composition(request, prepared, progress)
    if request.components is not None:
        from ..scoring.matrices.components import score_components

        run.components = score_components(request.model, components=list(request.components),
                                          revision=request.revision,
                                          settings=request.component_settings,
                                          allow_pickle=request.allow_pickle, progress=progress)
    if request.heavy_tail:
        from ..progress import stage
        from ..scoring.matrices.heavy_tail import score_heavy_tail

        stage("rmtbase", "heavy tails: WeightWatcher's metrics of every matrix against their "
              "null", enabled=progress)
        run.heavy_tail = score_heavy_tail(request.model, draws=request.heavy_tail_draws,
                                          seed=request.settings.seed, revision=request.revision,
                                          progress=progress, allow_pickle=request.allow_pickle,
                                          quantized_null=request.settings.quantized_null,
                                          fdr=request.settings.alpha)
    if prepared.text_probe:  # the model the circuit search loaded, if it did: one load
        run.probe = _probe(loaded if loaded is not None else request.model,
                           prepared.probe_text, progress)
        del loaded
        run.scores = join(run.scores, run.probe)
    if run.composition is not None:  # head_label beside head_kind
        run.scores = with_labels(run.scores, head_labels(run.scores, run.circuits))
    return run


__all__ = ["Prepared", "ScoreRequest", "ScoreRun", "check_request", "run_score"]
