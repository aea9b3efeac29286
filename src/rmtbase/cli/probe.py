"""``rmtbase probe [MODEL] [--text FILE] [--out DIR]``: what each attention head does on text
(:func:`rmtbase.probe.probe_model`, :func:`rmtbase.probe.output.write_probe`); no MODEL: the
embedded MiniLM on the shipped public-domain English text."""

from __future__ import annotations

import argparse
import time

from ..errors import InputError
from . import _output as output
from ._common import positive_int


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "probe",
        help="measure what each attention head does on text",
        description=(
            "Run a model on text (default: shipped public-domain English prose, 6,701 MiniLM "
            "tokens) in windows, and write per layer and head the mean attention entropy, "
            "previous-, next- (encoders) and first-token attention, self attention and mean "
            "attention distance: probe.nc, probe.csv, probe.png and manifest.json, all or "
            "nothing."),
    )
    p.add_argument("model", nargs="?", default=None,
                   help="local folder with config, weights and tokenizer, a .gguf file, or a "
                        "hub id (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="UTF-8 text file (default: the shipped English text)")
    p.add_argument("--window", type=positive_int, default=None,
                   help="tokens per window, special tokens included (default "
                        "min(256, max_position_embeddings))")
    output.add_out(p, None, "rmtbase-probe/<model name>")
    output.add_overwrite(p, "rmtbase probe")
    output.add_json(p, "print one JSON document (the model, the text, each head's behaviours, "
                       "files written) on stdout instead of the table")
    output.add_no_figures(p, "skip probe.png")
    output.add_quiet(p)
    return p


def resolve_model(model):
    """(model, name) with the embedded default for None."""
    if model is not None:
        return model, None
    from ..models import default_model_path
    from ..probe.run import DEFAULT_MODEL_NAME

    return default_model_path(), DEFAULT_MODEL_NAME


def top_lines(ds, n: int = 3) -> list[str]:
    """The strongest previous-, next-, first-token, duplicate-token and induction heads, one
    line each."""
    import numpy as np

    lines = []
    for b in ("prev_token", "next_token", "first_token", "duplicate_token", "induction"):
        v = np.asarray(ds[b].values, dtype=float)
        if not np.isfinite(v).any():
            continue
        order = np.argsort(np.where(np.isfinite(v), v, -np.inf), axis=None)[::-1][:n]
        cells = [np.unravel_index(k, v.shape) for k in order]
        lines.append(f"{b:12s} " + ", ".join(f"L{int(ds['layer'][i])} H{int(ds['head'][j])} "
                                              f"{v[i, j]:.3f}" for i, j in cells))
    return lines


#: Start-up check (rmtbase.cli): an --out that is a file, refused before the imports.
early = output.early_out


def run(args: argparse.Namespace) -> int:
    if args.window is not None and args.window < 3:
        raise InputError(f"--window must be at least 3, got {args.window}")
    from ..files.output import check_output_dir
    from ..probe import probe_model, read_text
    from ..probe.output import KIND, write_probe
    from .model_args import check_local

    check_local(args.model)
    if args.out is None:
        from pathlib import Path

        from .default_out import model_stem

        args.out = str(Path("rmtbase-probe") / model_stem(args.model))
    check_output_dir(args.out, KIND, overwrite=args.overwrite)
    text = read_text(args.text)  # checked before the model loads
    model, name = resolve_model(args.model)
    t0 = time.perf_counter()
    ds = probe_model(model, text=text, window=args.window, name=name, progress=not args.quiet)
    written = write_probe(ds, args.out, figures=not args.no_figures)
    a = ds.attrs
    if args.json:
        from .json_documents import print_json, probe_document

        print_json(probe_document(ds, args.out, written))
        output.say_wrote(written, args.out, t0)
        return 0
    print(f"{a['model']}: {a['n_tokens']} tokens in {a['n_windows']} windows of {a['window']} "
          f"({a['attention']}), {ds.sizes['layer']} layers x {ds.sizes['head']} heads")
    print("\n".join(top_lines(ds)))
    output.say_wrote(written, args.out, t0)
    return 0
