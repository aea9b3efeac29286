"""Whole weight matrices per layer — q, k, v, o and the FFN — for whole-matrix statistics.

:func:`load_components` reads them one layer at a time, ``nn.Linear`` (out, in), float32, the
stored values. ``matrices["q"].reshape(n_heads, d_h, d)`` are ``load_heads``' W_Q;
``matrices["k"]`` the un-expanded GQA keys. Names: ``"q"``, ``"k"``, ``"v"``, ``"o"``;
``"ffn_gate"``, ``"ffn_up"``, ``"ffn_down"`` (gated) or ``"ffn_in"``, ``"ffn_out"``; ``"router"``
(MoE; experts ``"ffn_gate.e{j}"`` …); ``"ffn"`` the FFN matrices, ``"all"`` everything."""

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
    """The component names ``components`` selects among ``available``: InputError for a name that is
    no component, ModelError for one this architecture lacks."""
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

    ``components``: a name or names (module docstring); default q, k, v, o and the FFN.
    ``model``, ``revision``, ``allow_pickle``: as for :func:`rmtbase.models.load_heads`. Yields
    one :class:`LayerComponents` per layer; checkpoint and selection are checked first."""
    return layer_components(open_model(model, revision, allow_pickle), components)


def layer_components(opened, components) -> Iterator[LayerComponents]:
    """The layers of ``opened`` (``(info, located, weights)`` as
    :func:`rmtbase.models.loading.open_model` returns, the weights closed at the end or on a
    refusal) with the ``components`` selected (checked before the first layer is read)."""
    info, located, weights = opened
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
