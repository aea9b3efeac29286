"""The null's questions asked one at a time (rmtbase.stats.null_protocol): a null defined in
this file with shared draws (``draws_per_head = False``, no factors) runs through ``score``, a
two-model collection and composition; its profile null and spectrum band are its own (the
reference is told the (layers, heads) it is drawn for: ``Cells.heads``) or absent, never the
Gaussian ones; composition's QK-overlap test is refused in one line, before any weight is read,
for a null that does not declare the Gaussian-factor overlap test its own.

``SharedOrthogonal``: W_Q and W_K with Haar-distributed orthonormal rows (QR of a Gaussian
matrix with R's diagonal signs fixed, Mezzadri 2007), one set of draws for every head of the
shape (the statistics are compared self-normalised, so no head's scale is needed). Its band
is the quantiles of its own draws' self-normalised spectra, computed here by numpy from the
same draws' singular values (independent of rmtbase's spectral code).

Cost: GPT-2s of 2 layers x 4 heads of 16 (d = 64), ``stats="spectral"``, 100 draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

DRAWS = 100
QUANTILES = (0.025, 0.5, 0.975)


def _haar_rows(rng, n: int, d_h: int, d: int) -> np.ndarray:
    g = rng.standard_normal((n, d, d_h))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]
    return np.swapaxes(q, -1, -2).astype(np.float32)


def _own_band(wq, wk, d: int) -> np.ndarray:
    """Quantiles of the sorted self-normalised spectra λ/(rms_Q² rms_K² d²) of the draws, by
    numpy's SVD of the d x d products (float64)."""
    wq, wk = np.asarray(wq, np.float64), np.asarray(wk, np.float64)
    lam = np.linalg.svd(np.swapaxes(wq, -1, -2) @ wk, compute_uv=False)[:, :wq.shape[-2]] ** 2
    rms2 = np.mean(wq**2, axis=(1, 2)) * np.mean(wk**2, axis=(1, 2))
    return np.quantile(lam / (d**2 * rms2[:, None]), QUANTILES, axis=0)


def _define(name: str, *, band: bool):
    from rmtbase.scoring.heads.reference import Reference
    from rmtbase.scoring.measures.layer_stats import layer_stats
    from rmtbase.scoring.profile.axes import factor_profile
    from rmtbase.stats.null_kind import Null

    class SharedReference(Reference):
        profile_draws = "shared Haar-orthogonal factor pairs"

        def __init__(self, null, cells, joint, axes, wq, wk):
            super().__init__(null, cells, joint)
            self.axes, self.wq, self.wk = axes, wq, wk

        def profile_null(self):
            shape = self.cells.heads  # (layers, heads): told, not read from the factors
            return {a: np.broadcast_to(v, (*shape, v.size)).copy() for a, v in self.axes.items()}

        def spectrum_band(self, n_draws, *, seed):
            return _own_band(self.wq, self.wk, self.cells.d) if band else None

    @dataclass(frozen=True)
    class SharedOrthogonal(Null):
        """Haar-orthogonal factors shared by the heads of a shape (module docstring)."""

        tests_entry_law: ClassVar[bool] = False
        draws_per_head: ClassVar[bool] = False
        needs_factors: ClassVar[bool] = False

        def reference(self, cells, storage, *, draws, seed, progress):
            assert cells.factors == []  # not kept: the null does not need them
            rng = np.random.default_rng([int(seed), 68])
            n = int(draws or DRAWS)
            wq, wk = (_haar_rows(rng, n, cells.d_h, cells.d) for _ in range(2))
            st, _, _ = layer_stats(wq, wk, cells.kind)
            joint = {k: v for k, v in st.items() if k in cells.tested or k in ("q.rms", "k.rms")}
            axes = {a: np.asarray(v, np.float64) for a, v in factor_profile(wq, wk).items()}
            return SharedReference(self, cells, joint, axes, wq, wk)

        def description(self) -> str:
            return "W_Q, W_K with Haar-orthogonal rows, shared by the heads of a shape"

    return dataclass(frozen=True)(type(f"Null_{name}", (SharedOrthogonal,),
                                       {"name": name, "__annotations__": {"name": ClassVar[str]}}))


@pytest.fixture(scope="module", autouse=True)
def _own_cache(module_cache):
    """Null tables and composition nulls of this module go to its own cache."""
    return module_cache


@pytest.fixture(scope="module")
def nulls():
    from rmtbase.stats.null_kind import unregister

    made = {"banded": _define("shared-orth-banded", band=True),
            "bandless": _define("shared-orth-bandless", band=False)}
    try:
        yield made
    finally:
        for cls in made.values():
            unregister(cls.name)


def _gpt2(path, seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=64, n_positions=32,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    return [_gpt2(root / "a", 0), _gpt2(root / "b", 1)]


def _no_gaussian(monkeypatch):
    """The Gaussian factor-axes null and the Gaussian band fail the test if asked for."""
    import rmtbase.scoring.collection.runs as cr
    import rmtbase.scoring.heads.pipeline as pl
    import rmtbase.scoring.profile.cache as pc

    def refuse(*a, **k):
        raise AssertionError("a Gaussian null was used")

    for mod, attr in ((pc, "cached_profile_null"), (pl, "null_spectrum_band"), (cr, "_band")):
        monkeypatch.setattr(mod, attr, refuse)


def test_questions_of_the_shipped_nulls_and_the_compatibility_flag():
    from rmtbase.stats.null_kind import GaussianNull, Null, PermutationNull, unregister

    g, p = GaussianNull(), PermutationNull()
    assert (g.draws_per_head, g.needs_factors, g.shared_table) == (False, False, True)
    assert (p.draws_per_head, p.needs_factors, p.shared_table) == (True, True, False)
    assert not g.per_head and p.per_head
    assert g.gaussian_spectrum_band and g.gaussian_qk_overlap
    assert p.gaussian_spectrum_band and p.gaussian_qk_overlap

    @dataclass(frozen=True)
    class Old(Null):  # a null written against the one flag
        name: ClassVar[str] = "old-per-head-test"
        per_head: ClassVar[bool] = True

        def reference(self, cells, storage, *, draws, seed, progress):
            raise NotImplementedError

        def description(self) -> str:
            return "x"

    try:
        o = Old()
        assert (o.per_head, o.draws_per_head, o.needs_factors, o.shared_table) == \
            (True, True, True, False)
        assert not o.gaussian_spectrum_band and not o.gaussian_qk_overlap  # not Gaussian's
    finally:
        unregister(Old.name)


def test_score_with_shared_draws_own_band_and_profile(nulls, models, monkeypatch):
    from rmtbase.scoring.score import score_model

    _no_gaussian(monkeypatch)
    null = nulls["banded"]()
    ds = score_model(models[0], stats="spectral", draws=DRAWS, null=null, progress=False,
                     spectrum_draws=50)
    assert ds.attrs["null_kind"] == null.name and int(ds["null_draws"].min()) == DRAWS
    p = ds["p_value"].values
    assert np.isfinite(p).all() and (p >= 1 / (DRAWS + 1)).all()
    assert np.isfinite(ds["profile_p"].sel(axis="alignment").values).all()
    assert ds.attrs["profile"].endswith(f"against {DRAWS} shared Haar-orthogonal factor pairs")
    # the band is the null's own: numpy's quantiles of the same draws (seed 0, 100 draws)
    rng = np.random.default_rng([0, 68])
    wq, wk = (_haar_rows(rng, DRAWS, 16, 64) for _ in range(2))
    np.testing.assert_allclose(ds["null_spectrum"].values, _own_band(wq, wk, 64), rtol=1e-12)
    # orthonormal rows: W_Q^T is an isometry, so W_QK = W_Q^T W_K has the singular values of
    # W_K, all 1, and x = lambda / (rms_Q^2 rms_K^2 d^2) = 1 exactly (float32 draws): a flat band,
    # not the Gaussian one (whose x spreads over the MP⊠MP support, c = 1/4)
    np.testing.assert_allclose(ds["null_spectrum"].values, 1.0, atol=1e-6)


def test_a_null_without_a_band_has_none(nulls, models, monkeypatch):
    from rmtbase.scoring.score import score_model

    _no_gaussian(monkeypatch)
    ds = score_model(models[0], stats="spectral", draws=DRAWS, null=nulls["bandless"](),
                     progress=False, spectrum_draws=50)
    assert "null_spectrum" not in ds and "quantile" not in ds.coords
    assert np.isfinite(ds["p_value"].values).all()


def test_collection_with_shared_draws(nulls, models, monkeypatch):
    from rmtbase.scoring.collection.trajectory import score_collection

    _no_gaussian(monkeypatch)
    ds = score_collection(models, stats="spectral", draws=DRAWS, null=nulls["bandless"](),
                          progress=False)
    assert ds.sizes["checkpoint"] == 2
    assert np.isfinite(ds["p_value"].values).all()
    assert "null_spectrum" not in ds  # the collection adds no Gaussian band for it


def test_composition_refuses_a_null_without_the_overlap_test(models, monkeypatch):
    """A shared-draws null with a composition null but no QK-overlap test of its own is
    refused in one line before any weight is read; declaring the Gaussian-factor overlap
    test its own, it runs through composition."""
    import rmtbase
    import rmtbase.models as models_pkg
    from rmtbase.errors import InputError
    from rmtbase.stats.null_kind import GaussianNull, Null, unregister

    @dataclass(frozen=True)
    class SharedGaussian(Null):
        """Gaussian factors, shared draws, its composition null the Gaussian factors'."""

        name: ClassVar[str] = "shared-gaussian-test"
        draws_per_head: ClassVar[bool] = False
        composition_draws: ClassVar[int] = 200

        def reference(self, cells, storage, *, draws, seed, progress):
            return GaussianNull().reference(cells, storage, draws=draws, seed=seed,
                                            progress=progress)

        def composition_null(self, pairs, *, draws, seed):
            return pairs.gaussian_factors(draws=draws, seed=seed)

        def description(self) -> str:
            return "i.i.d. Gaussian factors, shared"

    @dataclass(frozen=True)
    class WithOverlap(SharedGaussian):
        name: ClassVar[str] = "shared-gaussian-overlap-test"
        gaussian_qk_overlap: ClassVar[bool] = True

    try:
        with monkeypatch.context() as m:
            def no_weights(*a, **k):
                raise AssertionError("weights were read")

            m.setattr(models_pkg, "load_heads", no_weights)
            with pytest.raises(InputError) as exc:
                rmtbase.composition(models[0], null=SharedGaussian(), draws=50, progress=False)
        assert str(exc.value) == (
            "composition's QK-overlap test (independent Gaussian factors) needs a null with "
            "gaussian_qk_overlap; the shared-gaussian-test null has none "
            "(SharedGaussian.gaussian_qk_overlap = False)")
        ds = rmtbase.composition(models[0], null=WithOverlap(), draws=50, progress=False)
        assert ds.attrs["null_kind"] == WithOverlap.name
        assert "qk_overlap_p" in ds and np.isfinite(ds["composition_p"].values).any()
    finally:
        unregister(SharedGaussian.name)
        unregister(WithOverlap.name)
