"""EAP-IG's circuit graph (Hanna et al. 2024), the reader and writer of MIB's circuit JSON
(Mueller et al. 2025), vendored as an independent reader and writer of that format:
``graph.py`` and ``visualization.py`` are ``src/eap/`` of github.com/hannamw/EAP-IG at
commit 795f5607b25638935aec89aee3c1cb4bd9ed72f1, unedited, under its MIT
licence (LICENSE here); ruff does not lint them. :func:`eap_graph` imports that module."""

import importlib
import importlib.util
import sys
import types


def eap_graph():
    """EAP-IG's ``graph`` module. Its module-level imports of TransformerLens and einops (not
    test needs) are met by stand-ins where those are not installed: the JSON path
    (``Graph.from_model`` of a config dict, ``from_json``, ``to_json``, ``apply_topn``) uses
    neither; the stand-ins are removed again after the import."""
    added = []
    if importlib.util.find_spec("einops") is None:
        einops = types.ModuleType("einops")
        einops.einsum = None
        added.append(("einops", einops))
    if importlib.util.find_spec("transformer_lens") is None:
        tl = types.ModuleType("transformer_lens")
        tl.HookedTransformer = type("HookedTransformer", (), {})
        tl.HookedTransformerConfig = type("HookedTransformerConfig", (), {})
        added.append(("transformer_lens", tl))
    for name, mod in added:
        sys.modules[name] = mod
    try:
        return importlib.import_module("_eap_ig.graph")
    finally:
        for name, _ in added:
            sys.modules.pop(name, None)
