"""What is checked about the null before and after it is drawn: enough element permutations,
memory for the draws asked for (both before any weight is read), and statistics the null leaves
undefined (left out of the tests and reported, never a crash)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...stats.null_protocol import Null
from ...stats.permutation_null import PermutationNull
from ..settings import check_null_storage  # noqa: F401 - re-exported

#: Fewest permutations with W_QK element statistics the permutation null can decide on
#: (:attr:`rmtbase.stats.null_kind.PermutationNull.min_element_draws`).
MIN_ELEMENT_DRAWS = PermutationNull.min_element_draws


def check_element_draws(null: Null, kind: str, element_draws,
                        option: str = "element_draws"):
    """InputError, up front, if ``null`` draws element statistics per head
    (:meth:`~rmtbase.stats.null_kind.Null.needs_element_draws`: the permutation null) and
    ``element_draws`` is below its minimum (it used to fail after all the work)."""
    if null.needs_element_draws(kind) and int(element_draws) < null.min_element_draws:
        raise InputError(f"{option} {element_draws} is too few: the permutation null's "
                         f"per-head decision needs at least {null.min_element_draws} permutations "
                         "with W_QK's element statistics (use --stats spectral to leave them "
                         "out)")


def check_null_size(info, kind: str, names, draws, null: Null,
                    element_draws: int) -> None:
    """InputError before any read or draw if the null draws asked for do not fit in memory
    (:func:`rmtbase.baseline.limits.check_stored_values`); TableError if a shipped table lacks a
    statistic the run reads."""
    from types import SimpleNamespace

    from ...baseline.cache import TABLE_DRAWS
    from ...baseline.limits import check_stored_values
    from ...baseline.shipped import check_shipped_tables
    from ...baseline.table_contents import stat_names

    n_stats = len(names) if names is not None else len(stat_names(SimpleNamespace(stats=kind)))
    if null.shared_table:
        n = max(int(draws or 0), TABLE_DRAWS)
        check_stored_values(n_stats * n, 8, f"a null table of {n_stats} statistics x {n} draws")
        check_shipped_tables(int(info.d), int(info.d_h), kind)
    else:
        heads = int(info.n_layers) * int(info.n_heads)
        n = int(draws or TABLE_DRAWS) + int(element_draws)
        check_stored_values(heads * n_stats * n, 8,
                            f"permutation draws of {heads} heads x {n_stats} statistics x "
                            f"{n} permutations")


#: A statistic whose null draws are finite in fewer than this fraction is undefined under the
#: null: it is left out of the tests and reported (a p-value from the rest would be conditional).
MIN_DEFINED = 0.5


def undefined_under_null(joint: dict, names) -> dict:
    """{name: (finite draws, draws)} for the statistics among ``names`` whose null draws in
    ``joint`` are finite in fewer than :data:`MIN_DEFINED` of the draws (at least 2 needed)."""
    out = {}
    for k in names:
        x = np.asarray(joint[k])
        n_fin = int(np.isfinite(x).sum())
        if n_fin < max(2.0, MIN_DEFINED * x.size):
            out[k] = (n_fin, int(x.size))
    return out


def report_undefined(ds, undefined: dict, n_heads: int) -> None:
    """Record statistics left out as undefined under the null in ``nan_tests`` and
    ``undefined_under_null`` (the summary lists ``nan_tests``). ``undefined``: {name: (finite
    draws, draws, storage of the null they were undefined under)}."""
    import json

    nan = json.loads(ds.attrs.get("nan_tests", "{}") or "{}")
    for k, (fin, n, storage) in sorted(undefined.items()):
        nan[k] = {"count": n_heads, "reason": f"undefined under the {storage} null: "
                  f"{fin} of {n} null draws finite; left out of the tests"}
    ds.attrs["nan_tests"] = json.dumps(nan, sort_keys=True)
    ds.attrs["undefined_under_null"] = ",".join(sorted(undefined))


__all__ = ["MIN_DEFINED", "MIN_ELEMENT_DRAWS", "check_element_draws", "check_null_size",
           "check_null_storage",
           "report_undefined", "undefined_under_null"]
