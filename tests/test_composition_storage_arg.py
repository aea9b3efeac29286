"""composition's ``null_storage`` is checked where it enters and travels as a record: a
float storage in any case becomes its record (the files spell its name, and the QK overlap's
null is drawn at it too), anything else is refused in one line before any weight is read.
So ``"Float16"`` reaches neither the file's ``null_storage`` attr nor a cache name as typed,
the overlap's null does not fall back to float32, and ``"q4_0"`` or ``"int4"`` do not run the
QK and OV products first.

Cost: a 2-layer GPT-2 with 2 heads of 16 (d = 32), 60 null draws.
"""

from __future__ import annotations

import pytest

import rmtbase
from rmtbase.errors import InputError


@pytest.mark.parametrize("bad", ["q4_0", "int4", "", None, 16])
def test_a_bad_null_storage_is_refused_before_the_model_is_read(bad):
    with pytest.raises(InputError, match=r"^null_storage must be 'auto' or one of float32, "):
        rmtbase.composition("/no/such/model", null_storage=bad)


def test_a_float_storage_in_any_case_is_its_record(tmp_path, module_cache):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from rmtbase.scoring.composition.pairs import composition_storage
    from rmtbase.stats.storage import storage_record

    f16 = storage_record("float16")
    assert composition_storage("Float16") is f16 and composition_storage(f16) is f16
    assert composition_storage("auto") == "auto"
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=16, n_positions=8,
                               bos_token_id=0, eos_token_id=0)).save_pretrained(tmp_path / "m")
    typed = rmtbase.composition(str(tmp_path / "m"), draws=60, null_storage="Float16")
    lower = rmtbase.composition(str(tmp_path / "m"), draws=60, null_storage="float16")
    assert typed.attrs["null_storage"] == typed.attrs["qk_overlap_null_storage"] == "float16"
    cached = sorted(p.name for p in (module_cache / "composition").glob("*.nc"))  # the nulls
    assert cached and all("-float16-" in n for n in cached), cached
    for var in ("composition_p", "qk_overlap_p"):
        # exact: the same draws (same seed, same storage) on the same weights, one program
        assert typed[var].equals(lower[var]), var
