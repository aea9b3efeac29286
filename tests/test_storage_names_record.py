"""A storage name list answers for a record as for its name (storages travel as
records, and a record tested against ``FLOAT_STORAGES`` or ``QUANT_FORMATS`` was silently
outside every list: ``storage_names.__contains__`` took strings only)."""

from __future__ import annotations


def test_a_record_is_in_the_lists_its_name_is_in():
    from rmtbase.stats.names import FLOAT_STORAGES, FP8_FORMATS, QUANT_FORMATS, STORAGES
    from rmtbase.stats.storage import FLOAT32, Storage, records, storage_record

    for record in records():
        for names in (FLOAT_STORAGES, FP8_FORMATS, QUANT_FORMATS, STORAGES):
            assert (record in names) == (record.name in names), (record.name, names)
    assert storage_record("q4_0") in QUANT_FORMATS and FLOAT32 in FLOAT_STORAGES
    assert FLOAT32 not in QUANT_FORMATS and storage_record("fp8_e4m3") in FP8_FORMATS
    # a record that is not the registered one of its name is in no list
    stranger = Storage("q4_0", "float", "precision:cast", bits=11)
    assert stranger not in STORAGES and stranger not in FLOAT_STORAGES
    assert 3 not in STORAGES and None not in STORAGES
