"""The multiple-testing level of the commands that flag by Benjamini–Hochberg: ``--fdr`` (the
false discovery rate), with ``--alpha`` kept as its deprecated spelling (one FutureWarning),
so that "alpha" names the power-law exponent in every heavy-tail output."""

from __future__ import annotations

import argparse
import warnings

from ..errors import InputError
from ._common import number

#: The level when neither option is given.
DEFAULT_FDR = 0.05
DEPRECATED = ("--alpha is deprecated: it is the Benjamini-Hochberg level, now --fdr ('alpha' "
              "is the power-law exponent in the heavy-tail outputs)")


def add_fdr(p: argparse.ArgumentParser, what: str) -> None:
    """``--fdr Q`` (the Benjamini–Hochberg level over ``what``) and the deprecated ``--alpha``."""
    p.add_argument("--fdr", type=number, default=None, metavar="Q",
                   help=f"false discovery rate of the Benjamini-Hochberg step-up over {what} "
                        f"(default {DEFAULT_FDR})")
    p.add_argument("--alpha", type=number, default=None, metavar="Q",
                   help="deprecated spelling of --fdr")


def fdr_level(args: argparse.Namespace) -> float:
    """The level the options give (``args.fdr`` set to it): --fdr, else --alpha with one
    FutureWarning, else :data:`DEFAULT_FDR`; both given is refused in one line."""
    if getattr(args, "_fdr_from", None) is not None:
        return args.fdr
    if args.alpha is not None:
        if args.fdr is not None:
            raise InputError("give the level once: --fdr (--alpha is its deprecated spelling)")
        warnings.warn(DEPRECATED, FutureWarning, stacklevel=2)
        args.fdr, args._fdr_from = args.alpha, "--alpha"
    else:
        args._fdr_from = "--fdr"
        if args.fdr is None:
            args.fdr = DEFAULT_FDR
    return args.fdr


__all__ = ["DEFAULT_FDR", "DEPRECATED", "add_fdr", "fdr_level"]
