"""The draw driver's chunk keys are hashed on the host (otherwise a cold score compiles
three programs per chunk size for them): the same key words as ``jax.random.fold_in``, bit
for bit, and no compiled program for them.

References are JAX's own ``fold_in`` per index (an independent computation: JAX's
``threefry2x32_p`` lowering against the numpy rounds of ``threefry.threefry2x32``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import dispatch, monitoring

from rmtbase.ensembles import draws, map_draws
from rmtbase.ensembles.threefry import fold_in_words

DATA = np.array([0, 1, 2, 37, 124, 125, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=np.uint32)


def _jax_words(key, data):
    return np.stack([np.asarray(jax.random.key_data(jax.random.fold_in(key, int(i))))
                     for i in data])


@pytest.mark.parametrize("key", [jax.random.key(0), jax.random.key(2**31 + 5),
                                 jax.random.fold_in(jax.random.key(7), 3),
                                 jax.random.PRNGKey(9)],
                         ids=["key0", "key-large", "folded", "raw"])
def test_fold_in_words_are_jax_fold_in(key):
    got = fold_in_words(key, DATA)
    assert got.dtype == np.uint32 and got.shape == (DATA.size, 2)
    # exact: integer key words (any differing bit is another key)
    assert np.array_equal(got, _jax_words(key, DATA))


def test_fold_in_words_declines_what_it_does_not_hash():
    assert fold_in_words(jax.random.key(0, impl="rbg"), DATA) is None
    assert fold_in_words(jax.random.split(jax.random.key(0), 2), DATA) is None  # not one key
    seen = []
    jax.jit(lambda k: seen.append(fold_in_words(k, DATA)) or k)(jax.random.key(0))
    assert seen == [None]  # a traced key


@pytest.mark.parametrize("key", [jax.random.key(11), jax.random.PRNGKey(11),
                                 jax.random.key(11, impl="rbg")], ids=["typed", "raw", "rbg"])
def test_chunk_keys_equal_the_vmapped_fold_in(key):
    got = draws._chunk_keys(key, 250, 38)
    want = draws._fold(key, jnp.arange(250, 288, dtype=jnp.uint32))
    assert got.dtype == want.dtype and got.shape == want.shape
    unwrap = jax.random.key_data if jax.dtypes.issubdtype(want.dtype, jax.dtypes.prng_key) \
        else np.asarray
    # exact: integer key words
    assert np.array_equal(np.asarray(unwrap(got)), np.asarray(unwrap(want)))


def test_map_draws_compiles_no_program_for_its_keys():
    names = []

    def listen(event, duration, **kw):  # noqa: ARG001 - the listener API
        if event == dispatch.BACKEND_COMPILE_EVENT:
            names.append(kw.get("fun_name", ""))

    monitoring.register_event_duration_secs_listener(listen)
    try:
        out = map_draws(lambda k: jax.random.uniform(k, (3,)) * 7.0, jax.random.key(4), 23,
                        chunk_size=11, method="map")
    finally:
        monitoring.unregister_event_duration_listener(listen)
    assert not [n for n in names if any(s in n for s in ("fold_in", "iota", "add", "stage"))], names
    want = np.stack([np.asarray(jax.random.uniform(jax.random.fold_in(jax.random.key(4), i),
                                                   (3,)) * 7.0) for i in range(23)])
    np.testing.assert_allclose(out, want, rtol=1e-6)  # other programs: same law, last bits
