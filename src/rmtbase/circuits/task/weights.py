"""The weights screen beside a task's head-to-head edges: for an edge ``a{l1}.h{h1} →
a{l2}.h{h2}<x>`` (``x`` the query, key or value input), the composition of that ordered head
pair of kind ``x`` (Elhage et al. 2021) from rmtbase's composition Dataset
(:func:`rmtbase.scoring.composition.run.composition`; the ``composition.nc`` of ``rmtbase
circuits`` or ``rmtbase score --composition``): its rank among the receiver's sources
(``composition_rank``, 1 = the strongest of the ``l2 · H`` earlier heads,
``composition_rank_source``), its one-sided p against the composition's null
(``composition_p``: the tail-resolving p where the Dataset has it) and its BH q over all pairs
(``composition_q``). Edges from the embeddings or an MLP, or into an MLP or the logits, have
no weights-screen entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import InputError
from ..core.graph import Graph, parse

#: The composition Dataset's variables read, and their names beside an edge.
COLUMNS = {"composition_rank_source": "composition_rank", "composition_p": "composition_p",
           "composition_q": "composition_q"}


def read_composition(source):
    """A composition Dataset from ``source`` (a path to a ``.nc`` file or a Dataset), checked
    to hold the variables of :data:`COLUMNS` over (kind, layer_from, head_from, layer_to,
    head_to); one-line refusal otherwise."""
    import xarray as xr

    if isinstance(source, (str, Path)):
        if not Path(source).is_file():
            raise InputError(f"no composition file {source}")
        try:
            with xr.open_dataset(source) as f:
                ds = f.load()
        except Exception as exc:  # netCDF readers raise many kinds
            raise InputError(f"{source}: not a netCDF file ({type(exc).__name__})") from exc
    else:
        ds = source
    need = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    for v in COLUMNS:
        if v not in ds or tuple(ds[v].dims) != need:
            raise InputError(f"the composition has no {v} over {', '.join(need)} (give the "
                             f"composition.nc of rmtbase circuits or score --composition)")
    return ds


def head_edge_columns(graph: Graph, composition) -> dict[int, dict]:
    """{edge number: {"composition_rank", "composition_p", "composition_q"}} for every
    head-to-head edge of ``graph``; refused where the composition's layers or heads are not
    the graph's, or (``graph.heads`` known) its heads' norms are not the model's
    (:func:`rmtbase.circuits.core.fingerprint.check_composition`, as the head search checks)."""
    ds = read_composition(composition)
    shape = (ds.sizes["layer_to"], ds.sizes["head_to"])
    if shape != (graph.n_layers, graph.n_heads):
        raise InputError(f"the composition is of {shape[0]} layers x {shape[1]} heads; this "
                         f"model has {graph.n_layers} x {graph.n_heads}")
    if getattr(graph, "heads", None) is not None:
        from ..core.fingerprint import check_composition

        check_composition(graph.heads, ds)
    p_var = "composition_p_tail" if "composition_p_tail" in ds else "composition_p"
    arrays = {}
    for var, name in COLUMNS.items():
        src = p_var if var == "composition_p" else var
        arrays[name] = np.asarray(ds[src].transpose(
            "kind", "layer_from", "head_from", "layer_to", "head_to").values, np.float64)
    kinds = [str(k) for k in ds["kind"].values]
    out = {}
    heads_from = 1  # senders: input, then per layer H heads and the MLP
    for st in graph.stages:
        if st.kind != "attn":
            continue
        for ri, r in enumerate(st.receivers):
            node = parse(r)
            kind, h2 = kinds.index(node.input), node.head
            for si in range(heads_from, st.n_senders):
                l1, j = divmod(si - 1, graph.n_heads + 1)
                if j == graph.n_heads:  # an MLP
                    continue
                e = st.offset + ri * st.n_senders + si
                out[e] = {name: _num(a[kind, l1, j, st.layer, h2], name)
                          for name, a in arrays.items()}
    return out


def _num(x, name: str):
    x = float(x)
    if not np.isfinite(x):
        return None
    return int(x) if name == "composition_rank" else x


def expected_false_confirmations(n_patched: int, n_prompts: int) -> float:
    """Of ``n_patched`` exactly patched edges with no effect, each measured on ``n_prompts``
    prompts, the expected number passing ``|effect| ≥ 3 se``
    (:func:`rmtbase.circuits.core.rule.false_rate`, as the head-behaviour search states it)."""
    from ..core.rule import false_rate

    return false_rate(n_prompts) * int(n_patched)


__all__ = ["COLUMNS", "expected_false_confirmations", "head_edge_columns", "read_composition"]
