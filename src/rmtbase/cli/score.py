"""``rmtbase score [MODEL ...]``: score attention heads against the random-matrix null.

Wraps :func:`rmtbase.pipeline.run_score` (one model, the embedded MiniLM by default: the score
and, with ``--composition``, ``--probe``, ``--ov``, ``--directions`` or ``--components``, its
further stages), :func:`rmtbase.scoring.collection.trajectory.score_collection` (several
models, checkpoint folders or globs, or ``--revision`` values: one ``scores.nc`` with a leading
``checkpoint`` or ``model`` dimension; Dask with ``--workers``/``--scheduler``) and its
``--components`` counterpart, :func:`rmtbase.scoring.matrices.delta.score_delta` (``--base``)
and :func:`rmtbase.report.write.write_report`. Checks: :mod:`.score_checks`; modes:
:mod:`.score_modes`. The command parses, calls and prints."""

from __future__ import annotations

import argparse
import time

from ..decision.axes import SHIPPED_AXES
from ..stats.gaussian_null import GaussianNull
from ..stats.names import QUANTIZED_NULL
from ..stats.null_registry import NULLS
from ..stats.null_registry import REGISTRY as NULL_REGISTRY
from ..stats.storage import REGISTRY as STORAGE_REGISTRY
from ..stats.storage import shipped_records
from . import _output as output
from . import score_modes as _modes
from ._common import live_choice, positive_int, stats_arg
from ._fdr import add_fdr
from .score_checks import (  # noqa: F401 - early: rmtbase.cli runs it at start-up
    checked,
    early,
    growth_budget,
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "score",
        help="score a model's heads against the null",
        description=(
            "Score every layer and head of a Hugging Face model (hub id or local folder) against "
            "a random-matrix null at the head's own (d, d_h, sigma_Q, sigma_K) and storage "
            "precision; one decision per head (BH over heads). With --components also every "
            "whole weight matrix per layer against i.i.d. Gaussian matrices of its shape and "
            "storage (one decision per matrix); with --heavy-tail WeightWatcher's heavy-tail "
            "metrics of every matrix against their null. Writes scores.nc, heads.csv, "
            "scores.csv, summary.txt, figures and manifest.json (and components.nc, "
            "components.csv) to --out (default rmtbase-score/<model name>), all or nothing: an "
            "earlier rmtbase score output there is replaced only with --overwrite, and a "
            "folder rmtbase did not write never is. --json prints one JSON document (the "
            "decision, each head's p, flag and profile, the null, the files) on stdout; "
            "--fail-on-flag exits 1 when any head is flagged."
        ),
    )
    p.add_argument("model", nargs="*", default=None,
                   help="hub id, local folder or .gguf file (default: the embedded "
                        "all-MiniLM-L6-v2); "
                        "several, or a glob such as 'ckpts/step*', score into one Dataset "
                        "with a leading checkpoint/model dimension")
    output.add_out(p, None, "rmtbase-score/<model name>, e.g. rmtbase-score/all-MiniLM-L6-v2")
    output.add_overwrite(p, "rmtbase score", "; a folder rmtbase did not write is never replaced")
    output.add_json(p, "print one JSON document on stdout (decision, heads with p, flag and "
                       "profile, null, storage, files written) instead of the tables")
    p.add_argument("--fail-on-flag", action="store_true",
                   help="exit with status 1 when any head (or --components matrix) is flagged, "
                        "for CI gates (the output is written first)")
    p.add_argument("--stats", type=stats_arg, default="all", metavar="STATS",
                   help="which statistics to score: all (default), spectral or elementwise, "
                        "then, comma-separated, statistics and axes to add: a plugin's, or "
                        "WeightWatcher's alpha of each head's W_QK (spectral,ww_alpha); "
                        "these join a score only when named")
    # the choices are live views of the registries, checked when given: help names the
    # shipped ones and loads no plugin
    p.add_argument("--null", type=live_choice(NULLS, NULL_REGISTRY), metavar="NULL",
                   default=GaussianNull.name,
                   help="gaussian: i.i.d. N(0, sigma^2) entries stored like the checkpoint "
                        "(default); permutation: each head's own entries shuffled (tests "
                        "structure beyond the entry law); or a null an installed plugin "
                        "registers (docs/extending.md)")
    p.add_argument("--quantized-null", type=live_choice(QUANTIZED_NULL, STORAGE_REGISTRY),
                   metavar="FORMAT",
                   default="auto",
                   help="null for weights stored in a block format: auto (the GGUF file's "
                        "tensor type, or detected on dequantised weights; default), none (float "
                        "null; histogram statistics left out), or force one ("
                        + ", ".join(shipped_quant_formats()) + ", or a plugin's)")
    p.add_argument("--revision", default=None,
                   help="model revision (hub branch, tag or commit); several, comma-separated "
                        "(step0,step1000,...), score a training trajectory")
    p.add_argument("--collection", choices=("checkpoint", "model"), default=None,
                   help="name of the leading dimension for several entries (default: "
                        "checkpoint for revisions or entries of one shape, else model)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None,
                       help="score the entries as Dask tasks on a loopback LocalCluster of N "
                            "processes (same numbers as one process)")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="score the entries as Dask tasks on this scheduler")
    p.add_argument("--base", metavar="BASE", default=None,
                   help="score what changed from BASE to MODEL, per head: dW_Q, dW_K against "
                        "i.i.d. Gaussian deltas at their own rms, plus ||dW||/||W_base||; MODEL "
                        "may be a PEFT LoRA adapter folder (dW = (alpha/r) B A)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="allow loading pickled (.bin) weights; only for files you trust")
    p.add_argument("--draws", type=positive_int, default=None,
                   help="minimum number of null draws (gaussian: per table; permutation: "
                        "spectral permutations per head, default 1000, x3 then x9 for a head "
                        "whose decision is open; given: fixed)")
    p.add_argument("--max-draws", type=positive_int, default=None,
                   help="extend the spectral null up to N draws where a head near a flag lies "
                        "in its tail (deeper p); default: only while a decision can change")
    p.add_argument("--growth-budget", type=growth_budget, default="auto", metavar="SECONDS",
                   help="CPU seconds (estimated) the null tables may grow for while a decision "
                        "is open; heads still open past it are reported undecided with their p "
                        "bracket. 'auto' (default): twice the heads' own measuring cost, at "
                        "least 300; 'none': grow until every decision is settled")
    p.add_argument("--element-draws", type=positive_int, default=200,
                   help="permutation null: permutations per head for W_QK element statistics "
                        "(default 200)")
    p.add_argument("--components", metavar="LIST", default=None,
                   help="also score whole weight matrices per layer, comma-separated among "
                        "q,k,v,o,ffn (the architecture's FFN matrices), ffn_gate, ffn_up, "
                        "ffn_down, ffn_in, ffn_out, router, or 'all': element statistics "
                        "(Weibull k and lambda at 80/90/100 %% trims, max/q99, kurtosis, "
                        "entropy, ...) against i.i.d. N(0, sigma^2) matrices of the same shape "
                        "and storage; writes components.nc, components.csv and figures "
                        "(several MODELs: one components.nc with the leading checkpoint/model "
                        "dimension and, for checkpoints, a k-versus-step figure)")
    p.add_argument("--component-draws", type=positive_int, default=None,
                   help="null draws per matrix shape for --components (default 400; cached)")
    p.add_argument("--heavy-tail", action="store_true",
                   help="also WeightWatcher 0.7.7's heavy-tail metrics of every weight matrix "
                        "per layer (alpha, alpha-weighted, log norms, stable rank, MP soft "
                        "rank, spikes, KS distance, rand_distance), each against i.i.d. "
                        "N(0, 1) matrices of its shape and storage at its Frobenius norm: "
                        "heavy_tail_* in scores.nc, heavy_tail.csv, "
                        "figures/heavy_tail_esd.png, a report section and a summary line "
                        "(one MODEL; the head scores are unchanged)")
    p.add_argument("--heavy-tail-draws", type=positive_int, default=None,
                   help="null draws per matrix shape for --heavy-tail (default 200; cached)")
    add_fdr(p, "heads (and --components matrices)")
    p.add_argument("--seed", type=positive_int, default=0, help="null table / permutation seed")
    p.add_argument("--top", type=positive_int, default=3,
                   help="heads shown per profile axis in the terminal table and summary.txt")
    output.add_no_figures(p)
    p.add_argument("--sort-by", metavar="ORDER", default=None,
                   help="order of heads in heads.csv's rank, the report and --json: departure "
                        "(default: each profile axis's effect in units of its null band, root "
                        "mean square over the tested axes), p (head p, the order of evidence), "
                        "or one profile axis (" + ", ".join(SHIPPED_AXES) + ", or a plugin's)")
    p.add_argument("--probe", action="store_true",
                   help="also run the attention probe (rmtbase probe) on text and add each "
                        "head's behaviour (behaviour_entropy, behaviour_prev_token, ...) to "
                        "scores.nc, heads.csv and the report's head drill-down; with "
                        "--composition also label every head by behaviour and screen and "
                        "path-patch every earlier source (q, k, v; direct and via MLPs) of "
                        "each head labelled other than a first-token sink: circuits.nc, and "
                        "the first screen leads with the circuits found (causal language "
                        "models; on repeated random tokens unless --text; `rmtbase circuits` "
                        "runs this search alone)")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="with --probe: UTF-8 text file (default: the shipped English text); "
                        "with --composition the circuit search labels and patches on it too")
    from .circuits import add_repeat_length

    add_repeat_length(p)
    p.add_argument("--ov", action="store_true",
                   help="also score each head's OV circuit W_OV = W_O,h W_V,h against the same "
                        "null: scores.nc gets a leading 'circuit' dimension (qk, ov) and the "
                        "report shows both side by side (one MODEL)")
    p.add_argument("--directions", action="store_true",
                   help="write directions.nc: each head's outlier singular values (above the "
                        "null's largest) with their left/right singular vectors, joinable on "
                        "(layer, head, circuit, index) (one MODEL)")
    p.add_argument("--composition", action="store_true",
                   help="also Q-/K-/V-composition of every cross-layer head pair against the "
                        "Gaussian-factor null, with each pair's standing (rank among its "
                        "receiver's sources and over its kind): composition.nc, "
                        "figures/composition.png (docs/composition.md); with --probe the "
                        "circuits confirmed by path patching (docs/circuits.md)")
    output.add_quiet(p)
    return p


def shipped_quant_formats() -> list[str]:
    """The shipped block and FP8 formats' names (loads no plugin)."""
    return [s.name for s in shipped_records() if s.is_quantised]


def run(args: argparse.Namespace) -> int:
    """Check every option, score in the mode asked for (several entries, --base, one model),
    write, print the tables (or --json), and exit 1 on a flag with --fail-on-flag."""
    plan = checked(args)
    show = _Show(args.json)
    t0 = time.perf_counter()
    mode = _modes.several if plan.several else \
        _modes.delta if args.base is not None else _modes.single
    scored = mode(args, plan, show)
    output.say_wrote(scored.written, args.out, t0, report=True)
    from .json_documents import EXIT_FLAGGED, any_flag, print_json, score_document

    if args.json:
        doc = score_document(scored.ds, args.out, scored.written, scored.cds)
        if scored.context is not None:  # what was found, and the circuits
            from ..report.composition_figure import composition_json

            ctx = scored.context
            doc["composition"] = {**composition_json(ctx["composition"], ctx["circuits"]),
                                  "found": ctx["found"]}
            if ctx["circuits"] is not None:
                doc["circuits"] = ctx["circuits"]
        print_json(doc)
    if args.fail_on_flag and any_flag(scored.ds, scored.cds):
        return EXIT_FLAGGED
    return 0


class _Show:
    """Prints the terminal tables on stdout, or nothing with --json (stdout is the JSON)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, text: str) -> None:
        if not self.quiet:
            from ..report.line_width import fit_text

            print(fit_text(text))
