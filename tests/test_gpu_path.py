"""The accelerator path, checked on the CPU: the sort-based histogram counts (the same integers
as the scatter), the batch budget of null draws (an accelerator's from its memory limit, the
CPU's unchanged), reading the next layer while one is scored (the same bytes, at most one layer
ahead), the trace/power route of the spectral statistics (within the symmetric routes'
accuracy rule) and its lowering for CUDA."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.baseline.eig_route import EIGH_MAX_REL_ERROR
from rmtbase.stats._binning import entropy_bins, sorted_bincount


def _lower_cuda(fn, *args) -> str:
    """StableHLO text of ``fn`` lowered for the CUDA platform (no GPU needed)."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


# --- histograms without hot scatter-adds ------------------------------------------------------

@pytest.mark.parametrize("n, length", [(1, 1), (1000, 7), (4096, 168), (50_000, 513)])
def test_blocked_and_sorted_bincount_equal_the_scatter(n, length):
    """Same counts and dtype as ``jnp.bincount`` by per-block histograms (several block counts,
    one that does not divide n) and by a sort; the indices come from the entropy histogram's
    own formula on values that include the bin edges exactly (ties) and both ends, and from a
    skewed draw that leaves bins empty."""
    from rmtbase.stats._binning import blocked_bincount, blocked_sum, histogram_blocks

    rng = np.random.default_rng(n)
    w = rng.standard_normal(n).astype(np.float32)
    hmin, delta = -2.0, np.float32(4.0 / length)
    edges = (hmin + delta * rng.integers(0, length + 1, n // 3)).astype(np.float32)
    w[: edges.size] = edges  # values exactly on an edge
    idx = jnp.clip(jnp.floor((jnp.asarray(w) - hmin) / delta), 0, length - 1).astype(jnp.int32)
    skew = jnp.asarray(np.minimum(rng.geometric(0.3, n) - 1, length - 1), jnp.int32)
    for x in (idx, skew):
        want = jnp.bincount(x, length=length)
        for got in (jax.jit(sorted_bincount, static_argnums=1)(x, length),
                    jax.jit(blocked_bincount, static_argnums=1)(x, length),
                    blocked_bincount(x, length, blocks=min(n, 7))):
            assert got.dtype == want.dtype
            # exact: integer counts
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            assert int(got.sum()) == n
        # float values: the same sums in another order (float64 here: to rounding)
        vals = jnp.asarray(rng.standard_normal(n))
        np.testing.assert_allclose(np.asarray(blocked_sum(x, vals, length, min(n, 5))),
                                   np.asarray(jnp.zeros(length).at[x].add(vals)),
                                   rtol=1e-12, atol=1e-12)
    assert histogram_blocks(4096 * 4096, 513) == 1024 and histogram_blocks(n, 65538) <= 32


@pytest.mark.slow
def test_element_statistics_by_the_accelerator_histograms(monkeypatch):
    """Every element statistic of a tile computed with the accelerator's histograms (per-block
    counts and |w| sums, forced here on the CPU) against the CPU's scatters: the counts are the
    same integers, so every statistic but the Weibull fit is the same bytes (float32 and the
    bfloat16 lattice, with the side histogram of the joint count); the fit, which reads the
    per-bin Σ ln|w| summed in another order, agrees to float32 rounding."""
    from rmtbase.stats import _binning, fused
    from rmtbase.stats.tiles import one_tile

    rng = np.random.default_rng(1)
    w = jnp.asarray(rng.standard_normal(96 * 640), jnp.float32)
    side = (1.0, -3.0, 0.25, 24)
    results = {}
    for how in ("cpu", "accelerator"):
        if how == "accelerator":
            monkeypatch.setattr(_binning, "on_accelerator", lambda: True)
            monkeypatch.setattr(fused, "on_accelerator", lambda: True)
        for storage in ("float32", "bfloat16"):
            x = w.astype(jnp.bfloat16).astype(jnp.float32) if storage == "bfloat16" else w
            # a fresh function each time: a new trace with the patched histograms
            out = jax.jit(lambda v, s=storage: one_tile(v, (0.8,), s, side))(x)
            results[how, storage] = jax.tree.map(np.asarray, out)
    for storage in ("float32", "bfloat16"):
        a, b = results["cpu", storage], results["accelerator", storage]
        assert a.keys() == b.keys()
        for k in a:
            for u, v in zip(jax.tree.leaves(a[k]), jax.tree.leaves(b[k]), strict=True):
                assert u.dtype == v.dtype, (storage, k)
                if k == "weibull":
                    np.testing.assert_allclose(v, u, rtol=2e-6, err_msg=f"{storage} {k}")
                else:
                    assert u.tobytes() == v.tobytes(), (storage, k)


def test_histograms_lower_for_cuda():
    """The accelerator's counts lower for CUDA: per-block (a scatter into blocks × bins) and
    sorted (a sort, no scatter); the CPU keeps the one scatter into the bins (measured: the
    sort 15–190× slower there)."""
    from rmtbase.stats import _binning

    n = 4096 * 8
    idx = jnp.zeros(n, jnp.int32)
    text = _lower_cuda(lambda x: sorted_bincount(x, entropy_bins(n)), idx)
    assert "sort" in text and "scatter" not in text
    blocks = _binning.histogram_blocks(n, entropy_bins(n))
    assert blocks == 8
    text = _lower_cuda(lambda x: _binning.blocked_bincount(x, entropy_bins(n)), idx)
    assert "scatter" in text and f"tensor<{blocks}x{entropy_bins(n)}xi" in text
    assert jax.default_backend() == "cpu" and not _binning.on_accelerator()
    cpu = jax.jit(lambda x: _binning.bincount(x, 7)).trace(idx).lower().as_text()
    assert "scatter" in cpu and "tensor<7xi" in cpu


# --- the batch budget of null draws ----------------------------------------------------------

def test_batch_budget_cpu_unchanged_accelerator_from_its_memory(monkeypatch):
    from rmtbase.baseline import limits
    from rmtbase.baseline.null import MEMORY_BUDGET, draw_batch

    monkeypatch.delenv("RMTBASE_MEMORY_LIMIT", raising=False)
    assert limits.batch_budget("cpu") == MEMORY_BUDGET == 512 * 2**20
    assert limits.batch_budget() == MEMORY_BUDGET  # this machine's backend is the CPU
    # an 80 GB card's allocator limit (75 %: 60 GiB): a quarter, down to a power of two
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "60G")
    assert limits.batch_budget("gpu") == 8 * 2**30
    monkeypatch.setenv("RMTBASE_MEMORY_LIMIT", "1G")  # never below the CPU's
    assert limits.batch_budget("gpu") == MEMORY_BUDGET
    assert limits.batch_budget("cpu") == MEMORY_BUDGET  # the CPU never reads it
    # (4096, 128) all statistics, bfloat16 storage: one draw wide under 512 MiB, 14 under 8 GiB
    per = limits.draw_memory(4096, 128, "all", "lowrank", 4, False)
    assert per > MEMORY_BUDGET
    assert draw_batch(4096, 128, "all", "lowrank", 4, MEMORY_BUDGET, backend="gpu") == 1
    assert draw_batch(4096, 128, "all", "lowrank", 4, 8 * 2**30, backend="gpu") == \
        8 * 2**30 // per > 10
    # the CPU's widths are those of the shipped tables
    assert draw_batch(4096, 128, "all", "lowrank", 4, MEMORY_BUDGET, backend="cpu") == 1
    assert draw_batch(768, 64, "spectral", "lowrank", 4, MEMORY_BUDGET, backend="cpu") == 125
    assert draw_batch(768, 64, "all", "lowrank", 4, MEMORY_BUDGET, backend="cpu") == 23


# --- reading ahead ---------------------------------------------------------------------------

class _Layers:
    """A layer iterator that counts the items alive (made, not yet released by the caller)."""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.alive, self.peak, self.closed = n, fail_at, 0, 0, False
        self.threads = set()
        self.lock = threading.Lock()

    def release(self, _):
        with self.lock:
            self.alive -= 1

    def __iter__(self):
        import weakref

        try:
            for i in range(self.n):
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at:
                    raise ValueError(f"layer {i} unreadable")
                item = np.full(4, i)
                with self.lock:
                    self.alive += 1
                    self.peak = max(self.peak, self.alive)
                weakref.finalize(item, self.release, i)
                yield item
                del item
        finally:
            self.closed = True


def test_read_ahead_same_items_one_ahead():
    from rmtbase.scoring.heads.read_ahead import read_ahead

    src = _Layers(6)
    got = []
    for item in read_ahead(src):
        got.append(int(item[0]))
        del item
    assert got == list(range(6)) and src.closed
    assert src.peak <= 2  # the one being scored and the one being read
    assert all(t.startswith("rmtbase-read-ahead") for t in src.threads)


def test_read_ahead_errors_and_early_stop():
    from rmtbase.scoring.heads.read_ahead import read_ahead

    src = _Layers(5, fail_at=3)
    seen = []
    with pytest.raises(ValueError, match="layer 3 unreadable"):
        for item in read_ahead(src):
            seen.append(int(item[0]))
    assert seen == [0, 1, 2] and src.closed
    src = _Layers(5)
    gen = read_ahead(src)
    assert int(next(gen)[0]) == 0
    gen.close()  # the caller stops: the read in flight ends, the iterator is closed
    assert src.closed


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A small LLaMA (GQA: 4 query heads on 2 key heads, d = 64, 4 layers) saved with
    save_pretrained as bfloat16 safetensors."""
    import torch
    import transformers

    torch.manual_seed(7)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=128, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    folder = tmp_path_factory.mktemp("llama-read-ahead")
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.mark.slow
def test_score_with_read_ahead_is_the_same_bytes(llama_folder, module_cache, monkeypatch):
    """The score of a saved folder with the next layer read in a thread equals the score read
    layer by layer in this thread, every variable and attribute (but the time it was made)."""
    from rmtbase.scoring.heads import pipeline
    from rmtbase.scoring.score import score_model

    kw = dict(stats="spectral", draws=200, spectrum_draws=0, progress=False)
    ahead = score_model(str(llama_folder), **kw)
    monkeypatch.setattr(pipeline, "READ_AHEAD", False)
    plain = score_model(str(llama_folder), **kw)
    stamp = ("created",)  # the wall-clock time of the run
    assert {k: v for k, v in ahead.attrs.items() if k not in stamp} == \
        {k: v for k, v in plain.attrs.items() if k not in stamp}
    assert set(ahead.variables) == set(plain.variables)
    for name in plain.variables:
        a, b = ahead[name].values, plain[name].values
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name


# --- the trace/power route of the spectral statistics ----------------------------------------

def _cores(d, d_h, n, seed):
    from rmtbase.ensembles import named_key
    from rmtbase.ensembles.wishart import gram_bidiagonal, gram_cholesky

    keys = jax.random.split(jax.random.key(seed), n)
    draw = jax.jit(jax.vmap(lambda k: (gram_bidiagonal(named_key(k, "wq"), d, d_h),
                                       gram_cholesky(named_key(k, "wk"), d, d_h))))
    (bq, sq), lk = draw(keys)
    return bq, sq, lk


@pytest.mark.parametrize("d, d_h", [(256, 16), (768, 64)])
def test_moment_route_equals_the_eigh_route(d, d_h):
    """Each statistic of :func:`moment_stats` within EIGH_MAX_REL_ERROR of the CPU's route
    (``"eigh"``, what the null draws there) and of float64 eigenvalues, on 150 null cores;
    measured ≤ 10⁻⁶ (module docstring), so the bound has two decades of room."""
    from rmtbase.stats._moments_route import MOMENT_STATS, moment_stats
    from rmtbase.stats.spectral import bidiagonal_core, eigvals_from_bidiagonal, spectral_stats

    bq, sq, lk = _cores(d, d_h, 150, seed=d_h)
    core = bidiagonal_core(bq, sq, lk)
    lam = jax.jit(lambda a, b, c: eigvals_from_bidiagonal(a, b, c, "eigh"))(bq, sq, lk)
    ref = spectral_stats(lam)
    got = jax.jit(moment_stats)(core)
    c64 = np.asarray(core, np.float64)
    l64 = np.linalg.eigvalsh(c64 @ np.swapaxes(c64, -1, -2))
    s1, s2 = l64.sum(-1), (l64 ** 2).sum(-1)
    exact = {"lambda_max": l64.max(-1), "lambda_min": l64.min(-1), "sum_lambda": s1,
             "sum_lambda2": s2, "pr": s1 ** 2 / s2, "npr": s1 ** 2 / s2 / d_h,
             "condition_number": l64.max(-1) / l64.min(-1), "stable_rank": s1 / l64.max(-1)}
    for s in MOMENT_STATS:
        a = np.asarray(got[s], np.float64)
        assert a.shape == (150,) and np.all(np.isfinite(a)), s
        assert np.max(np.abs(a / np.asarray(ref[s], np.float64) - 1)) <= EIGH_MAX_REL_ERROR, s
        assert np.max(np.abs(a / exact[s] - 1)) <= EIGH_MAX_REL_ERROR, s


def test_moment_route_near_tie_and_lowering_for_cuda():
    """A matrix with a double top and a double bottom eigenvalue (the power iteration's worst
    case) still gives λ_max and λ_min to float rounding; the route lowers for CUDA as GEMMs
    alone (no LAPACK/cuSOLVER custom call, no Pallas/Triton kernel)."""
    from rmtbase.stats._moments_route import moment_stats

    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((16, 16)))
    s = np.linspace(1.0, 3.0, 16)
    s[:2], s[-2:] = 1.0, 3.0  # ties at both ends
    core = jnp.asarray((q * s) @ q.T, jnp.float32)  # eigenvalues of C Cᵀ: s²
    got = jax.jit(moment_stats)(core)
    assert abs(float(got["lambda_max"]) / 9.0 - 1) < 1e-5
    assert abs(float(got["lambda_min"]) / 1.0 - 1) < 1e-5
    text = _lower_cuda(moment_stats, jnp.zeros((8, 64, 64), jnp.float32))
    assert "dot_general" in text
    for word in ("custom_call", "triton", "cusolver", "lapack"):
        assert word not in text.lower(), word
