"""Every cached null verified on read.

Each kind of file the user cache keeps — a null table, the profile null, the composition and
QK-overlap nulls, a whole-matrix null — is damaged in each way the red team tried (values
halved, zeroed, ×3, another null's file copied over and relabelled, one NaN, bit 0x40 of the
byte at 90 % flipped, every value NaN): the next read gives one warning naming the file, the
numbers of a clean cold run (exactly: the same draws, redrawn by the same program), and the
file is replaced by the one a clean run writes. A cache that cannot be written is said once
and a growing null continues from its last step. Before the checksums every damaged file but
the unreadable ones was used as it was (other p-values, flags), an all-NaN profile file made
every later score of its shape fail, and a read-only cache redrew the profile null from draw
0 at each growth step and gave other head p-values than a writable cold run.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

SEED = 5
CORRUPTIONS = ("halved", "zeroed", "tripled", "copied", "one-nan", "flipped", "all-nan")


@pytest.fixture(autouse=True)
def _fresh_state():
    """What a fresh process holds: nothing kept in memory, nothing reported yet."""
    from rmtbase.files.user_cache import forget

    forget()
    yield
    forget()


# ------------------------------------------------------------------ the kinds of cached file


def _table(seed):
    from rmtbase.baseline.cache import cache_target, null_table

    ds = null_table(16, 4, stats="all", min_draws=64, seed=seed)
    return {v: ds[v].values for v in ds.data_vars}, cache_target(16, 4, draws=64, seed=seed)


def _profile(seed):
    from rmtbase.scoring.profile.cache import cached_profile_null, profile_path

    got = cached_profile_null(16, 4, "float32", n=300, seed=seed)
    return got, profile_path(16, 4, "float32", 300, seed)


def _composition(seed):
    import jax

    from rmtbase.scoring.composition.cache import cached_null, null_path
    from rmtbase.scoring.composition.pairs import null_scores

    got = cached_null("composition", 16, 4, 2000, seed, "float32",
                      lambda: null_scores(jax.random.key(seed), 16, 4, 4, 2000, "float32"))
    return {"null": got}, null_path("composition", 16, 4, 2000, seed, "float32")


def _overlap(seed):
    import jax

    from rmtbase.ensembles.gaussian import named_key
    from rmtbase.scoring.composition.cache import cached_null, null_path
    from rmtbase.scoring.composition.overlap import overlap_null

    key = named_key(named_key(jax.random.key(seed), "overlap"), "distinct")
    got = cached_null("overlap-distinct", 16, 4, 2000, seed, "float32",
                      lambda: overlap_null(key, 16, 4, 2000, False, "float32"))
    return {"null": got}, null_path("overlap-distinct", 16, 4, 2000, seed, "float32")


def _matrix(seed):
    from rmtbase.baseline.matrix_null import matrix_null_table, table_filename
    from rmtbase.files.user_cache import cache_dir

    ds = matrix_null_table(8, 4, draws=40, seed=seed)
    return ({v: ds[v].values for v in ds.data_vars},
            cache_dir() / table_filename(8, 4, 40, seed, "float32"))


KINDS = {"table": _table, "profile": _profile, "composition": _composition,
         "overlap": _overlap, "matrix": _matrix}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """{kind: (cache folder, clean values, file)}: each kind drawn cold into its own cache,
    with the file of another seed beside it (the null copied over in ``copied``)."""
    from rmtbase.files.user_cache import forget

    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for kind, make in KINDS.items():
            folder = tmp_path_factory.mktemp(f"pristine-{kind}")
            mp.setenv("RMTBASE_CACHE", str(folder))
            forget()
            values, path = make(SEED)
            make(SEED + 1)
            assert path.is_file()
            out[kind] = (folder, values, path)
    forget()
    return out


# ------------------------------------------------------------------ damage and its checks


def _float_vars(nc):
    return [v for v in nc.variables.values()
            if "draw" in v.dimensions and v.dtype.kind == "f" and v.name != "draw"]


def _raw(path):
    """Every variable and global attribute of ``path`` as netCDF4 reads it (no checks)."""
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        nc.set_auto_mask(False)
        return ({k: nc.getncattr(k) for k in nc.ncattrs()},
                {v.name: np.array(v[...]) for v in nc.variables.values()})


#: Attributes that say how and when a file was made, not what its draws are (not summed).
INFORMATIONAL = {"history", "creation_time", "created", "rmtbase_version", "title",
                 "Conventions", "rmtbase_cf_added", "definition", "backend", "jax_version",
                 "jax_enable_x64", "prng_impl"}


def _same_raw(a, b) -> bool:
    """Whether two raw reads hold the same variables, checksum and attributes that matter."""
    keys = (set(a[0]) | set(b[0])) - INFORMATIONAL
    return (set(a[1]) == set(b[1])
            # exact: a redrawn file equals a fresh draw of the same program
            and all(np.array_equal(a[1][k], b[1][k], equal_nan=a[1][k].dtype.kind == "f")
                    for k in a[1])
            and all(str(a[0].get(k)) == str(b[0].get(k)) for k in keys))


def damage(path: Path, how: str, other: Path) -> None:
    """Damage the cached file ``path`` in place (``other``: a valid file of another seed)."""
    import netCDF4

    if how == "flipped":
        before = _raw(path)
        i = int(0.9 * path.stat().st_size)
        with open(path, "r+b") as f:
            while True:  # from 90 % on (97 bytes a step past metadata that no read sees),
                #  the first byte whose flip changes what is read
                f.seek(i)
                byte = f.read(1)[0]
                f.seek(i)
                f.write(bytes([byte ^ 0x40]))
                f.flush()
                try:
                    if not _same_raw(_raw(path), before):
                        return
                except Exception:  # noqa: BLE001 - unreadable counts as changed
                    return
                f.seek(i)
                f.write(bytes([byte]))
                i = (i + 97) % path.stat().st_size
    if how == "copied":
        seed = _raw(path)[0]["seed"]
        shutil.copyfile(other, path)
        with netCDF4.Dataset(path, "a") as nc:  # relabelled: its name's keys agree again
            nc.setncattr("seed", seed)
        return
    with netCDF4.Dataset(path, "a") as nc:
        nc.set_auto_mask(False)
        for v in _float_vars(nc):
            x = np.array(v[...])
            if how == "one-nan":
                x.flat[0] = np.nan
            elif how == "all-nan":
                x[...] = np.nan
            else:
                with np.errstate(invalid="ignore"):  # a draw's infinite statistic: 0·inf
                    x = x * {"halved": 0.5, "zeroed": 0.0, "tripled": 3.0}[how]
            v[...] = x
            if how == "one-nan":
                break


def _one_warning_naming(record, path: Path) -> None:
    said = [str(w.message) for w in record if "cache" in str(w.message).lower()
            or path.name in str(w.message)]
    assert len(said) == 1 and path.name in said[0], said


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_damaged_file_is_redrawn_replaced_and_never_used(pristine, tmp_path, monkeypatch, kind,
                                                         how):
    folder, clean, path = pristine[kind]
    cache = tmp_path / "cache"
    shutil.copytree(folder, cache)
    monkeypatch.setenv("RMTBASE_CACHE", str(cache))
    target = cache / path.relative_to(folder)
    other = cache / _other(kind, path).relative_to(folder)
    damage(target, how, other)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got, again = KINDS[kind](SEED)
    assert again == target
    _one_warning_naming(record, target)
    assert set(got) == set(clean)
    for v in clean:
        # exact: the draws a clean cold run made, redrawn by the same program in this process
        np.testing.assert_array_equal(np.asarray(got[v]), np.asarray(clean[v]), err_msg=v)
    assert _same_raw(_raw(target), _raw(path)), "the damaged file was not replaced"


def _other(kind, path):
    """The file of seed SEED + 1 beside ``path``."""
    return path.with_name(path.name.replace(f"seed{SEED}", f"seed{SEED + 1}"))


def test_files_written_now_verify(pristine, tmp_path, monkeypatch):
    """Every kind's file, as written, carries a checksum and is read back without a word and
    without a redraw (the file is left as it was)."""
    for kind, (folder, clean, path) in pristine.items():
        cache = tmp_path / kind
        shutil.copytree(folder, cache)
        monkeypatch.setenv("RMTBASE_CACHE", str(cache))
        target = cache / path.relative_to(folder)
        assert str(_raw(target)[0].get("rmtbase_checksum", "")).startswith("sha256:"), kind
        before = target.read_bytes(), target.stat().st_mtime_ns
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            got, _ = KINDS[kind](SEED)
        assert not [str(w.message) for w in record if "cache" in str(w.message).lower()]
        assert (target.read_bytes(), target.stat().st_mtime_ns) == before, kind
        for v in clean:
            # exact: the stored draws read back losslessly
            np.testing.assert_array_equal(np.asarray(got[v]), np.asarray(clean[v]))


def test_checksum_covers_values_and_keys():
    """The checksum changes with any value, a NaN, a key or a name, and not with the width
    the values are stored at (independent check: hashlib over the same bytes)."""
    import hashlib  # noqa: F401 - the module's own algorithm

    from rmtbase.files.checksum import checksum

    x = np.array([0.5, 1.25, 3.0], np.float32)
    base = checksum({"a": (("draw",), x)}, {"seed": 1})
    assert base == checksum({"a": (("draw",), x.astype(np.float64))}, {"seed": np.int64(1)})
    assert base != checksum({"a": (("draw",), x * 2)}, {"seed": 1})
    assert base != checksum({"a": (("draw",), x)}, {"seed": 2})
    assert base != checksum({"b": (("draw",), x)}, {"seed": 1})
    y = x.copy()
    y[1] = np.nan
    assert base != checksum({"a": (("draw",), y)}, {"seed": 1})
    # every NaN is the same NaN
    z = y.astype(np.float64)
    z.view(np.uint64)[1] |= 1
    assert checksum({"a": (("draw",), z)}, {"seed": 1}) == checksum({"a": (("draw",), y)},
                                                                     {"seed": 1})


# ------------------------------------------------------------------ a whole run


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from _checkpoints import gpt2 as saved_gpt2

    return saved_gpt2(tmp_path_factory.mktemp("integrity") / "tiny-gpt2", seed=0, n_layer=2,
                      n_embd=32, n_head=4, vocab_size=64)


SCORE_VARS = ("p_value", "head_p_value", "profile_p", "profile_q", "profile_flag")
COMPOSITION_VARS = ("composition_p", "composition_flag", "qk_overlap_p", "qk_overlap_flag")


def _outputs(model) -> dict:
    from rmtbase.scoring.composition.run import composition
    from rmtbase.scoring.score import score_model

    ds = score_model(model, progress=False, spectrum_draws=0)
    comp = composition(model)
    out = {v: ds[v].values for v in SCORE_VARS}
    out.update({v: comp[v].values for v in COMPOSITION_VARS})
    return out


def _assert_same(got, want):
    for v in want:
        # exact: the same draws through the same programs in one process
        np.testing.assert_array_equal(got[v], want[v], err_msg=v)


@pytest.fixture(scope="module")
def cold(gpt2, tmp_path_factory):
    """(cache folder, outputs) of a clean cold run of the tiny GPT-2."""
    from rmtbase.files.user_cache import forget

    folder = tmp_path_factory.mktemp("cold-cache")
    forget()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMTBASE_CACHE", str(folder))
        out = _outputs(gpt2)
    forget()
    return folder, out


def _run_files(folder: Path) -> dict:
    """One file of each kind a run of the tiny GPT-2 reads (the profile: its first size)."""
    return {"table": next(folder.glob("lowrank-*-all-*.nc")),
            "profile": min(folder.glob("profile/*.nc"),
                           key=lambda p: int(p.name.split("-n")[1].split("-")[0])),
            "composition": next(folder.glob("composition/composition-*.nc")),
            "overlap": next(folder.glob("composition/overlap-distinct-*.nc"))}


def _whole_run(gpt2, cold, tmp_path, monkeypatch, how):
    folder, want = cold
    cache = tmp_path / "cache"
    shutil.copytree(folder, cache)
    monkeypatch.setenv("RMTBASE_CACHE", str(cache))
    files = _run_files(cache)
    other = {"table": None, "profile": None,  # the other null's clean file
             "composition": folder / files["overlap"].relative_to(cache),
             "overlap": folder / files["composition"].relative_to(cache)}
    for kind, path in files.items():
        if how == "copied" and other[kind] is None:  # another size's file of the same null
            continue
        if how == "copied":
            kind_attr = _raw(path)[0]["kind"]
            damage(path, "copied", other[kind])
            import netCDF4

            with netCDF4.Dataset(path, "a") as nc:
                nc.setncattr("kind", kind_attr)
        else:
            damage(path, how, None)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _outputs(gpt2)
    said = [str(w.message) for w in record if "cache" in str(w.message).lower()]
    damaged = [p for k, p in files.items() if how != "copied" or other[k] is not None]
    for path in damaged:
        assert sum(path.name in s for s in said) == 1, (path.name, said)
        if path.exists() or "profile" not in path.parts:
            assert _same_raw(_raw(path), _raw(folder / path.relative_to(cache)))
        else:  # removed: a longer profile file, verified, serves its draws (draw i is the
            #  same in every length), as in a cache that never held it
            assert any(p.name != path.name for p in path.parent.glob("*.nc"))
    assert len(said) == len(damaged), said
    _assert_same(got, want)


def test_a_run_on_a_damaged_cache_gives_the_clean_run_outputs(gpt2, cold, tmp_path,
                                                               monkeypatch):
    """A table, the profile null, the composition and the overlap null each halved: one
    warning naming each, the p-values and flags of the clean cold run, every file replaced."""
    _whole_run(gpt2, cold, tmp_path, monkeypatch, "halved")


@pytest.mark.slow  # six more whole runs: ~1 min on the shared machine
@pytest.mark.parametrize("how", [h for h in CORRUPTIONS if h != "halved"])
def test_a_run_on_a_damaged_cache_every_way(gpt2, cold, tmp_path, monkeypatch, how):
    _whole_run(gpt2, cold, tmp_path, monkeypatch, how)


# ------------------------------------------------------------------ a cache that cannot be written


@pytest.fixture
def unwritable(tmp_path, monkeypatch):
    """A cache folder that cannot be made (a file stands where its parent should be: root
    writes through a read-only mode, not through a file)."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "file" / "cache"))
    return tmp_path / "file" / "cache"


def test_unwritable_cache_grows_the_profile_null_in_memory(unwritable, monkeypatch, tmp_path):
    """Each growth step continues the last (draws 0-300, 300-600, 600-900; before: 0-300,
    0-600, 0-900), the cache is said once (before: once a step), and the draws are those of
    a writable cache."""
    from rmtbase.scoring.profile import factors as factor_axes
    from rmtbase.scoring.profile.cache import cached_profile_null

    real, calls = factor_axes.profile_null, []

    def spy(d, d_h, storage="float32", n=0, seed=0, client=None, progress=None, start=0):
        calls.append((start, n))
        return real(d, d_h, storage, n=n, seed=seed, client=client, progress=progress,
                    start=start)

    monkeypatch.setattr(factor_axes, "profile_null", spy)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = [cached_profile_null(16, 4, "float32", n=n, seed=SEED) for n in (300, 600, 900)]
    assert calls == [(0, 300), (300, 600), (600, 900)]
    said = [str(w.message) for w in record if "cache" in str(w.message).lower()]
    assert len(said) == 1 and "could not cache" in said[0], said
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "writable"))
    want = cached_profile_null(16, 4, "float32", n=900, seed=SEED)
    for a in want:
        # exact: draw i is the same in every length (profile_null's own contract)
        np.testing.assert_array_equal(got[2][a], want[a])
        # exact: the first draws of one program, read back losslessly
        np.testing.assert_array_equal(got[1][a], want[a][:600])


def test_unwritable_cache_gives_the_writable_cold_run_outputs(gpt2, cold, unwritable):
    """A run whose cache cannot be written gives the outputs of a writable cold run (before:
    other head p-values: the spectral reference was drawn as a table of its own instead of
    read from the run's table) and says so once."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = _outputs(gpt2)
    said = [str(w.message) for w in record if "cache" in str(w.message).lower()]
    assert len(said) == 1 and "could not cache" in said[0], said
    _assert_same(got, cold[1])


def test_unwritable_cache_keeps_no_jax_compilation_cache(unwritable, monkeypatch):
    """The CLI points JAX's compilation cache into the user cache only where it can be
    written (a read-only cache gave one JAX warning per compiled program)."""
    import os

    from rmtbase.cli import _use_compilation_cache
    from rmtbase.files.user_cache import writable

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("RMTBASE_NO_JIT_CACHE", raising=False)
    assert not writable(unwritable / "jax")
    _use_compilation_cache()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ
    monkeypatch.setenv("RMTBASE_CACHE", str(unwritable.parent.parent / "ok"))
    assert writable(unwritable.parent.parent / "ok" / "jax")
