"""The circuit search's rule (docs/path-patching.md §3–4; :mod:`.run` drives it).

**Receivers**: heads after layer 0 with a label in :data:`PATCHED_LABELS` (``first-token``
sinks only with ``sinks=True``; Xiao et al. 2023, arXiv:2309.17453), each patched on the
sequences of the repeat length where its label's statistic is largest. A receiver named
without a label gets **dependencies** (attention or output change), never ``confirmed``.
**Sources**: every head of an earlier layer, screened by attribution (:mod:`..core.screen`) and
ranked by composition; all patched exactly when the plan fits :data:`EXACT_BUDGET`, else the
top ``k`` of each ranking and every source whose estimate reaches :data:`ATTRIBUTION_FLOOR`
of the rule's floor. Paths: ``direct`` (:mod:`..core.receiver`), ``via_mlp``
(:mod:`..core.paths`: every source where every direct one is patched, else its top ``k`` by
its own attribution).

**Rule** (:mod:`..core.rule`, per row on its effect under ``counterfactual`` against
``|score_to|``, the change metrics against 1): ``confirmed`` when it passes and the other
non-zero counterfactual (resample for mean, mean for resample) keeps it; ``depends`` says why
a row that passes one counterfactual is not: ``zero`` (it passes with the output set to zero
only, the other non-zero one measured under the floor) or ``counterfactual`` (the non-zero
ones disagree). ``role`` "supports" (the
behaviour drops without the source) or "suppresses"; ``expected_false_confirmations`` sums
:func:`false_rate` over the rows.
``dominant``: the supporting confirmed row with the largest effect per receiver and kind. Per
receiver, kind and path: ``joint_effect`` (every earlier source replaced at once),
``redundant`` (no single confirmed, the joint passes), ``joint_contradicts`` (the confirmed
singles' sum and a ≥ 3 se joint effect differ in sign). Per receiver and kind the circuit as
a whole: :mod:`.faithfulness`."""

from __future__ import annotations

import warnings
from dataclasses import InitVar, dataclass

import numpy as np
import xarray as xr

from ...errors import InputError
from ..core.counterfactual import ABLATIONS, DEFAULT_ABLATION, check_kind, other
from ..core.rule import (
    CONFIRM_FRACTION,
    CONFIRM_SE,
    FALSE_RATE,
    MIN_SEQUENCES,
    false_rate,
    floor_of,
    keeps,
    passes,
)
from .labels import head_name

#: Sources patched per receiver and kind by each ranking (weights, attribution).
DEFAULT_K = 3
#: Exact patches (receivers x kinds x sources) above which only the top k are patched.
EXACT_BUDGET = 3000
#: Labels whose heads are patched as receivers by default (``first-token`` with ``sinks``).
PATCHED_LABELS = ("induction", "previous-token", "duplicate-token", "self/local")
#: Receivers kept for back-compatibility of imports; unlabelled heads are never receivers
#: unless named.
UNLABELLED_RECEIVERS = 0


@dataclass(frozen=True)
class Search:
    """The settings of one circuit search (the fields as :func:`rmtbase.circuits.find_circuits`
    describes them; each default written here once), checked when built: each is refused in
    one :class:`InputError` line, and held as the code uses it (``text`` implies
    ``sequences="text"``, ``"repeated_random_tokens"`` is None, receivers and layers tuples of
    ints, none named twice). The record reaches the search as it is built. What needs the
    model (a receiver's range) is checked by :func:`rmtbase.circuits.find_circuits`; whether
    progress is shown is no setting of the search (``find_circuits(progress=)``)."""

    k: int = DEFAULT_K
    sequences: object = None
    text: object = None
    receivers: tuple | None = None
    seed: int = 0
    threshold: float = 0.4
    sinks: bool = False
    lengths: object = "auto"
    screen: str = "auto"
    mlp_paths: object = "auto"
    layers: tuple | None = None
    #: The counterfactual of the reported effects (:data:`..core.counterfactual.ABLATIONS`; None:
    #: ``DEFAULT_ABLATION``, held resolved).
    counterfactual: str | None = None
    #: Called with the finding rows (dicts as :func:`.table.circuit_list`) of each receiver
    #: as soon as it is done; None: not called.
    on_receiver: object = None
    #: The deprecated spelling of ``counterfactual`` (a DeprecationWarning; not a field).
    ablation: InitVar[str | None] = None

    def __post_init__(self, ablation):
        from ...checks import MAX_COUNT, check_int, check_seed
        from .sequences import SOURCES, Sequences

        put = object.__setattr__
        if ablation is not None:
            if self.counterfactual is not None:
                raise TypeError("Search() got both 'ablation' and 'counterfactual'")
            warnings.warn("Search(ablation=) is deprecated: use counterfactual=",
                          DeprecationWarning, stacklevel=3)
            put(self, "counterfactual", ablation)
        elif self.counterfactual is None:
            put(self, "counterfactual", DEFAULT_ABLATION)
        put(self, "k", check_int("k", self.k, minimum=1, maximum=MAX_COUNT))
        put(self, "seed", check_seed(self.seed))
        sequences, text = self.sequences, self.text
        if text is not None and sequences is None:
            sequences = "text"
        if text is not None and sequences != "text":
            raise InputError(f"text is read with sequences='text', not {sequences!r}")
        if sequences is not None and not isinstance(sequences, Sequences) \
                and sequences not in SOURCES:
            raise InputError(f"sequences must be one of {', '.join(SOURCES)} or a Sequences, "
                             f"got {sequences!r}")
        put(self, "sequences", None if sequences == "repeated_random_tokens" else sequences)
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 < float(t) <= 1.0:
            raise InputError(f"threshold must be a number in (0, 1], got {t!r}")
        check_lengths(self.lengths)
        if self.screen not in ("auto", "exact", "top-k"):
            raise InputError(f"screen must be 'auto', 'exact' or 'top-k', got {self.screen!r}")
        if self.mlp_paths not in ("auto", True, False):
            raise InputError(f"mlp_paths must be 'auto', True or False, got {self.mlp_paths!r}")
        check_kind(self.counterfactual)
        if self.on_receiver is not None and not callable(self.on_receiver):
            raise InputError(f"on_receiver must be a callable or None, got {self.on_receiver!r}")
        put(self, "receivers", _heads(self.receivers))
        put(self, "layers", _layers(self.layers))
        put(self, "sinks", bool(self.sinks))


def _integer(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _heads(receivers):
    """``receivers`` as a tuple of (layer, head) ints, or None; refused if not integer pairs
    (a type, not coerced: (1.5, 0) is not L1H0) or if one is named twice (patched and reported
    twice otherwise)."""
    if receivers is None:
        return None
    out = []
    for pair in receivers:
        li, hi = pair
        if not (_integer(li) and _integer(hi)):
            raise InputError(f"receivers_of_interest: ({li!r}, {hi!r}) is not a pair of "
                             "integers (layer, head)")
        if int(li) < 1 or int(hi) < 0:
            raise InputError(f"receiver {head_name(li, hi)} is not a head after layer 0")
        out.append((int(li), int(hi)))
    if len(set(out)) < len(out):
        twice = next(h for h in out if out.count(h) > 1)
        raise InputError(f"receivers_of_interest names {head_name(*twice)} twice")
    return tuple(out)


def _layers(layers):
    """``layers`` as a tuple of ints after 0, or None; none named twice."""
    if layers is None:
        return None
    out = []
    for li in layers:
        if not _integer(li) or li < 1:
            raise InputError(f"layers: {li!r} is not a layer after 0")
        out.append(int(li))
    if len(set(out)) < len(out):
        raise InputError(f"layers names a layer twice, got {list(layers)!r}")
    return tuple(out)


def check_lengths(spec) -> None:
    """``repeat_lengths`` is ``"auto"`` or integers >= MIN_REPEAT (the fit is checked later)."""
    from .sequences import MIN_REPEAT

    if isinstance(spec, str) and spec == "auto":
        return
    vals = [spec] if isinstance(spec, (int, np.integer)) else spec
    if isinstance(vals, str) or not hasattr(vals, "__iter__"):
        raise InputError(f"repeat_lengths must be 'auto' or integers, got {spec!r}")
    vals = list(vals)
    if not vals or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                       or n < MIN_REPEAT for n in vals):
        raise InputError(f"repeat_lengths must be 'auto' or integers >= {MIN_REPEAT}, got "
                         f"{spec!r}")
    from ...checks import MAX_COUNT

    if any(int(n) > MAX_COUNT for n in vals):
        raise InputError(f"repeat_lengths must be at most {MAX_COUNT}, got {spec!r}")


def check_composition(composition: xr.Dataset) -> None:
    """One-line :class:`InputError` unless ``composition`` is a composition Dataset."""
    need = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    if "composition" not in composition or tuple(composition["composition"].dims) != need:
        raise InputError("composition must be rmtbase's composition Dataset (a 'composition' "
                         f"variable over {', '.join(need)})")


def ranked_sources(composition: xr.Dataset, layer: int, head: int, kind: str):
    """[(layer_from, head_from, rank, score), …] of every earlier source of receiver (layer,
    head), best first by ``kind``'s composition score (rank 1 = top; NaN last)."""
    s = composition["composition"].sel(kind=kind, layer_to=layer, head_to=head)
    s = np.asarray(s.transpose("layer_from", "head_from").values, dtype=np.float64)[:layer]
    n_h = s.shape[1]
    flat = np.where(np.isfinite(s.ravel()), s.ravel(), -np.inf)
    order = np.argsort(-flat, kind="stable")
    return [(int(i // n_h), int(i % n_h), r + 1, float(s.ravel()[i]))
            for r, i in enumerate(order)]


def receivers(labels: xr.Dataset, *, sinks: bool = False) -> list[tuple[int, int, str]]:
    """[(layer, head, statistic), …]: the labelled receivers of the module docstring
    (``sinks``: the ``first-token`` heads too)."""
    lab = labels["label"].transpose("layer", "head").values
    stat = labels["label_statistic"].transpose("layer", "head").values
    keep = PATCHED_LABELS + (("first-token",) if sinks else ())
    return [(li, hi, str(stat[li, hi])) for li in range(1, lab.shape[0])
            for hi in range(lab.shape[1]) if lab[li, hi] in keep]


#: A source whose |attribution| reaches this fraction of the rule's floor is patched exactly
#: (the first-order estimate tracks the exact effect closely: Spearman 0.996 on SmolLM2).
ATTRIBUTION_FLOOR = 0.5


def exact_sources(ranked_weights, attribution, k: int, exact_all: bool, floor: float = np.inf):
    """The sources patched exactly for one receiver and kind: all, or the union of the top ``k``
    by weights (:func:`ranked_sources`), the top ``k`` by ``|attribution|`` ``(layer, H)`` and
    every source whose ``|attribution|`` reaches ``ATTRIBUTION_FLOOR × floor`` (``floor``: the
    rule's floor for this receiver), in weight order."""
    if exact_all:
        return [(m, s) for m, s, _, _ in ranked_weights]
    keep = {(m, s) for m, s, _, _ in ranked_weights[:k]}
    a = np.abs(np.asarray(attribution, dtype=np.float64))
    if np.isfinite(a).any():
        flat = np.where(np.isfinite(a), a, -np.inf).ravel()
        for rank, i in enumerate(np.argsort(-flat, kind="stable")):
            if not np.isfinite(flat[i]) or (rank >= k and flat[i] < ATTRIBUTION_FLOOR * floor):
                break
            keep.add((int(i // a.shape[1]), int(i % a.shape[1])))
    return [(m, s) for m, s, _, _ in ranked_weights if (m, s) in keep]


def needs_check(row: dict, n_seq: int, ablation: str) -> bool:
    """Whether a row passes the rule under ``ablation`` (so its other counterfactual decides)."""
    from ..core.receiver import OUTPUT_CHANGE, TV

    return (ablation != "zero" and n_seq >= MIN_SEQUENCES
            and passes(row["effect_causal"], row["effect_se"], row["score_to"],
                       row["metric"] not in (TV, OUTPUT_CHANGE)))


def measure_counterfactuals(effects_of, rows, n_seq: int, ablation: str) -> None:
    """Each row's effects under every counterfactual: zero for all (``effect_zero``, its se),
    the other non-zero one where the row passes the rule under ``ablation`` or under zero (it
    decides; NaN elsewhere); ``effects_of(ablation, indices)`` gives the
    :class:`..core.receiver.Effect` of those rows."""
    for r in rows:
        r["ablation"] = ablation
        for a in ABLATIONS:
            r["effect_" + a] = r["effect_causal"] if a == ablation else np.nan
        r["effect_zero_se"] = r["effect_se"] if ablation == "zero" else np.nan
    if not rows or ablation == "zero":
        return
    for i, e in zip(range(len(rows)), effects_of("zero", list(range(len(rows)))), strict=True):
        rows[i]["effect_zero"], rows[i]["effect_zero_se"] = e.effect, e.se
    check = [i for i, r in enumerate(rows) if needs_check(r, n_seq, ablation)
             or needs_check(_under_zero(r), n_seq, ablation)]
    if check:
        for i, e in zip(check, effects_of(other(ablation), check), strict=True):
            rows[i]["effect_" + other(ablation)] = e.effect


def _under_zero(row: dict) -> dict:
    """``row`` with its zero-ablation effect and se as its effect."""
    return {**row, "effect_causal": row["effect_zero"], "effect_se": row["effect_zero_se"]}


def judge(singles: list[dict], joint, *, labelled: bool, n_seq: int,
          ablation: str = DEFAULT_ABLATION) -> list[dict]:
    """The rule of the module docstring on one receiver's rows of one kind and path (dicts
    with ``effect_causal``, ``effect_se``, ``score_to``, ``metric`` and, where measured,
    ``effect_zero``/``effect_zero_se`` and ``effect_<other counterfactual>``), updated in place
    and returned; ``joint``: the :class:`..core.receiver.Effect` of every earlier source
    replaced."""
    from ..core.receiver import OUTPUT_CHANGE, TV

    enough = n_seq >= MIN_SEQUENCES
    check = other(ablation)
    for r in singles:
        is_score = r["metric"] not in (TV, OUTPUT_CHANGE)
        ok = enough and passes(r["effect_causal"], r["effect_se"], r["score_to"], is_score)
        stands = ok and (ablation == "zero" or keeps(r["effect_causal"],
                                                     r.get("effect_" + check, np.nan),
                                                     floor_of(r["score_to"], is_score)))
        zero = r.get("effect_zero", np.nan)
        zero_ok = (enough and ablation != "zero" and passes(
            zero, r.get("effect_zero_se", np.nan), r["score_to"], is_score))
        # zero only: the other non-zero counterfactual measured and under the floor
        seen = r.get("effect_" + check, np.nan)
        other_too = bool(np.isfinite(seen) and seen * zero > 0
                         and abs(seen) >= floor_of(r["score_to"], is_score))
        r["depends"] = ("" if stands else "counterfactual" if ok or (zero_ok and other_too)
                        else "zero" if zero_ok and np.isfinite(seen) else "")
        r["confirmed"] = bool(stands and labelled)
        r["dependency"] = bool(stands and not labelled)
        r["role"] = ("changes" if not is_score else
                     "supports" if r["effect_causal"] > 0 else "suppresses")
    is_score = joint.metric not in (TV, OUTPUT_CHANGE)
    joint_ok = enough and passes(joint.effect, joint.se, joint.base, is_score)
    conf = [r for r in singles if r["confirmed"]]
    total = float(sum(r["effect_causal"] for r in conf))
    significant = bool(np.isfinite(joint.effect) and np.isfinite(joint.se)
                       and abs(joint.effect) >= CONFIRM_SE * joint.se)
    contradicts = bool(conf and significant and is_score
                       and np.sign(total) != np.sign(joint.effect))
    for r in singles:
        r.update(joint_effect=joint.effect, joint_se=joint.se,
                 redundant=bool(not conf and joint_ok and labelled),
                 joint_contradicts=contradicts, dominant=False)
    return singles


def mark_dominant(rows: list[dict]) -> None:
    """Per receiver and kind, the supporting confirmed row with the largest effect."""
    best: dict = {}
    for r in rows:
        if r["confirmed"] and r["role"] in ("supports", "changes"):
            key = (r["layer_to"], r["head_to"], r["kind"])
            if key not in best or r["effect_causal"] > best[key]["effect_causal"]:
                best[key] = r
    for r in best.values():
        r["dominant"] = True



__all__ = ["ATTRIBUTION_FLOOR", "CONFIRM_FRACTION", "CONFIRM_SE", "DEFAULT_K", "EXACT_BUDGET",
           "FALSE_RATE", "MIN_SEQUENCES", "PATCHED_LABELS", "UNLABELLED_RECEIVERS", "Search",
           "check_composition", "check_lengths", "exact_sources", "false_rate", "floor_of",
           "head_name", "judge", "keeps", "mark_dominant", "measure_counterfactuals",
           "needs_check", "passes", "ranked_sources", "receivers"]
