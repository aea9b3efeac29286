"""``rmtbase study NAME [--quick] [--seed S] [--model M] [--text FILE] --out DIR`` and
``rmtbase study --list``. ``--model`` and ``--text`` go to studies that take them
(``head_function``); any other study refuses them with one line."""

from __future__ import annotations

import time

from . import _output as output

#: What the studies that train or download do, and what they cost (measured: docs/circuits.md).
EPILOG = (
    "circuits trains one small GPT-2 (transformers' GPT2LMHeadModel) for --seed on the CPU, "
    "one torch thread: 2 layers x 4 heads, d 64, attention only (MLPs zeroed and frozen), on "
    "random sequences of 32 token kinds with repeated segments, 1,500 steps (43-80 CPU-s of "
    "training, measured on a shared 2-core machine); it keeps 10 checkpoints as Hugging Face "
    "folders in OUT/circuits/checkpoints, probes each, and scores K-composition (4,000-draw "
    "null), copying and the single-head profile: seed 0 took 52 CPU-s in all, 163 s wall at "
    "load 15. --quick trains 30 steps (about 11 CPU-s in all; no circuit forms). Models with "
    "MLPs and 3-4 layers: docs/circuits.md.")


def add_parser(sub):
    p = sub.add_parser("study", help="run a study that reproduces a seed's figures and claims",
                       description="Run a study (figures + data into OUT/NAME), or list them.",
                       epilog=EPILOG)
    p.add_argument("name", nargs="?", help="study name (see --list)")
    p.add_argument("--list", action="store_true", help="print the study names, one per line")
    p.add_argument("--quick", action="store_true", help="reduced size (seconds, for CI)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (default 0)")
    p.add_argument("--model", default=None,
                   help="model folder, .gguf or hub id, for studies of one model "
                        "(head_function; default the embedded MiniLM)")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="UTF-8 text for studies that probe attention (head_function)")
    output.add_out(p, "out/studies", more="; the study writes OUT/NAME all or nothing; an "
                                          "earlier output of the same study is replaced only "
                                          "with --overwrite")
    output.add_overwrite(p, "", help="replace an earlier output of the same study in OUT/NAME")
    output.add_json(p, "print one JSON document (figures, data files, summary) on stdout")
    return p


def run(args) -> int:
    from ..errors import InputError, check_seed
    from ..studies import STUDIES, names
    from ..studies import run as run_study

    if args.list:
        for n in names():
            print(n)
        return 0
    if not args.name:
        raise InputError("give a study NAME or --list; studies: " + ", ".join(STUDIES))
    try:  # before any work: torch and JAX take seeds of at most 64 and 32 bits
        check_seed(args.seed)
    except InputError:
        raise InputError(f"--seed must be an integer in [0, 2**32), got {args.seed}") from None
    options = {k: getattr(args, k) for k in ("model", "text") if getattr(args, k) is not None}
    t0 = time.perf_counter()
    result = run_study(args.name, args.out, quick=args.quick, seed=args.seed,
                       overwrite=args.overwrite, **options)
    dt = time.perf_counter() - t0
    if args.json:
        from .json_documents import print_json, study_document

        print_json(study_document(args.name, result, dt))
        return 0
    for path in result.get("figures", []) + result.get("data", []):
        print(path)
    for k, v in result.get("summary", {}).items():
        print(f"  {k}: {v}")
    print(f"study {args.name} done in {dt:.1f} s")
    return 0
