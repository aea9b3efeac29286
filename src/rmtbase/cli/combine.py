"""``rmtbase combine ENTRY... --out DIR``: assemble entries scored anywhere into one collection.

An ENTRY is an entry file or folder of them (``OUT.entries`` of ``rmtbase score A B …``) or a
one-model ``rmtbase score`` folder (``scores.nc``). The report is ``rmtbase score``'s, written
all or nothing; an earlier output is replaced only with ``--overwrite``. Every entry is verified
(:func:`rmtbase.scoring.collection.entries.check_content`: ``entry_sha256`` or its ``manifest.json``): a
mismatch is refused always, content without a hash unless ``--unverified`` (with a warning).
Only the heads' scores are carried; the other ``*.nc`` of a score folder are left out, said in
one line."""

from __future__ import annotations

import sys
import time

from . import _output as output


def add_parser(sub):
    p = sub.add_parser(
        "combine", help="assemble scored entries into one collection",
        description=("Assemble entry files (OUT.entries of 'rmtbase score A B C ...') or "
                     "'rmtbase score' output folders of single models into one collection "
                     "and write its report (as 'rmtbase score' on several models does)."))
    p.add_argument("entries", nargs="+", metavar="ENTRY",
                   help="entry files, folders of them, or score output folders")
    output.add_out(p, "./rmtbase-collection")
    output.add_overwrite(p, "rmtbase score or combine",
                         "; a folder rmtbase did not write is refused either way")
    p.add_argument("--collection", choices=("checkpoint", "model"), default=None,
                   help="name of the leading dimension (default: checkpoint for entries of one "
                        "shape, else model)")
    p.add_argument("--unverified", action="store_true",
                   help="also take entries that hold no content hash (entry_sha256) and are "
                        "listed in no manifest.json (an earlier rmtbase, a file moved out of "
                        "its folder): their content cannot be checked, so they are taken as "
                        "they are, with a warning naming each; content that does not match "
                        "its hash or its manifest is refused either way")
    output.add_no_figures(p)
    p.add_argument("--top", type=int, default=3, help="heads shown per entry (at most 3)")
    return p


#: Start-up check (rmtbase.cli): an --out that is a file, refused before the imports.
early = output.early_out


def run(args) -> int:
    from ..errors import InputError
    from ..files.output import check_output_dir
    from ..report.collection_report import entry_lines
    from ..report.write import write_report
    from ..scoring.collection.combine import combine, folder_labels
    from ..scoring.collection.entries import load_entries

    if args.top < 0:
        raise InputError(f"--top must be >= 0, got {args.top}")
    # before any file is read; the report is a score's (kind "rmtbase score"), so an earlier
    # a score or combine output is replaced only with --overwrite
    check_output_dir(args.out, "rmtbase score", overwrite=args.overwrite)
    t0 = time.perf_counter()
    def warn(text):
        print(f"rmtbase: warning: {text}", file=sys.stderr)

    found = [(lab, ds, p) for p in args.entries
             for lab, ds in load_entries([p], unverified=args.unverified, warn=warn)]
    if len(found) < 2:
        raise InputError("combine needs at least two entries")
    left = left_out(args.entries)
    if left:  # said before the work: what the collection will not hold
        more = f" and {len(left) - 4} more" if len(left) > 4 else ""
        print(f"rmtbase: combine: the collection holds the heads' scores only; left out: "
              f"{', '.join(left[:4])}{more}", file=sys.stderr)
    # two runs of one model are told apart by their folders (a, b), not #0, #1
    labels = folder_labels([lab for lab, _, _ in found], [p for _, _, p in found])
    datasets = [ds for _, ds, _ in found]
    dim = args.collection or ("checkpoint" if len({_shape(ds) for ds in datasets}) == 1
                              else "model")
    sizes = {(ds.attrs.get("d"), ds.attrs.get("d_h"), ds.attrs.get("null_storage"),
              *(str(ds.attrs.get(k)) for k in ("baseline_draws", "joint_null_draws",
                                               "spectral_null_draws", "profile_null_draws")))
             for ds in datasets}
    if len({k[:3] for k in sizes}) < len(sizes):
        print("rmtbase: warning: entries of one shape were scored against nulls of different "
              "sizes (each keeps its own; 'rmtbase score A B ...' puts them on one)",
              file=sys.stderr)
    ds = combine(datasets, labels, dim)
    ds.attrs["computed_by"] = f"combined from {len(datasets)} entries"
    written = write_report(ds, args.out, figures=not args.no_figures, top=args.top)
    print("\n".join(entry_lines(ds)))
    output.say_wrote(written, args.out, t0)
    return 0


def left_out(paths) -> list[str]:
    """The data files of the score folders among ``paths`` that a collection does not carry:
    every ``*.nc`` beside ``scores.nc`` (composition.nc, circuits.nc, components.nc, …)."""
    from pathlib import Path

    return [str(f) for p in map(Path, paths) if (p / "scores.nc").is_file()
            for f in sorted(p.glob("*.nc")) if f.name != "scores.nc"]


def _shape(ds) -> tuple:
    a = ds.attrs
    return tuple(str(a.get(k)) for k in ("architecture", "d", "d_h", "n_layers", "n_heads",
                                         "n_kv_heads"))
