"""What the cache holds never changes a score: a spectral-only score of a tiny GPT-2 gives the
same head p-values in a cold cache and in one where a full (all-statistics) score ran first
(a cached all-statistics table's spectral draws are not a spectral table's, so it must not
serve the spectral request). Random-weight model from a config, no network."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

_SCRIPT = """
import os, sys, numpy as np
from rmtbase.scoring.score import score_model
if sys.argv[2] == "all-first":
    score_model(sys.argv[1], progress=False, spectrum_draws=0)
ds = score_model(sys.argv[1], progress=False, spectrum_draws=0, stats="spectral")
np.save(sys.argv[3], ds.head_p_value.values)
"""


@pytest.mark.slow  # three scores of a tiny model in fresh processes (~2 min on 2 cores)
def test_a_spectral_score_does_not_depend_on_a_cached_full_table(tmp_path):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=50,
                               n_positions=32)).save_pretrained(tmp_path / "g")
    got = {}
    for order in ("cold", "all-first"):
        env = {**os.environ, "RMTBASE_CACHE": str(tmp_path / f"cache-{order}"),
               "OPENBLAS_NUM_THREADS": "1"}
        out = tmp_path / f"{order}.npy"
        subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "g"), order, str(out)],
                       env=env, check=True, timeout=1200)
        got[order] = np.load(out)
    # exact: one program on one machine draws both tables; the claim is that they are the same draws
    np.testing.assert_array_equal(got["cold"], got["all-first"])
