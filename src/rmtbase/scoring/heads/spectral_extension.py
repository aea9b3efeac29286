"""The spectral reference grown to the next size of its ladder
(:func:`rmtbase.scoring.stopping.rule.next_size`) in one look (:func:`extend_spectral`): while
some head is unsettled (:func:`rmtbase.scoring.stopping.rule.unsettled`), or with ``max_draws``
up to it where a head near a flag lies beyond all but 10 draws (Besag & Clifford 1991). Under the
stopping rule a step the growth budget cannot pay for
(:class:`~rmtbase.scoring.stopping.budget.GrowthBudget`) is not taken."""

from __future__ import annotations

import numpy as np

from ...decision.scale import normalise
from ...decision.tails import TailModel
from ..measures.verdict import Decision, reference_groups
from ..stopping.rule import next_size, unsettled


def _thin_spectral(ds, values, ref, names, alpha) -> list[str]:
    """Spectral statistics on which a head that is, or is close to being, flagged
    (head q ≤ 2α) has fewer than 10 null draws beyond it: there more draws turn an
    extrapolated p into an empirical one (Besag & Clifford 1991's sequential rule)."""
    near = np.asarray(ds["head_q_value"].values <= 2 * alpha)
    if not near.any():
        return []
    out = []
    for s in names:
        model = TailModel(normalise(s, ref[s], ref["q.rms"], ref["k.rms"]))
        if model.needs_more(normalise(s, values[s], values["q.rms"], values["k.rms"])[near]):
            out.append(s)
    return out


def _why_decide(g, open_heads, counts) -> str | None:
    """Why reference ``g`` is extended under the stopping rule (None: it is not)."""
    from .stopping_text import open_reasons

    if not open_heads[g.rows].any():
        return None
    why = f"{int(open_heads[g.rows].sum())} heads' decisions are not settled"
    if counts is not None:
        mine = np.zeros_like(open_heads)
        mine[g.rows] = open_heads[g.rows]
        why += f" ({open_reasons(mine, *counts)})"
    return why


def _why_tail(g, ds, values, names, refs, alpha) -> str | None:
    """Why reference ``g`` is extended under the ``max_draws`` rule (None: it is not)."""
    part = ds.isel(layer=g.rows) if len(refs) > 1 else ds
    sub = {k: v[g.rows] for k, v in values.items()} if len(refs) > 1 else values
    thin = _thin_spectral(part, sub, g.spectral_ref, names, alpha)
    if not thin:
        return None
    return (f"heads near a flag lie beyond all but a few of {g.spectral_ref['q.rms'].size} "
            f"null draws of {', '.join(thin)}")


def extend_spectral(refs, names, values, ds, how: Decision, cap, n_looks, said=None):
    """One look: extend every reference that needs it; returns (grown, settled). ``said``: the
    references whose growth plan was already said (a set this adds to; the plan line, with its
    estimated cost, is said before a reference's first extension)."""
    from ...progress import message
    from .stopping_text import tail_counts

    decide = how.max_draws is None
    open_heads, counts, settled = None, None, True
    if decide:
        open_heads = unsettled(reference_groups(refs), values, names, alpha=how.alpha,
                               unreliable=how.unreliable, n_looks=n_looks)
        settled = not open_heads.any()
        if how.progress and not settled:  # which heads and statistics
            counts = tail_counts(reference_groups(refs), values, names)
    grown = False
    for g in refs:
        have = g.spectral_ref["q.rms"].size
        if not g.can_extend() or have >= cap:
            continue
        why = _why_decide(g, open_heads, counts) if decide else \
            _why_tail(g, ds, values, names, refs, how.alpha)
        if why is None:
            continue
        n_next = next_size(have, cap)
        budget = getattr(how, "budget", None)
        if decide and budget is not None and not budget.afford(
                g.cells.d, g.cells.d_h, "spectral", have, n_next):
            if how.progress:
                message(f"rmtbase: {why}; the growth budget leaves the spectral null at {have} "
                        "draws (open heads are reported undecided)")
            continue
        if how.progress:
            if said is not None and id(g) not in said:
                from ...baseline.draw_cost import growth_line

                said.add(id(g))
                # float storages share the float32 spectral null (fast_spectral)
                message(growth_line(g.cells.d, g.cells.d_h, "spectral", "float32", have, cap))
                if budget is not None and budget.line():
                    message(budget.line())
            where = "" if len(refs) == 1 else f" ({g.storage} layers)"
            message(f"rmtbase: {why}; extending the spectral null{where} to {n_next}")
        got = g.extend(names, n_next)
        if how.progress and got != n_next:  # a larger shipped or cached table is used whole
            message(f"rmtbase: a stored spectral null of {got} draws serves it")
        grown = True
    return grown, settled
