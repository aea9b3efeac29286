"""The spectrum band's lean program: the same λ and rms bits as the float32
spectral table's program, and chosen only where no float32 null shares that program."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np
import pytest
import xarray as xr

from rmtbase.baseline.null import lambda_draws, null_draws
from rmtbase.scoring.heads import pipeline
from rmtbase.stats.storage import FLOAT32, storage_record


def test_lean_program_same_lambda_and_rms_bits():
    """statistics=False drops the statistics from the program, not a bit of λ or the rms
    (fixed key; 130 draws: two vectorised batches, the second padded)."""
    key = jax.random.fold_in(jax.random.key(3), 0x5EC7)
    full = null_draws(key, 96, 16, 130, stats="spectral", return_lambda=True)
    lean = lambda_draws(key, 96, 16, 130, statistics=False)
    assert sorted(lean) == ["k.rms", "q.rms", "qk.lambda"]
    for name in lean:
        assert lean[name].dtype == full[name].dtype
        assert lean[name].tobytes() == full[name].tobytes(), name
    shared = lambda_draws(key, 96, 16, 130)
    assert shared.keys() == full.keys()
    assert all(shared[k].tobytes() == full[k].tobytes() for k in full)


@pytest.mark.parametrize(("storages", "share"), [
    (["q4_1", "q4_1"], False), (["q5_0"], False), (["float32"], True),
    (["q4_1", "float16"], True), (["bfloat16"], True)])
def test_band_shares_the_table_program_only_with_a_float_null(monkeypatch, storages, share):
    """A layer with a float null storage (whose spectral table is the fast float32 program)
    keeps the shared program; only block-quantised nulls get the lean one."""
    seen = {}

    def band(d, d_h, n, *, seed, share_table):
        seen["share"] = share_table
        return np.zeros((3, d_h))

    monkeypatch.setattr(pipeline, "null_spectrum_band", band)
    recs = [FLOAT32 if s == "float32" else storage_record(s) for s in storages]
    read = SimpleNamespace(null_records=recs, null_storages=[r.name for r in recs],
                           layer_ids=list(range(len(recs))),
                           quantisation_names=["none"] * len(recs))
    opts = SimpleNamespace(spectrum_draws=200, seed=0)
    pipeline._add_layers(xr.Dataset(), read, opts, 64, 16)
    assert seen["share"] is share
