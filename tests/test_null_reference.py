"""A null owns its reference: the OrthogonalNull experiment as a test.

A null class without a reference cannot be constructed (:class:`Null` is abstract in
``reference``), and ``score_heads`` takes its draws from the null it is given, never from a
branch of its own (a 15-line ``OrthogonalNull`` beside the Gaussian one must not describe
itself as Haar and give the Gaussian run's p-values): a test null whose ``qk.lambda_max``
draws are doubled changes that statistic's p-values, and only that statistic's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from rmtbase.models.types import LayerHeads, ModelInfo
from rmtbase.scoring.heads.reference import TableReference
from rmtbase.scoring.score import score_heads
from rmtbase.stats.null_kind import GaussianNull, Null, PermutationNull

D, DH, HEADS, LAYERS = 384, 32, 12, 2  # MiniLM's shape: shipped tables, nothing drawn


@dataclass(frozen=True)
class OrthogonalNull(Null):
    """The 0be51e1 experiment: a name and a description, no draws of its own."""

    name: ClassVar[str] = "orthogonal"

    def description(self) -> str:
        return "Haar-orthogonal factors"


def test_a_null_without_reference_cannot_be_constructed():
    with pytest.raises(TypeError, match="reference"):
        OrthogonalNull()
    with pytest.raises(TypeError):
        Null()
    GaussianNull()  # the shipped nulls implement it
    PermutationNull()


class _Doubled(TableReference):
    """A Gaussian table reference whose qk.lambda_max draws are doubled."""

    def __init__(self, ref: TableReference):
        super().__init__(ref.null, ref.cells, ref.table, _double(ref.joint), seed=ref.seed,
                         progress=ref.progress, draws=ref.min_draws)

    def spectral(self, names, n):
        return _double(super().spectral(names, n))


def _double(draws: dict) -> dict:
    return {k: 2 * v if k == "qk.lambda_max" else v for k, v in draws.items()}


@dataclass(frozen=True)
class DoubledNull(GaussianNull):
    """The Gaussian null with qk.lambda_max's draws doubled: its own reference."""

    def reference(self, cells, storage, *, draws, seed, progress):
        return _Doubled(super().reference(cells, storage, draws=draws, seed=seed,
                                          progress=progress))


@pytest.fixture(scope="module")
def heads():
    rng = np.random.default_rng(11)
    layers = [LayerHeads(layer=i, wq=(0.02 * rng.standard_normal((HEADS, DH, D))).astype(
        np.float32), wk=(0.05 * rng.standard_normal((HEADS, DH, D))).astype(np.float32),
        storage="float32") for i in range(LAYERS)]
    info = ModelInfo(name="random", revision=None, architecture="bert", d=D, d_h=DH,
                     n_layers=LAYERS, n_heads=HEADS, n_kv_heads=HEADS)
    return info, layers


def _score(heads, null):
    info, layers = heads
    # max_draws=2: no extension (the shipped table is larger), so both runs see the same draws
    #  but for the doubled statistic
    return score_heads(info, iter(layers), stats="spectral", progress=False, spectrum_draws=0,
                       null=null, max_draws=2)


def test_the_null_given_draws_the_reference(score_cache, heads):
    plain, doubled = _score(heads, GaussianNull()), _score(heads, DoubledNull())
    stats = [str(s) for s in plain["stat"].values]
    assert "qk.lambda_max" in stats and len(stats) > 3
    p0, p1 = plain["p_value"], doubled["p_value"]
    changed = (p0.sel(stat="qk.lambda_max") != p1.sel(stat="qk.lambda_max")).values
    # heads' λ_max sit in the bulk of the plain null (random weights) and below every doubled
    #  draw: their p-values move, for nearly every one of the 24 heads
    assert changed.mean() > 0.9, changed.mean()
    others = [s for s in stats if s != "qk.lambda_max"]
    # exact: the same shipped draws through the same compiled program in one process
    np.testing.assert_array_equal(p0.sel(stat=others).values, p1.sel(stat=others).values)
