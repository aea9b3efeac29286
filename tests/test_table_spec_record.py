"""A table's storage travels as its record: looked up once where the name enters (make_spec,
table_key, score_requests), read by the drawing code, and written out as the name (the table's
``storage_dtype`` attr, its sampler line, the resume store's key)."""

from rmtbase.baseline import cache, partial
from rmtbase.baseline.null import sampler
from rmtbase.baseline.sweep_cache import score_requests
from rmtbase.baseline.table_contents import fast_spectral
from rmtbase.baseline.tables import baseline, make_spec
from rmtbase.stats.storage import storage_record


def test_the_spec_holds_the_record_looked_up_once():
    spec = make_spec(draws=10, storage="Q8_0")
    assert spec.storage is storage_record("q8_0")
    assert make_spec(draws=10).storage is storage_record("float32")
    # the request's record is forwarded, not its name looked up again
    key = cache.table_key(64, 4, stats="all", min_draws=10, storage="q4_0")
    assert key.spec().storage is key.storage is storage_record("q4_0")
    # float storages of a spectral request share the float32 spectral null
    assert cache.table_key(64, 4, stats="spectral", storage="bfloat16").storage.name == "float32"


def test_fast_spectral_reads_the_record():
    assert fast_spectral("spectral", "lowrank", storage_record("bfloat16"))
    assert not fast_spectral("spectral", "lowrank", storage_record("q8_0"))
    assert not fast_spectral("all", "lowrank", storage_record("float32"))
    assert [r["storage"] for r in score_requests("all", 100, "bfloat16")] == ["bfloat16",
                                                                             "float32"]


def test_names_where_the_record_is_written_out():
    """The attr, the sampler line and the resume key spell the name, as when the spec held it."""
    spec = make_spec(draws=2, stats="elementwise", storage="q8_0")
    assert sampler(32, 4, "elementwise", storage=spec.storage).startswith(
        "lowrank factors W_Q, W_K drawn in full, stored as q8_0 (rmtbase.stats.precision)")
    assert "stored as" not in sampler(32, 4, "elementwise", storage=storage_record("float32"))
    ds = baseline(32, 4, draws=2, stats="elementwise", storage="q8_0", progress=False)
    assert ds.attrs["storage_dtype"] == "q8_0" and ds.attrs["sampler"] == "32x4: " + sampler(
        32, 4, "elementwise", storage=spec.storage)
    # the resume key: one per storage, the same for a name spelled otherwise
    keys = {partial.store_key(make_spec(draws=2, storage=s)) for s in ("q8_0", "Q8_0")}
    assert len(keys) == 1
    assert partial.store_key(make_spec(draws=2, storage="q4_0")) not in keys
