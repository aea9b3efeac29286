"""The head decision calibrated through the whole score path at n ≥ 2,000 heads, with the
default null drawn at a seed that is not shipped.

Untrained heads — W_Q, W_K with i.i.d. N(0, 0.02²) entries, drawn in numpy, float32 storage —
at (d, d_h) = (128, 16) (8 heads a layer × 256 layers = 2,048 heads) and (384, 32) (12 × 171 =
2,052) are scored by :func:`rmtbase.scoring.score.score_heads` (what ``score_model`` calls once
the weights are read) with the default options — every statistic, the Gaussian null, the
spectral stopping rule, the joint table grown by :mod:`rmtbase.scoring.stopping.joint`, the
profile null by :mod:`rmtbase.scoring.profile.stopping` — except ``spectrum_draws=0`` (the
figure's null band only, no decision reads it) and ``seed`` = :data:`NULL_SEED`, from an empty
cache (``$RMTBASE_CACHE`` in tmp): every null table is drawn here, none is the shipped seed-0
sample. The heads are one model, so one Benjamini–Hochberg family decides which tables grow, as
for a model of that many heads.

Asserted, per shape: the rate of head p ≤ 0.05 (``head_p_value``, the combined decision,
:mod:`rmtbase.decision.combined`) and of p_S ≤ 0.025 (``head_p_statistics``, the statistics'
omnibus that the Bonferroni rule reads at α/2) each lie within 2 binomial se of its level,
se = √(level (1 − level) / n), heads as units (every head has its own W_Q, W_K). The null's own
Monte Carlo error is not in that se: with the joint table at 18,000 draws it adds an sd of
√(0.025·0.975/18,000) = 0.0012 at α/2 (a third of the binomial se at n 2,048), the size
:mod:`rmtbase.scoring.stopping.joint` chose so that it is a quarter of a 1,000-head se. The
test prints n, each rate, its se and z, the rate of p_A ≤ 0.025 and the joint draws used.

Measured (NULL_SEED 7, HEAD_SEED 2026; docs/statistics.md, "Realised size at the defaults"):
the same numbers at de29fff and at a598922 (after d8c93cf's joint-stopping change; ``pytest
-m slow`` on this file: 2 passed in 950 s wall, 329 CPU-s, load ~12). The spectral null went
to 100,000 draws, the joint table 1,000 → 6,000 → 18,000 and the profile null to 18,000 at
both shapes.

- 128 × 16, n 2,048: head p ≤ 0.05 0.0591 (se 0.0048, z +1.89: 121 heads, 123 would fail);
  p_S ≤ 0.025 0.0249 (se 0.0034, z −0.03); p_A ≤ 0.025 0.0366 — the head rate's excess is the
  axes family's, and it is this head sample's: the same heads read 0.032–0.037 against five
  reduced and three full-factor profile nulls, 20,000 fresh heads 0.025–0.028.
- 384 × 32, n 2,052: head p ≤ 0.05 0.0507 (se 0.0048, z +0.14); p_S ≤ 0.025 0.0263 (se
  0.0034, z +0.38); p_A ≤ 0.025 0.0268.

Cost from the empty cache (2 cores at load 11–17): 142 CPU-s at 128 × 16 (105 of them the three
joint tables) and 177 at 384 × 32 (134), 6 and 9 min wall.
"""

from __future__ import annotations

import numpy as np
import pytest

#: (d, d_h) -> layers; heads a layer d / d_h, so n = 2,048 and 2,052.
SHAPES = {(128, 16): 256, (384, 32): 171}
#: The nulls' seed: not the shipped 0 (nor 5 and 77 of tests/test_pvalue_joint.py).
NULL_SEED = 7
#: The untrained heads' numpy seed.
HEAD_SEED = 2026
#: (level, the score's variable) asserted.
RATES = ((0.05, "head_p_value"), (0.025, "head_p_statistics"))


def _null_model(d: int, d_h: int, layers: int):
    """(ModelInfo, [LayerHeads]): ``layers`` layers of d / d_h untrained heads each."""
    from rmtbase.models.types import LayerHeads, ModelInfo

    heads = d // d_h
    rng = np.random.default_rng(HEAD_SEED)
    out = []
    for li in range(layers):
        wq = (0.02 * rng.standard_normal((heads, d_h, d))).astype(np.float32)
        wk = (0.02 * rng.standard_normal((heads, d_h, d))).astype(np.float32)
        out.append(LayerHeads(layer=li, wq=wq, wk=wk, storage="float32"))
    info = ModelInfo(name=f"untrained-{d}x{d_h}", revision=None, architecture="bert", d=d,
                     d_h=d_h, n_layers=layers, n_heads=heads, n_kv_heads=heads)
    return info, out


def test_the_untrained_model_has_the_stated_size():
    """The heads the slow test scores: n ≥ 2,000 at each shape, i.i.d. entries of sd 0.02."""
    for (d, d_h), layers in SHAPES.items():
        info, out = _null_model(d, d_h, layers)
        n = sum(layer.n_heads for layer in out)
        assert n >= 2000 and n == info.n_layers * info.n_heads
        assert out[0].wq.shape == (d // d_h, d_h, d)
        w = np.concatenate([layer.wk.ravel() for layer in out[:4]])
        assert abs(float(w.std()) - 0.02) < 2e-4


@pytest.mark.slow  # from an empty cache: 142 / 177 CPU-s, 6 / 9 min wall at load 11-17
@pytest.mark.parametrize("d, d_h", list(SHAPES))
def test_the_head_decision_is_calibrated_at_the_default_null(d, d_h, tmp_path, monkeypatch):
    from rmtbase.scoring.score import score_heads

    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    info, layers = _null_model(d, d_h, SHAPES[(d, d_h)])
    ds = score_heads(info, layers, progress=False, spectrum_draws=0, seed=NULL_SEED)
    joint = ds["head_calibration_draws"].values
    p_axes = ds["head_p_axes"].values.ravel()
    print(f"{d}x{d_h}: joint draws {int(joint.min())}-{int(joint.max())}, profile "
          f"{ds.attrs.get('profile_null_draws')}, spectral {ds.attrs.get('spectral_null_draws')}"
          f"; P(p_A <= 0.025) = {np.mean(p_axes <= 0.025):.4f}")
    failed = []
    for level, name in RATES:
        p = ds[name].values.ravel()
        assert np.isfinite(p).all() and p.size >= 2000, (name, p.size)
        rate, se = float(np.mean(p <= level)), float(np.sqrt(level * (1 - level) / p.size))
        print(f"{d}x{d_h}: P({name} <= {level}) = {rate:.4f} (n {p.size}, se {se:.4f}, "
              f"z {(rate - level) / se:+.2f})")
        if abs(rate - level) > 2 * se:
            failed.append((name, level, rate, se))
    assert not failed, failed
