"""Fuzzed readers: GGUF, safetensors and the netCDF table, each fed tiny files built here and
then damaged at random (truncations, byte flips, header fields overwritten with extreme
values) at a fixed seed.

Each case ends in one line (the project's error: ModelError, SafetensorsError — a ValueError
the weight reader turns into ModelError — or TableError) or a correct result; never another
exception (a traceback), a hang (each case runs under a generous alarm; no speed is asserted)
or a wrong number. "Correct" is checked against an independent decoding of the same bytes:
a flip in the tensor data must read back as the damaged bytes say (np.frombuffer at the
offsets the original header gives); a cut inside the data must be refused from the header
alone, naming the bytes expected and found; a table with its checksum must read back equal to
what was written, or be refused.

The quick tier runs a few hundred cases at a fixed seed; the slow tier thousands. The netCDF
table and cache cases run in one child process each (HDF5 is C: a crash must fail the test,
not end pytest); a damaged cache file must be read whole or redrawn with one-line warnings,
giving a clean cache's numbers either way."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rmtbase.errors import ModelError

#: Seconds one case may take before it counts as a hang (generous: a loaded machine).
CASE_SECONDS = 60
QUICK_CASES, SLOW_CASES = 100, 2000


class _Hang(BaseException):
    """Raised by the alarm (a BaseException: no reader's ``except Exception`` swallows it)."""


@contextlib.contextmanager
def _bounded(seconds: float = CASE_SECONDS):
    def stop(signum, frame):
        raise _Hang(f"a case ran over {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _mutations(data: bytes, header_end: int, rng: random.Random):
    """Yield (kind, position, damaged bytes) forever: truncations anywhere, single-byte flips
    anywhere, and 1/4/8-byte overwrites with extreme values inside the header."""
    extremes = [0, 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, 8, 0x7F, 0xFF]
    while True:
        kind = rng.choice(("cut", "flip", "flip", "edit"))
        if kind == "cut":
            n = rng.randrange(len(data))
            yield kind, n, data[:n]
        elif kind == "flip":
            i = rng.randrange(len(data))
            b = bytearray(data)
            b[i] ^= 1 << rng.randrange(8)
            yield kind, i, bytes(b)
        else:
            width = rng.choice((1, 4, 8))
            i = rng.randrange(max(header_end - width, 1))
            v = rng.choice(extremes) % (1 << (8 * width))
            b = bytearray(data)
            b[i:i + width] = v.to_bytes(width, "little")
            yield kind, i, bytes(b)


def _one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text and "\n" not in text, repr(text)


# ------------------------------------------------------------------ GGUF


def _gguf_file(path: Path, qtype: str) -> Path:
    from _gguf import write_llama

    rng = np.random.default_rng(0)
    d = 32
    layers = [{p: rng.standard_normal((d, d)).astype(np.float32) for p in "qkvo"}
              for _ in range(2)]
    return write_llama(path, layers, d=d, n_heads=2, n_kv_heads=2, qtype=qtype)


def _gguf_read(path: Path) -> dict:
    """Every tensor of a GGUF file as rmtbase reads it: {GGUF name: float32 array, file order
    (q/k rows as stored)}."""
    from _gguf import permute

    from rmtbase.models.gguf import GGUFWeights, gguf_config
    from rmtbase.models.gguf_header import read_header

    header = read_header(path)
    cfg = gguf_config(path, header)
    w = GGUFWeights(path, cfg, header=header)
    try:
        out = {}
        for k in sorted(w.keys()):
            a = w.get(k)
            if "q_proj" in k or "k_proj" in k:  # back to the file's rotary row order
                a = permute(a, int(cfg["num_attention_heads"] if "q_proj" in k
                                   else cfg["num_key_value_heads"]))
            out[w.file_name(k)] = a
        return out
    finally:
        w.close()


def _gguf_layout(path: Path) -> tuple[dict, int, int]:
    """({name: (absolute offset, bytes, numpy shape, type)}, data start, data end) by gguf's
    own reader: the independent view of where each tensor's bytes are."""
    import gguf

    r = gguf.GGUFReader(str(path))
    spans = {t.name: (int(t.data_offset), int(t.n_bytes),
                      tuple(int(n) for n in reversed(t.shape)), t.tensor_type.name)
             for t in r.tensors}
    start = min(o for o, *_ in spans.values())
    end = max(o + n for o, n, *_ in spans.values())
    return spans, start, end


def _gguf_decode(data: bytes, span) -> np.ndarray:
    import gguf
    from gguf.quants import dequantize

    off, n, shape, kind = span
    raw = np.frombuffer(data[off:off + n], dtype=np.uint8)
    if kind == "F32":
        return raw.view("<f4").reshape(shape)
    return dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(shape)


def _gguf_cases(tmp_path: Path, n: int, seed: int) -> dict:
    counts: dict = {}
    for qtype in ("F32", "Q8_0"):
        base = _gguf_file(tmp_path / f"base-{qtype}.gguf", qtype)
        data = base.read_bytes()
        spans, start, end = _gguf_layout(base)
        want = _gguf_read(base)
        for name, span in spans.items():  # the independent decoding agrees on the original
            # exact: bit patterns: the same bytes decoded by two readers
            np.testing.assert_array_equal(want[name], _gguf_decode(data, span))
        rng = random.Random(f"{seed}-{qtype}")
        case = tmp_path / "case.gguf"
        for _, (kind, pos, damaged) in zip(range(n), _mutations(data, start, rng), strict=False):
            case.write_bytes(damaged)
            with _bounded():
                try:
                    got = _gguf_read(case)
                except ModelError as exc:
                    _one_line(exc)
                    counts[kind, "refused"] = counts.get((kind, "refused"), 0) + 1
                    if kind == "cut" and pos < end:
                        assert "truncated" in str(exc) or "corrupt" in str(exc), str(exc)
                    continue
            counts[kind, "read"] = counts.get((kind, "read"), 0) + 1
            assert not (kind == "cut" and pos < end), f"a file cut at {pos} of {end} was read"
            if kind == "cut" or pos >= start:  # the header is intact: the bytes decide
                for name, span in spans.items():
                    # exact: bit patterns: the same bytes decoded by two readers
                    np.testing.assert_array_equal(got[name], _gguf_decode(damaged, span),
                                                  err_msg=f"{kind} at {pos}: {name}")
    return counts


def test_gguf_reader_fuzzed(tmp_path):
    counts = _gguf_cases(tmp_path, QUICK_CASES, seed=0)
    assert counts.get(("cut", "refused"), 0) > 10 and counts.get(("flip", "read"), 0) > 10


@pytest.mark.slow
def test_gguf_reader_fuzzed_many(tmp_path):
    _gguf_cases(tmp_path, SLOW_CASES, seed=1)


def test_gguf_block_sizes_are_ggmls():
    """The header's size check uses ggml's (elements, bytes) per block of every type."""
    from gguf.constants import GGML_QUANT_SIZES

    from rmtbase.models.gguf_header import BLOCKS

    assert BLOCKS == {int(k): tuple(v) for k, v in GGML_QUANT_SIZES.items()}


def test_a_gguf_cut_in_half_is_refused_from_its_header(tmp_path, monkeypatch):
    """A GGUF cut in half was refused only by the tensor reader, in numpy's words ("cannot
    reshape array of size …") after the model had started loading; now read_header refuses it,
    naming the byte the last tensor ends at and the file's size, and no tensor is read."""
    import rmtbase.models.gguf as G
    from rmtbase.models.gguf_header import read_header

    base = _gguf_file(tmp_path / "m.gguf", "Q8_0")
    data = base.read_bytes()
    half = tmp_path / "half.gguf"
    half.write_bytes(data[:len(data) // 2])
    monkeypatch.setattr(G, "gguf_reader", lambda *a: pytest.fail("a tensor was read"))
    with pytest.raises(ModelError, match=rf"truncated or corrupt: tensor '.*' ends at byte "
                                         rf"[\d,]+ but the file has {len(data) // 2:,} bytes"):
        read_header(half)
    from rmtbase.models import load_heads

    with pytest.raises(ModelError, match="truncated"):
        load_heads(half)


def test_a_gguf_counting_two_billion_layers_is_refused_at_once(tmp_path):
    """A damaged llama.block_count (2**31 - 1) had gguf's TensorNameMap built for every layer
    (a hang found by the slow fuzz); the count is now checked against the tensor directory."""
    from rmtbase.models.gguf import gguf_config

    data = bytearray(_gguf_file(tmp_path / "m.gguf", "F32").read_bytes())
    key = b"llama.block_count"
    at = data.index(key) + len(key)
    assert struct.unpack("<II", data[at:at + 8]) == (4, 2)  # uint32, 2 layers
    data[at + 4:at + 8] = struct.pack("<I", 2**31 - 1)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(data))
    with _bounded(), pytest.raises(ModelError, match=r"counts 2,147,483,647 layers but holds "
                                                     r"8 tensors"):
        gguf_config(bad)


# ------------------------------------------------------------------ safetensors


def _safetensors_file(path: Path) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    save_file({"a": rng.standard_normal((4, 8)).astype(np.float32),
               "b": rng.standard_normal((3,)).astype(np.float16),
               "c": rng.standard_normal((2, 2, 2)).astype(np.float64)}, str(path))
    return path


def _st_read(path: Path) -> dict:
    from rmtbase.models._safetensors import read_float32, read_header

    tensors, _ = read_header(path)
    return {k: read_float32(path, info) for k, info in sorted(tensors.items())}


def _st_decode(data: bytes) -> dict | None:
    """The tensors ``data`` holds by the format's own rule (None where it holds none)."""
    if len(data) < 8:
        return None
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, RecursionError):
        return None
    dt = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        with np.errstate(over="ignore"):  # an F64 beyond float32 reads as inf
            out[k] = np.frombuffer(data[8 + n + b:8 + n + e], dtype=dt[v["dtype"]]).astype(
                np.float32).reshape(v["shape"])
    return out


def _st_cases(tmp_path: Path, n: int, seed: int) -> dict:
    from rmtbase.models._safetensors import SafetensorsError

    base = _safetensors_file(tmp_path / "base.safetensors")
    data = base.read_bytes()
    (hn,) = struct.unpack("<Q", data[:8])
    want = _st_read(base)
    for k, v in _st_decode(data).items():
        # exact: bit patterns: the same bytes decoded by two readers
        np.testing.assert_array_equal(want[k], v)
    rng = random.Random(seed)
    case = tmp_path / "case.safetensors"
    counts: dict = {}
    for _, (kind, pos, damaged) in zip(range(n), _mutations(data, 8 + hn, rng), strict=False):
        case.write_bytes(damaged)
        with _bounded():
            try:
                got = _st_read(case)
            except SafetensorsError as exc:
                _one_line(exc)
                counts[kind, "refused"] = counts.get((kind, "refused"), 0) + 1
                continue
        counts[kind, "read"] = counts.get((kind, "read"), 0) + 1
        assert kind != "cut", f"a file cut at {pos} of {len(data)} was read"
        expect = _st_decode(damaged)
        assert expect is not None and set(expect) == set(got), (kind, pos)
        for k in got:
            # exact: bit patterns: the same bytes decoded by two readers
            np.testing.assert_array_equal(got[k], expect[k], err_msg=f"{kind} at {pos}: {k}")
    return counts


def test_safetensors_reader_fuzzed(tmp_path):
    counts = _st_cases(tmp_path, 2 * QUICK_CASES, seed=0)
    assert counts.get(("cut", "refused"), 0) > 10 and counts.get(("flip", "read"), 0) > 10


@pytest.mark.slow
def test_safetensors_reader_fuzzed_many(tmp_path):
    _st_cases(tmp_path, SLOW_CASES, seed=1)


def test_a_short_safetensors_file_names_the_sizes(tmp_path):
    from rmtbase.models._safetensors import SafetensorsError, read_header

    data = _safetensors_file(tmp_path / "m.safetensors").read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[:-5])
    with pytest.raises(SafetensorsError, match=rf"ends at byte {len(data):,} but the file has "
                                               rf"{len(data) - 5:,} bytes"):
        read_header(cut)


# ------------------------------------------------------------------ the netCDF table

_TABLE_CHILD = r"""
import json, random, sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from test_reader_fuzz import _mutations
from rmtbase.baseline.table_file import read_table
from rmtbase.errors import TableError

base, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(base, "rb").read()
want = read_table(base, checksum=True)
rng = random.Random(seed)
case = base + ".case.nc"
counts = {}
for _, (kind, pos, damaged) in zip(range(n), _mutations(data, 512, rng)):
    open(case, "wb").write(damaged)
    try:
        got = read_table(case, checksum=True)
    except TableError as exc:
        assert "\n" not in str(exc), (kind, pos, str(exc))
        counts[kind + " refused"] = counts.get(kind + " refused", 0) + 1
        continue
    counts[kind + " read"] = counts.get(kind + " read", 0) + 1
    for v in want.data_vars:  # read at all: the numbers written, bit for bit
        # exact: copies of stored values: the same file's bytes
        np.testing.assert_array_equal(got[v].values, want[v].values, err_msg=f"{kind} {pos}")
print(json.dumps(counts))
"""


def _table_file(path: Path) -> Path:
    import xarray as xr

    from rmtbase.baseline.table_file import TABLE_FORMAT, write_table

    rng = np.random.default_rng(2)
    ds = xr.Dataset({"stat": (("d", "d_h", "draw"), rng.standard_normal((1, 1, 40)))},
                    coords={"d": [16], "d_h": [4]},
                    attrs={"rmtbase_table_format": TABLE_FORMAT, "draws": 40})
    return write_table(ds, path)


def _table_cases(tmp_path: Path, n: int, seed: int) -> dict:
    base = _table_file(tmp_path / "t.nc")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _TABLE_CHILD, str(base), str(n), str(seed),
                        str(Path(__file__).parent)], capture_output=True, text=True,
                       env=env, timeout=CASE_SECONDS * 5 + n)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_table_reader_fuzzed(tmp_path):
    counts = _table_cases(tmp_path, 100, seed=0)
    assert counts.get("cut refused", 0) > 5 and sum(counts.values()) == 100


@pytest.mark.slow
def test_table_reader_fuzzed_many(tmp_path):
    _table_cases(tmp_path, 2000, seed=1)



# ------------------------------------------------------------------ the null-table cache

_CACHE_CHILD = r"""
import json, os, random, sys, warnings
import numpy as np
sys.path.insert(0, sys.argv[3])
from test_reader_fuzz import _mutations
from rmtbase.baseline.cache import cache_target, null_table
from rmtbase.files.user_cache import forget

n, seed = int(sys.argv[1]), int(sys.argv[2])
def values():
    forget()  # a fresh process: nothing held in memory
    ds = null_table(16, 4, stats="all", min_draws=64, seed=5)
    return {v: ds[v].values for v in ds.data_vars}
want = values()
path = cache_target(16, 4, draws=64, seed=5)
data = open(path, "rb").read()
rng = random.Random(seed)
counts = {}
for _, (kind, pos, damaged) in zip(range(n), _mutations(data, 512, rng)):
    open(path, "wb").write(damaged)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = values()
    said = [str(w.message) for w in seen if "rmtbase" in str(w.message) or
            w.category.__module__.startswith("rmtbase")]
    assert all("\n" not in m for m in said), said
    counts[kind + (" redrawn" if said else " read")] = counts.get(
        kind + (" redrawn" if said else " read"), 0) + 1
    assert set(got) == set(want), (kind, pos)
    for v in want:  # read or redrawn: the numbers of a clean cache, bit for bit
        # exact: copies of stored values: the same file's bytes
        np.testing.assert_array_equal(got[v], want[v], err_msg=f"{kind} at {pos}: {v}")
print(json.dumps(counts))
"""


def _cache_cases(tmp_path: Path, n: int, seed: int) -> dict:
    env = dict(os.environ, RMTBASE_CACHE=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _CACHE_CHILD, str(n), str(seed),
                        str(Path(__file__).parent)], capture_output=True, text=True,
                       env=env, timeout=CASE_SECONDS * 5 + 5 * n)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_cache_reader_fuzzed(tmp_path):
    """A damaged cached null table is read (damage that leaves the values and checksum whole)
    or redrawn with a one-line warning; either way the numbers are a clean cache's."""
    counts = _cache_cases(tmp_path, 12, seed=0)
    assert sum(counts.values()) == 12 and any("redrawn" in k for k in counts)


@pytest.mark.slow
def test_cache_reader_fuzzed_many(tmp_path):
    _cache_cases(tmp_path, 500, seed=1)
