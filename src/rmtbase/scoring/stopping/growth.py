"""One loop for the nulls that grow by groups along a fixed schedule until no decision is open:
the profile null (:mod:`rmtbase.scoring.profile.stopping`) and the composition and QK-overlap
nulls (:mod:`rmtbase.scoring.composition.stopping`). Every group's first size is drawn, then
each group with an open decision moves to its next size, each continuing the last."""

from __future__ import annotations


def grow_until_settled(size: dict, schedule, draw, open_groups, on_grow=None):
    """({group: table}, {group: n}): each group's table drawn at ``size[group]``, then grown along
    ``schedule`` (ascending sizes; the last is the full size) while ``open_groups(tables)`` names
    it. ``draw(group, n, previous)``: the first n draws, ``previous`` the group's last table (None
    at first); ``on_grow(group, n)`` is told before a group grows."""
    schedule = tuple(schedule)
    size = dict(size)
    tables = {g: draw(g, n, None) for g, n in size.items()}
    while True:
        grow = [g for g in open_groups(tables) if size[g] < schedule[-1]]
        if not grow:
            return tables, size
        for g in grow:
            size[g] = min(n for n in schedule if n > size[g])
            if on_grow is not None:
                on_grow(g, size[g])
            tables[g] = draw(g, size[g], tables[g])


__all__ = ["grow_until_settled"]
