"""Helpers shared by CLI commands: argparse types, the options of the analytic references
(shape, σ, ``--json``) and JSON output."""

from __future__ import annotations

import argparse
import sys

from ..errors import InputError, check_sigma
from ._output import add_json


def positive_int(text: str) -> int:
    """argparse type: an integer (d, d_h, draws); range checks happen in the library."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def number(text: str) -> float:
    """argparse type: a float."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def stats_arg(text: str):
    """``--stats``: a family (all, spectral, elementwise), or a family then the plugins'
    statistics and axes it adds, comma-separated (a tuple; checked by the score's settings)."""
    parts = [t.strip() for t in text.split(",")]
    if parts[0] not in ("all", "spectral", "elementwise") or not all(parts):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (all, spectral or "
                                         "elementwise, then plugins' statistics or axes)")
    return parts[0] if len(parts) == 1 else tuple(parts)


def live_choice(names, registry=None):
    """argparse type of an option whose choices are a live view of a registry (``names``,
    :class:`rmtbase.registry.Names`): checked when given, so help loads no plugin (argparse
    formats ``choices`` even under a metavar); a plugin that failed to load is refused with its
    own line (``registry``'s :meth:`~rmtbase.registry.Registry.unknown`)."""

    def choice(text: str) -> str:
        if text in names:
            return text
        what = f"invalid choice: {text!r} (choose from {', '.join(map(repr, names))})"
        line = registry.unknown(text, what) if registry else what
        raise argparse.ArgumentTypeError(line.removeprefix("rmtbase: "))
    choice.__name__ = "choice"
    return choice


#: ``--json`` of the analytic references: their numbers as one JSON object (:func:`emit`).
JSON_OBJECT_HELP = "print a JSON object"


def ginibre_choice(flag: str):
    """argparse type of ``--ensemble``, ``--kind``, ``--network``: the text, with the deprecated
    "gaussian" as "ginibre" and a note (:func:`rmtbase.analytic._network_kind.ginibre_alias`)."""
    from ..analytic._network_kind import ginibre_alias

    def ginibre(text: str) -> str:
        return ginibre_alias(text, flag, warn=lambda m: print(f"rmtbase: {m}", file=sys.stderr))
    return ginibre


def add_sigma_options(p: argparse.ArgumentParser) -> None:
    """``--sigma S`` or ``--sigma-q SQ --sigma-k SK`` (entry standard deviations)."""
    p.add_argument("--sigma", type=number, default=None, help="entry std of both W_Q and W_K (default 1)")
    p.add_argument("--sigma-q", type=number, default=None, help="entry std of W_Q")
    p.add_argument("--sigma-k", type=number, default=None, help="entry std of W_K")


def reference_parser(sub, name: str, help: str, description: str,
                     shape) -> argparse.ArgumentParser:
    """The sub-command ``name`` of an analytic reference: its required integer ``shape`` options
    (``(flag, help)`` pairs), the σ options and ``--json``."""
    p = sub.add_parser(name, help=help, description=description)
    for flag, text in shape:
        p.add_argument(flag, type=positive_int, required=True, help=text)
    add_sigma_options(p)
    add_json(p, JSON_OBJECT_HELP)
    return p


def resolve_sigmas(args: argparse.Namespace) -> tuple[float, float]:
    """(σ_Q, σ_K) from ``--sigma`` or ``--sigma-q/--sigma-k``; validated, default 1."""
    if args.sigma is not None and (args.sigma_q is not None or args.sigma_k is not None):
        raise InputError("give either --sigma or --sigma-q/--sigma-k, not both")
    if args.sigma is not None:
        s = check_sigma(args.sigma, "--sigma")
        return s, s
    if (args.sigma_q is None) != (args.sigma_k is None):
        raise InputError("--sigma-q and --sigma-k go together")
    if args.sigma_q is None:
        return 1.0, 1.0
    return check_sigma(args.sigma_q, "--sigma-q"), check_sigma(args.sigma_k, "--sigma-k")


#: Version of the layout of a command's ``--json`` document, named by its ``"schema"`` key
#: (``rmtbase.<command>/<version>``; docs/json.md). Raised, per command, when a key is removed
#: or changes meaning: ``circuits`` objects (in ``circuits`` and ``score``) lost ``explained``
#: and their ``effect_causal`` is under a counterfactual, hence 2.
JSON_SCHEMA_VERSION = 1
JSON_SCHEMA_VERSIONS = {"circuits": 2, "score": 2}


def json_schema(command: str) -> str:
    """``"rmtbase.<command>/<version>"``: the ``"schema"`` of ``rmtbase <command> --json``."""
    return f"rmtbase.{command}/{JSON_SCHEMA_VERSIONS.get(command, JSON_SCHEMA_VERSION)}"


def emit(obj: dict, as_json: bool, title: str = "", command: str | None = None) -> None:
    """Print ``obj`` as strict JSON (led by ``"schema"``: :func:`json_schema` of ``command``;
    a non-finite number as null) or as an aligned ``key  value`` listing."""
    if as_json:
        from ..files.strict_json import dumps

        if command is not None:
            obj = {"schema": json_schema(command), **obj}
        sys.stdout.write(dumps(obj, indent=2) + "\n")
        return
    if title:
        print(title)
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        print(f"  {k:<{width}}  {v}")
