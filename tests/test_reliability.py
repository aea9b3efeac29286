"""Issue 35 (reliability, fourth pass): each case that failed there, as run by a hostile user.

NaN weights in the probe, extreme but finite weight scales in score, imports and Ctrl-C at
start-up, output folders owned by one command, and work refused up front rather than after
the expensive part."""

from __future__ import annotations

import shutil

import _probe_models as pm
import numpy as np
import pytest

from rmtbase.cli import main
from rmtbase.errors import ModelError


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return pm.llama(tmp_path_factory.mktemp("rel") / "tiny-llama")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "prose.txt"
    p.write_text(pm.TEXT, encoding="utf-8")
    return p


def _with_nan(src, dst):
    """A copy of the Llama folder ``src`` with one NaN in layer 1's W_Q."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    name = next(k for k in tensors if "layers.1." in k and "q_proj" in k)
    tensors[name] = tensors[name].copy()
    tensors[name][3, 5] = np.nan
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


# 1. probe: a NaN weight is refused in one line (as score refuses it), never a wrong answer
def test_probe_refuses_nan_weight(tmp_path, llama_dir, text_file, capsys):
    from rmtbase.probe import probe_model

    bad = _with_nan(llama_dir, tmp_path / "nan-llama")
    with pytest.raises(ModelError, match="non-finite"):
        probe_model(bad, text=text_file, window=16, progress=False)
    out = tmp_path / "o"
    assert main(["probe", str(bad), "--text", str(text_file), "--window", "16",
                 "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    ours = [ln for ln in err.splitlines() if ln.startswith("rmtbase:")]
    assert len(ours) == 1 and "non-finite" in ours[0] and "q_proj" in ours[0], err
    assert "Traceback" not in err and not out.exists()


def test_is_causal_is_not_fooled_by_nan():
    import torch

    from rmtbase.probe.run import is_causal

    t = 6
    causal = torch.tril(torch.rand(1, 2, t, t))
    causal = causal / causal.sum(-1, keepdim=True)
    causal[0, 1, 3, :] = float("nan")  # one NaN row, as a NaN logit gives
    assert is_causal([causal])
    full = torch.rand(1, 2, t, t)
    full[0, 0, 2, :] = float("nan")
    assert not is_causal([full])
