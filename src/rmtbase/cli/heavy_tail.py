"""``rmtbase heavy-tail [MODEL ...]``: WeightWatcher's heavy-tail metrics of every weight matrix,
each against the null of Gaussian matrices of its shape, storage and norm, without a head score.

Wraps :func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail` (one model; ``--base``: ΔW
of a fine-tune or a LoRA adapter), :func:`~rmtbase.scoring.collection.heavy_tail.
heavy_tail_collection` (several checkpoints or models, ``--workers``/``--scheduler``: one Dask
task each) and :func:`rmtbase.report.heavy_tail_write.write_heavy_tail_folder`; ``--describe``
lists the matrices' shapes (WeightWatcher's ``describe()``) and computes nothing."""

from __future__ import annotations

import argparse
import time

from ..stats.names import QUANTIZED_NULL
from ..stats.storage import REGISTRY as STORAGE_REGISTRY
from . import _output as output
from ._common import live_choice, positive_int
from ._fdr import add_fdr, fdr_level


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "heavy-tail",
        help="WeightWatcher's heavy-tail metrics of every matrix against their null",
        description=(
            "WeightWatcher 0.7.7's metrics of every weight matrix per layer (alpha, the "
            "power-law exponent of the eigenvalues' tail; alpha_weighted, log norms, stable "
            "rank, MP soft rank, spikes, KS distance, rand_distance), each with a p against "
            "i.i.d. Gaussian matrices of its shape and storage at its Frobenius norm. Prints per "
            "component kind alpha's range, how many the folklore band 2 <= alpha <= 6 calls "
            "well trained and how many differ from random; writes heavy_tail.nc, "
            "heavy_tail.csv, summary.txt, figures/ and report.html to --out (default "
            "rmtbase-heavy-tail/<model name>), all or nothing."))
    p.add_argument("model", nargs="*", default=None,
                   help="hub id, local folder or .gguf file (default: the embedded "
                        "all-MiniLM-L6-v2); several, or a glob such as 'ckpts/step*': one table "
                        "with a leading checkpoint/model dimension and alpha against the step")
    p.add_argument("--base", metavar="BASE", default=None,
                   help="the metrics of what changed from BASE: dW = W - W_base of a fine-tune, "
                        "or dW = (alpha/r) B A of a PEFT LoRA adapter MODEL (null: float32)")
    p.add_argument("--revision", default=None,
                   help="model revision; several, comma-separated, make a trajectory")
    p.add_argument("--collection", choices=("checkpoint", "model"), default=None,
                   help="name of the leading dimension for several entries")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None,
                       help="several entries as Dask tasks on a loopback cluster of N processes")
    where.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="several entries as Dask tasks on this scheduler")
    p.add_argument("--components", metavar="LIST", default="all",
                   help="matrices per layer, comma-separated among q,k,v,o,ffn,ffn_gate,ffn_up,"
                        "ffn_down,ffn_in,ffn_out,router, or 'all' (default)")
    p.add_argument("--draws", type=positive_int, default=None,
                   help="null draws per matrix shape and storage (default 200; cached)")
    p.add_argument("--seed", type=positive_int, default=0, help="null seed")
    add_fdr(p, "the matrices' alpha p-values")
    p.add_argument("--quantized-null", type=live_choice(QUANTIZED_NULL, STORAGE_REGISTRY),
                   metavar="FORMAT", default="auto",
                   help="the null's storage for weights in a block format: auto (the GGUF "
                        "tensor's own type, or detected; default), none (float), or a format")
    p.add_argument("--no-rand-distance", action="store_true",
                   help="skip rand_distance (a second eigendecomposition per matrix; "
                        "WeightWatcher's analyze() skips it by default)")
    p.add_argument("--describe", action="store_true",
                   help="only list the matrices and their shapes (WeightWatcher's describe())")
    p.add_argument("--top", type=positive_int, default=3,
                   help="matrices furthest from their null named on the terminal")
    p.add_argument("--allow-pickle", action="store_true",
                   help="allow loading pickled (.bin) weights; only for files you trust")
    output.add_out(p, None, "rmtbase-heavy-tail/<model name>")
    output.add_overwrite(p, "rmtbase heavy-tail", "; a folder rmtbase did not write is never "
                                                  "replaced")
    output.add_json(p, "print one JSON document on stdout (each matrix's alpha with its p and "
                       "null band, the kinds, the model's means, the files) instead of tables")
    output.add_no_figures(p)
    output.add_quiet(p)
    return p


def early(args: argparse.Namespace) -> None:
    """The checks that need no heavy import: the level, --out, combinations."""
    from ..errors import InputError

    fdr_level(args)
    output.early_out(args)
    if args.describe and (args.json or args.out is not None):
        raise InputError("--describe prints the matrices' shapes; it writes no --out or --json")


def _plan(args):
    """(models, revisions, several, components) checked before any work."""
    from ..errors import InputError
    from ..models.components import parse_components
    from . import model_args

    models = model_args.expand_models(args.model or [])
    revisions = model_args.revisions(args.revision)
    several = len(models) > 1 or (revisions is not None and len(revisions) > 1)
    if not several and (args.workers is not None or args.scheduler is not None):
        raise InputError("--workers/--scheduler distribute several checkpoints or models; "
                         "give more than one")
    if not several and args.collection is not None:
        raise InputError("--collection names the dimension of several checkpoints or models")
    if args.base is not None and not models:
        raise InputError("--base needs the MODEL (a fine-tune or LoRA adapter) it is the base of")
    if args.base is None:
        from ..models.lora import is_lora

        for m in models:
            if is_lora(m):
                raise InputError(f"{m} is a PEFT LoRA adapter: give its base model with --base "
                                 "(the table is then of dW = (alpha/r) B A)")
    for m in [*models, args.base]:
        model_args.check_local(m)
    return models, revisions, several, parse_components(args.components)


def run(args: argparse.Namespace) -> int:
    """Check, score (one model or a collection), write, print the summary (or --json)."""
    t0 = time.perf_counter()
    models, revisions, several, components = _plan(args)
    if args.describe:
        from ..report.heavy_tail_text import describe_lines

        print("\n".join(describe_lines(models[0] if models else None, base=args.base,
                                       components=components, revision=revisions and
                                       revisions[0], allow_pickle=args.allow_pickle)))
        return 0
    from ..files.output import check_output_dir
    from ..report.heavy_tail_write import KIND, summary_lines, write_heavy_tail_folder
    from .default_out import default_out

    if args.out is None:
        args.out = default_out(models, revisions, base=args.base, root="rmtbase-heavy-tail")
    check_output_dir(args.out, KIND, overwrite=args.overwrite)  # before any work
    options = dict(components=components, draws=args.draws, seed=args.seed,
                   randomize=not args.no_rand_distance, allow_pickle=args.allow_pickle,
                   quantized_null=args.quantized_null, fdr=args.fdr, progress=not args.quiet)
    if several:
        from ..scoring.collection.heavy_tail import heavy_tail_collection

        ds = heavy_tail_collection(models, revisions=revisions, dim=args.collection,
                                   base=args.base, workers=args.workers,
                                   scheduler=args.scheduler, **options)
        dim = ds.attrs["collection"]
    else:
        from ..scoring.matrices.heavy_tail import score_heavy_tail

        ds = score_heavy_tail(models[0] if models else None, base=args.base,
                              revision=revisions and revisions[0], **options)
        dim = None
    written = write_heavy_tail_folder(ds, args.out, figures=not args.no_figures, top=args.top,
                                      dim=dim)
    output.say_wrote(written, args.out, t0, report=True)
    if args.json:
        from ..report.heavy_tail_json import heavy_tail_document
        from .json_documents import print_json, written_doc

        print_json({**written_doc("heavy-tail", args.out, written),
                    **heavy_tail_document(ds, dim)})
    else:
        print("\n".join(summary_lines(ds, dim, args.top)))
    return 0


__all__ = ["add_parser", "early", "run"]
