"""A null carries its storage's record: looked up once where the null is made,
read by its callers instead of looking the name up again; the name stays the public value.

The record-travels checks use a variant record under a shipped name (q8_0 declared a float
family): a caller that looked the name up again would describe the shipped q8_0 (a block
quantiser), one that reads the carried record describes the variant (a rounding).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rmtbase.errors import InputError
from rmtbase.scoring.description import null_description
from rmtbase.stats.null_kind import GaussianNull, PermutationNull
from rmtbase.stats.storage import storage_record


def test_the_record_is_looked_up_at_construction_and_the_name_stays_public():
    g = GaussianNull("q4_k")
    assert g.storage == "q4_k" and g.storage_record is storage_record("q4_k")
    from_record = GaussianNull(storage_record("float16"))
    assert from_record.storage == "float16"  # the name, as before
    assert repr(from_record) == "GaussianNull(storage='float16')" == repr(GaussianNull("float16"))
    assert from_record == GaussianNull("float16")
    assert hash(from_record) == hash(GaussianNull("float16"))
    assert GaussianNull().storage_record.is_identity
    assert PermutationNull().storage_record is storage_record("float32")
    with pytest.raises(InputError, match="storage must be one of"):
        GaussianNull("Float16")  # names are exact here, as before
    with pytest.raises(InputError, match="storage must be one of"):
        GaussianNull(storage_record("float32").__class__("toy_x", "float", "x"))  # unregistered


def test_at_storage_keeps_a_record_and_looks_a_name_up_once():
    rec = storage_record("q6_k")
    at = GaussianNull().at_storage(rec)
    assert at.storage == "q6_k" and at.storage_record is rec
    assert GaussianNull().at_storage("bfloat16").storage_record is storage_record("bfloat16")


def test_the_description_reads_the_carried_record():
    variant = replace(storage_record("q8_0"), family="float", bits=8)  # q8_0, said a rounding
    assert GaussianNull("q8_0").stored() == ("passed through the q8_0 block quantiser "
                                             "like the checkpoint")
    assert GaussianNull(variant).stored() == "rounded to q8_0 like the checkpoint"
    # a mixed Q4_K + Q8_0 layer under "auto" keeps its float32 null: unmatched, decided on the
    # record the null at that storage carries (a record or a name given for the model)
    for st in (storage_record("float32"), "float32"):
        text = null_description(GaussianNull(), st, "q4_k+q8_0", "auto")
        assert text.endswith("the weights look dequantised from q4_k+q8_0 but the null is "
                             "not: histogram statistics are left out of the decision")
    text = null_description(GaussianNull(), storage_record("q4_0"), "q4_0", "auto")
    assert "dequantised" not in text and "q4_0 block quantiser" in text
    # per layer: records say what their names say
    names = ["q4_0", "q4_0", "float32"]
    by_name = null_description(GaussianNull(), names, ["q4_0", "q4_0", None], "auto", [0, 1, 2])
    by_record = null_description(GaussianNull(), [storage_record(n) for n in names],
                                 ["q4_0", "q4_0", None], "auto", [0, 1, 2])
    assert by_record == by_name and "q4_0 block quantiser (layers 0-1); float32" in by_name


def test_a_null_that_sets_no_record_has_its_storages():
    """A user's null stored like the checkpoint, with a ``storage`` of its own but no record:
    ``storage_record`` follows its storage (looked up when read), not float32's."""
    from dataclasses import dataclass
    from typing import ClassVar

    from rmtbase.stats.null_kind import Null

    @dataclass(frozen=True)
    class StoredNull(Null):  # keeps Null's empty name: not registered
        stored_like_checkpoint: ClassVar[bool] = True
        storage: str = "float32"

        def at_storage(self, storage):
            return StoredNull(storage_record(storage).name)

        def reference(self, cells, storage, *, draws, seed, progress):
            raise NotImplementedError

        def description(self):
            return "stored"

    assert StoredNull("q6_k").storage_record is storage_record("q6_k")
    assert StoredNull().at_storage(storage_record("bfloat16")).storage_record.name == "bfloat16"
    assert StoredNull.storage_record is storage_record("float32")  # the class's own storage
