"""Every architecture scores from a local folder (tiny random models, spectral statistics).

The null tables go to a temporary RMTBASE_CACHE (300 draws). The default run scores the
architectures whose heads have d_h = 16 (one null cell, (64, 16)) and that between them cover
the fused, MQA, MoE, QK-norm and encoder layouts; the slow run scores every architecture of the
zoo (also d_h = 24).
"""

from __future__ import annotations

import numpy as np
import pytest
from _null_flags import assert_no_head_flagged_at
from test_models_zoo import all_specs
from test_models_zoo import saved as zoo_saved

from rmtbase.models import model_info

SPECS = all_specs()
FAST = ["olmo2", "falcon", "gpt_bigcode", "mixtral", "phi3", "vit", "distilbert"]


@pytest.fixture(scope="module")
def cache(module_cache):
    return module_cache


def _score(folder):
    from rmtbase.scoring import score_model

    return score_model(folder, stats="spectral", draws=300, progress=False, spectrum_draws=0)


def _check(name, tmp_path_factory):
    _, folder = zoo_saved(name, tmp_path_factory)
    info = model_info(folder)
    ds = _score(folder)
    assert ds.sizes["layer"] == info.n_layers and ds.sizes["head"] == info.n_heads
    assert np.isfinite(ds["value"].values).all()
    assert_no_head_flagged_at(ds, what=f"a random-init {name} model")


def test_fast_set_is_one_null_cell():
    assert {SPECS[n].d_h for n in FAST} == {16}


@pytest.mark.parametrize("name", FAST)
def test_scores_from_folder(cache, tmp_path_factory, name):
    _check(name, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in SPECS if n not in FAST])
def test_scores_from_folder_all(cache, tmp_path_factory, name):
    _check(name, tmp_path_factory)
