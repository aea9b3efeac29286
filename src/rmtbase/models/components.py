"""Whole weight matrices per layer — q, k, v, o and the FFN — for whole-matrix statistics.

The Weibull paper (arXiv:2605.18898) fits every weight matrix of a layer, not per-head factors.
:func:`load_components` reads them one layer at a time through the same adapters as
:func:`rmtbase.models.load_heads` (each adapter's declarative layout names the tensor of every
component; :mod:`rmtbase.models._layout`), and returns them in one convention: the
``nn.Linear`` (out, in) layout, float32, exactly the stored values (Conv1D transposed, fused
q/k/v and gate/up projections split, nothing folded). Rows of ``"q"`` are head-major, so
``matrices["q"].reshape(n_heads, d_h, d)`` are the per-head W_Q of ``load_heads`` and
``matrices["k"]`` the un-expanded GQA keys.

Component names: ``"q"``, ``"k"``, ``"v"``, ``"o"``; ``"ffn_gate"``, ``"ffn_up"``,
``"ffn_down"`` (gated MLPs) or ``"ffn_in"``, ``"ffn_out"`` (plain MLPs); ``"router"`` (MoE).
In ``components``, ``"ffn"`` selects whichever FFN matrices the architecture has and ``"all"``
selects every component. Mixture-of-experts layers report each expert's matrices as
``"ffn_gate.e{j}"`` … (:mod:`rmtbase.models._moe`); memory is bounded by one layer's selected
matrices.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from ..errors import InputError, ModelError
from .loading import open_model, prefetch
from .types import LayerComponents

#: Every component name an architecture may have, in reporting order.
COMPONENTS = ("q", "k", "v", "o", "ffn_gate", "ffn_up", "ffn_down", "ffn_in", "ffn_out",
              "router")
_FFN = ("ffn_gate", "ffn_up", "ffn_down", "ffn_in", "ffn_out")


def select_components(components, available: Iterable[str], arch: str) -> tuple[str, ...]:
    """The component names that ``components`` selects among ``available``.

    InputError for a name that is no component; ModelError for a component this architecture
    does not have (e.g. ``"ffn_gate"`` of GPT-2, whose FFN is ``ffn_in``/``ffn_out``).
    """
    if isinstance(components, str):
        components = (components,)
    try:
        asked = list(components)
    except TypeError as exc:
        raise InputError(f"components must be names, got {components!r}") from exc
    if not asked:
        raise InputError("components is empty; give names among "
                         f"{', '.join(('all', 'ffn') + COMPONENTS)}")
    available = tuple(available)
    wanted = set()
    for name in asked:
        if name == "all":
            wanted.update(available)
        elif name == "ffn":
            wanted.update(c for c in available if c in _FFN)
        elif name in COMPONENTS:
            if name not in available:
                raise ModelError(f"a {arch} model has no {name!r} matrix; its components: "
                                 f"{', '.join(available)}")
            wanted.add(name)
        else:
            raise InputError(f"unknown component {name!r}; known: "
                             f"{', '.join(('all', 'ffn') + COMPONENTS)}")
    return tuple(c for c in available if c in wanted)


def parse_components(text: str) -> tuple[str, ...]:
    """Names of a comma-separated list (``"q,k,v,o,ffn"``, ``"all"``), each checked against
    ``all``, ``ffn`` and :data:`COMPONENTS`; :class:`InputError` naming the first bad one."""
    names = [t.strip() for t in str(text).split(",")]
    if not any(names):
        raise InputError(f"--components is empty; give names among "
                         f"{', '.join(('all', 'ffn') + COMPONENTS)}")
    for name in names:
        if not name:
            raise InputError(f"--components has an empty entry: {text!r}")
        if name not in ("all", "ffn") + COMPONENTS:
            raise InputError(f"unknown component {name!r}; known: "
                             f"{', '.join(('all', 'ffn') + COMPONENTS)}")
    return tuple(dict.fromkeys(names))


def check_components(model, components, *, revision: str | None = None,
                     allow_pickle: bool = False) -> tuple[str, ...]:
    """The component names ``components`` selects in ``model``, checked as
    :func:`load_components` checks them (config and weight index only; no matrix is read)."""
    info, located, weights = open_model(model, revision, allow_pickle)
    try:
        return select_components(components, located.component_names(), info.architecture)
    finally:
        weights.close()


def load_components(model, *, components=("q", "k", "v", "o", "ffn"),
                    revision: str | None = None,
                    allow_pickle: bool = False) -> Iterator[LayerComponents]:
    """Iterate over the layers of ``model``, yielding its whole weight matrices.

    Parameters
    ----------
    model : str, path or transformers model
        Hub id, local folder or loaded model, as for :func:`rmtbase.models.load_heads`.
    components : str or iterable of str
        Component names (module docstring); default q, k, v, o and the FFN.
    revision, allow_pickle
        As for :func:`rmtbase.models.load_heads`.

    Yields
    ------
    LayerComponents
        ``layer``, ``matrices`` ``{name: float32 (out, in)}`` and ``storage``
        ``{name: "float32" | "float16" | "bfloat16"}``, one layer per step.

    The checkpoint is checked up front (architecture, weights, layout, layer count) and the
    selection is validated before any layer is read.
    """
    info, located, weights = open_model(model, revision, allow_pickle)
    try:
        wanted = select_components(components, located.component_names(), info.architecture)
    except BaseException:
        weights.close()
        raise
    return _iterate(weights, located, info.n_layers, wanted)


def _iterate(weights, located, n_layers: int, wanted) -> Iterator[LayerComponents]:
    try:
        for i in range(n_layers):
            prefetch(weights, located, i, wanted)
            got = located.read_components(located.reader(weights, i), wanted)
            weights.take_storage()
            layer = LayerComponents(
                layer=i,
                matrices={k: np.ascontiguousarray(w, dtype=np.float32)
                          for k, (w, _) in got.items()},
                storage={k: s for k, (_, s) in got.items()})
            del got  # views into fused tensors: let them go before the caller holds the layer
            yield layer
    finally:
        weights.close()
