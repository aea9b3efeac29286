"""The null protocol's proof: a null defined outside the package, in this test file alone, runs
through ``score``, a two-model collection and the command line, or is refused up front with
the capability it lacks named; nothing in ``src/`` knows it.

``OrthogonalNull``: W_Q and W_K with Haar-distributed orthonormal rows (the first d_h columns
of a Haar orthogonal d x d matrix, by QR of a Gaussian matrix with the signs of R's diagonal
fixed, Mezzadri 2007, "How to generate random matrices from the classical compact groups"),
scaled to the head's rms. Every statistic is compared self-normalised (by the matrices' own
rms), so the scale is immaterial. Its draws are shared by every head of one shape; its
profile null is its own factor axes on the same draws (no Gaussian default). It has no
head-pair composition null, no whole-matrix (``--components``) null and no delta (``--base``)
null: those are refused before any work, with the attribute named.

Cost: a GPT-2 of 2 layers x 4 heads of 16 (d = 64), ``stats="spectral"``, 100 draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

NAME = "orthogonal"
DRAWS = 100


def _haar_rows(rng, n: int, d_h: int, d: int) -> np.ndarray:
    """``n`` independent (d_h, d) matrices with Haar-distributed orthonormal rows, float32."""
    g = rng.standard_normal((n, d, d_h))
    q, r = np.linalg.qr(g)
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[:, None, :]  # Haar, not QR's bias
    return np.swapaxes(q, -1, -2).astype(np.float32)


def _define():
    """The user's script: a null and its reference, nothing else."""
    from rmtbase.scoring.heads.reference import Reference
    from rmtbase.scoring.measures.layer_stats import layer_stats
    from rmtbase.scoring.profile.axes import factor_profile
    from rmtbase.stats.null_kind import Null

    class OrthogonalReference(Reference):
        """The orthogonal draws for every layer (one group), its profile null its own."""

        profile_draws = "Haar-orthogonal factor pairs"

        def __init__(self, null, cells, joint, axes):
            super().__init__(null, cells, joint)
            self.axes = axes  # {axis: (draws,)}

        def profile_null(self):
            n_layers, n_heads = len(self.cells.factors), self.cells.factors[0][0].shape[0]
            return {a: np.broadcast_to(v, (n_layers, n_heads, v.size)).copy()
                    for a, v in self.axes.items()}

    @dataclass(frozen=True)
    class OrthogonalNull(Null):
        """Haar-orthogonal factors at the head's norm (module docstring)."""

        name: ClassVar[str] = NAME
        tests_entry_law: ClassVar[bool] = False  # orthonormal rows: not an i.i.d. entry law
        per_head: ClassVar[bool] = True  # drawn for the heads given (their shape and norm)

        def reference(self, cells, storage, *, draws, seed, progress):
            wq0 = cells.factors[0][0]
            d_h, d = wq0.shape[-2:]
            rng = np.random.default_rng([int(seed), 58])
            n = int(draws or DRAWS)
            scale = float(np.sqrt(np.mean(np.asarray(wq0, np.float64) ** 2)) * np.sqrt(d))
            wq = scale * _haar_rows(rng, n, d_h, d)
            wk = scale * _haar_rows(rng, n, d_h, d)
            st, _, _ = layer_stats(wq, wk, cells.kind)
            joint = {k: v for k, v in st.items() if k in cells.tested or k in ("q.rms", "k.rms")}
            axes = {a: np.asarray(v, np.float64) for a, v in factor_profile(wq, wk).items()}
            return OrthogonalReference(self, cells, joint, axes)

        def description(self) -> str:
            return "W_Q, W_K with Haar-orthogonal rows at each head's norm"

    return OrthogonalNull, OrthogonalReference


@pytest.fixture(scope="module")
def orthogonal():
    from rmtbase.stats.null_kind import NULLS, unregister

    cls, ref = _define()
    try:
        assert NAME in NULLS and NULLS[-1] == NAME  # registered by being defined
        yield cls
    finally:
        unregister(NAME)
    assert NAME not in NULLS


def _gpt2(path, n_layer=2, n_head=4, n_embd=64, seed=0):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("orth")
    return [_gpt2(root / "a", seed=0), _gpt2(root / "b", seed=1)]


def _no_gaussian_axes(monkeypatch):
    """The Gaussian factor-axes null fails the test if it is asked for."""
    import rmtbase.scoring.profile.cache as pc

    def refuse(*a, **k):
        raise AssertionError("the Gaussian factor-axes null was used")

    monkeypatch.setattr(pc, "cached_profile_null", refuse)


def test_registered_by_name_and_parsed(orthogonal):
    from rmtbase.stats.null_kind import Null

    assert Null.parse(NAME) == orthogonal()
    assert str(orthogonal()) == NAME
    with pytest.raises(TypeError, match="already registered"):
        _define()  # a second class under the name is refused


def test_score_under_the_new_null(orthogonal, models, monkeypatch):
    from rmtbase.scoring.score import score_model

    _no_gaussian_axes(monkeypatch)
    ds = score_model(models[0], stats="spectral", draws=DRAWS, null=orthogonal(),
                     progress=False, spectrum_draws=0)
    assert ds.attrs["null_kind"] == NAME
    assert ds.attrs["null"] == orthogonal().description()
    assert int(ds["null_draws"].min()) == DRAWS
    p = ds["p_value"].values
    assert np.isfinite(p).all() and (p >= 1 / (DRAWS + 1)).all() and (p <= 1).all()
    # the factor axes were tested against the null's own draws: a band per head
    assert np.isfinite(ds["profile_p"].sel(axis="alignment").values).all()
    assert ds.attrs["profile"].endswith(f"against {DRAWS} Haar-orthogonal factor pairs")


def test_collection_of_two_models(orthogonal, models, monkeypatch):
    """score_collection scores both entries and re-reads each file's null_kind (it failed
    there, InputError, before the registry)."""
    from rmtbase.scoring.collection.trajectory import score_collection

    _no_gaussian_axes(monkeypatch)
    ds = score_collection(models, stats="spectral", draws=DRAWS, null=orthogonal(),
                          progress=False, spectrum_draws=0)
    assert ds.sizes["checkpoint"] == 2
    assert np.isfinite(ds["p_value"].values).all()


def test_a_reference_must_say_its_profile_null(orthogonal):
    from rmtbase.scoring.heads.reference import Cells, Reference

    class Silent(Reference):
        pass

    with pytest.raises(TypeError, match="profile_null"):
        Silent(orthogonal(), Cells(64, 16, "spectral", ()), {})


def test_what_it_lacks_is_refused_up_front(orthogonal, models, tmp_path):
    import rmtbase
    from rmtbase.errors import InputError

    with pytest.raises(InputError) as exc:
        rmtbase.composition(models[0], null=orthogonal(), draws=20)
    assert str(exc.value) == ("composition needs a null with composition_draws; the orthogonal "
                              "null has none (OrthogonalNull.composition_draws = 0)")


@pytest.mark.parametrize("extra, says", [
    (["--composition"], "composition_draws"),
    (["--components", "q"], "--null orthogonal (scores_components)"),
    (["--base", "BASE"], "--null permutation/orthogonal"),
])
def test_cli_refuses_before_scoring(orthogonal, models, tmp_path, capsys, monkeypatch,
                                    extra, says):
    from _no_scoring import forbid

    import rmtbase.scoring.composition.run as comp
    import rmtbase.scoring.score as score
    from rmtbase.cli import main

    forbid(monkeypatch, (score, "score_model"), (comp, "composition"))
    extra = [models[1] if x == "BASE" else x for x in extra]
    code = main(["score", models[0], "--null", NAME, *extra, "--quiet", "--no-figures",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert says in err[0], err
    assert not (tmp_path / "o").exists()


def test_storage_of_the_value_is_refused_not_ignored(models):
    from rmtbase.errors import InputError
    from rmtbase.scoring.score import score_model
    from rmtbase.stats.null_kind import GaussianNull

    with pytest.raises(InputError, match="carries storage 'q8_0', which is not honoured"):
        score_model(models[0], null=GaussianNull("q8_0"), progress=False)
