"""OV circuits against the same null as QK, and both circuits of a model side by side.

:func:`score_ov` scores W_OV = W_O,h W_V,h like W_QK with ``q`` = W_O,hᵀ, ``k`` = W_V,h, at the
v/o storage; ``alignment`` is then tr(W_OV)/(‖W_O,h‖‖W_V,h‖) (copying +, suppression −), the
input focus axes how unevenly it writes (q) and reads (k) the residual. :func:`score_circuits`:
both as one collection over ``circuit`` (the QK entry is :func:`score_model`'s output)."""

from __future__ import annotations

import xarray as xr


def score_ov(model=None, **options) -> xr.Dataset:
    """Score every head's OV circuit (module docstring): :func:`score_model` with
    ``circuit="ov"``; options as for it. The Dataset has score_model's variables, with
    ``circuit = "ov"`` and ``factors`` in its attrs."""
    from .score import score_model

    return score_model(model, circuit="ov", **options)


def score_circuits(model=None, **options) -> xr.Dataset:
    """QK (:func:`rmtbase.scoring.score.score_model`) and OV (:func:`score_ov`) of ``model``
    as one collection over ``circuit`` = ["qk", "ov"] (module docstring); ``options`` as for
    score_model."""
    from ..models import default_model_path
    from ..models.loading import check_parts
    from ..models.ov import OV_WHY
    from .collection.combine import combine
    from .score import score_model

    check_parts(default_model_path() if model is None else model, ("v", "o"),  # before QK
                revision=options.get("revision"),
                allow_pickle=bool(options.get("allow_pickle", False)), why=OV_WHY)
    qk = score_model(model, **options)
    qk.attrs["circuit"] = "qk"
    ov = score_model(model, circuit="ov", **options)
    return combine([qk, ov], ["qk", "ov"], "circuit")


def check_ov(model, revision, allow_pickle: bool, heads: bool = False) -> None:
    """The OV score's precondition: every layer has its V and O tensors (named as the file
    names them); with ``heads``, each head's W_O and W_V read one layer at a time and a
    non-finite or all-zero one named (:func:`rmtbase.scoring.heads.pipeline.check_heads`),
    before the QK pass."""
    from ..models import default_model_path
    from ..models.loading import check_parts
    from ..models.ov import OV_WHY, load_ov_heads

    model = default_model_path() if model is None else model
    check_parts(model, ("v", "o"), revision=revision, allow_pickle=allow_pickle, why=OV_WHY)
    if heads:
        from .heads.pipeline import check_heads

        for lh in load_ov_heads(model, revision=revision, allow_pickle=allow_pickle):
            check_heads(lh.layer, lh.wq, lh.wk, str(model), "W_O or W_V")


__all__ = ["check_ov", "score_circuits", "score_ov"]
