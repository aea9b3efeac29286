"""Lattice detection: the storage a float array was dequantised from, a function of each record.

Float weights dequantised from a block format lie, block by block, on small grids. A detectable
record carries ``detector(w, record, rel) -> bool``; :func:`detect_record` returns the first that
answers yes. Q4_1, Q4_0, Q5_0 and Q8_0 share :func:`block_layout`: every entry of a 32-entry
block must be an integer multiple of the block's implied step (Q4_1: (x − min)/((max − min)/15)
∈ {0..15}; Q4_0: x/d ∈ {−8..7}, d = −x_amax/8; Q5_0: {−16..15}, d = −x_amax/16; Q8_0:
{−127..127}, d = max|x|/127), to 10⁻³ plus the float storage's rounding; detected when ≥
``min_fraction`` of the non-constant blocks fit."""

from __future__ import annotations

import numpy as np

from .storage import Storage, is_shipped, records, storage_record

QBLOCK = 32
MIN_FRACTION = 0.9
_DETECT_SAMPLE = 1024  # blocks of the quick rejection of float weights
_DETECT_CHUNK = 1 << 15  # blocks per chunk of block_layout (1 M entries)


def detected() -> tuple[Storage, ...]:
    """The records with a ``detector``, in trial order: the shipped block layouts coarsest first
    (Q4_1, Q4_0, Q5_0, Q8_0), then those of plugins and tests (own detectors first, registry
    order, then their layouts by order)."""
    known = [s for s in records() if s.detector is not None]
    shipped = [s for s in known if is_shipped(s)]
    others = [s for s in known if not is_shipped(s)]
    order = (lambda s: s.detect[0] if s.detect else -1)  # noqa: E731
    return tuple(sorted(shipped, key=order)) + tuple(sorted(others, key=order))


def detect_record(w, *, storage="float32", min_fraction: float = MIN_FRACTION) -> Storage | None:
    """The record ``w`` ``(..., n)``, read in float ``storage``, was dequantised from: the first of
    :func:`detected` that answers yes, else None.

    The shipped formats are asked first. A plugin's (or test's) format that answers yes is
    announced in one :class:`rmtbase.registry.PluginWarning` line naming it; it never overrides
    a float: where most of ``w``'s 32-entry blocks hold 32 distinct values (:func:`looks_float`:
    no lattice of a format with fewer levels than a block has entries), its answer is not used
    and the line says so."""
    # largest relative rounding error of the storage (half an ulp), with a margin of 1.5
    rel = 1.5 * 2.0 ** -storage_record(storage).bits
    w = np.asarray(w)
    kw = {} if min_fraction == MIN_FRACTION else {"min_fraction": min_fraction}
    for fmt in detected():
        if is_shipped(fmt):
            if fmt.detection()(w, fmt, rel, **kw):
                return fmt
        elif _plugin_detects(w, fmt, rel, kw):
            return _announced(w, fmt)
    return None


def _plugin_detects(w, fmt: Storage, rel: float, kw: dict) -> bool:
    """A plugin's detector's answer; its failure is one line naming it."""
    from ..registry import plugin_call
    from .storage import _REGISTRY

    def check(out):
        return None if isinstance(out, bool | np.bool_) else f"a {type(out).__name__}, not a bool"

    return bool(plugin_call(_REGISTRY, fmt.name, "detector", fmt.detection(), w, fmt, rel,
                            check=check, **kw))


#: Fraction of 32-entry blocks with all values distinct above which weights read as float
#: (:func:`looks_float`). Gaussian weights: float32 1.00, float16 0.95, bfloat16 0.64 (a pair
#: of entries meets on bfloat16's 8-bit grid with probability ≈ 2⁻⁸·1.4/(2π) ≈ 9·10⁻⁴, 496
#: pairs a block); dequantised from 8 bits per row 0.02, from Q8_0 0.07, from 4 bits 0.
LOOKS_FLOAT = 0.5


def looks_float(w, block: int = QBLOCK, min_fraction: float = LOOKS_FLOAT) -> bool:
    """Whether ``w`` ``(..., n)`` reads as float weights: at least ``min_fraction`` of its
    ``block``-entry blocks along the last axis (a strided sample of up to 1024; a row's last
    n mod ``block`` entries left out) hold ``block`` distinct values (:data:`LOOKS_FLOAT`)."""
    w = np.asarray(w)
    n = w.shape[-1] if w.ndim else 0
    block = min(int(block), n)
    if block < 2:
        return False
    blocks = w.reshape(-1, n)[:, :n - n % block].reshape(-1, block)
    if blocks.shape[0] > _DETECT_SAMPLE:
        blocks = blocks[::blocks.shape[0] // _DETECT_SAMPLE][:_DETECT_SAMPLE]
    b = np.sort(blocks, axis=1)
    distinct = (np.diff(b, axis=1) != 0).all(axis=1)
    return bool(distinct.mean() >= min_fraction)


def _announced(w, fmt: Storage) -> Storage | None:
    """A plugin's detection of ``fmt`` on ``w``: announced in one line; None where ``w`` reads as
    float (:func:`looks_float`)."""
    import warnings

    from ..registry import PluginWarning
    from .storage import _REGISTRY

    head = f"rmtbase: storage plugin {fmt.name!r} ({_REGISTRY.owner(fmt.name)})"
    if looks_float(w):
        warnings.warn(f"{head} detected its format on weights whose 32-entry blocks mostly "
                      "hold 32 distinct values (float weights): not used; --quantized-null "
                      f"{fmt.name} forces it", PluginWarning, stacklevel=3)
        return None
    warnings.warn(f"{head} detected its format on dequantised weights: their null is drawn "
                  "through it", PluginWarning, stacklevel=3)
    return fmt


def detect_quantisation(w, *, storage="float32", min_fraction: float = MIN_FRACTION) -> str | None:
    """The name of the format ``w`` was dequantised from (:func:`detect_record`), else None."""
    fmt = detect_record(w, storage=storage, min_fraction=min_fraction)
    return None if fmt is None else fmt.name


def block_layout(w, record: Storage, rel: float, min_fraction: float = MIN_FRACTION) -> bool:
    """The detector of the 32-entry block layouts (``record.detect``, module docstring).

    A strided sample of 1024 blocks rules float weights out early; a format is dropped once its
    failures exceed (1 − min_fraction) of all blocks."""
    n = w.shape[-1] if w.ndim else 0
    if n % QBLOCK or w.size < QBLOCK:
        return False
    blocks = w.reshape(-1, QBLOCK)
    n_blocks = blocks.shape[0]
    if n_blocks > _DETECT_SAMPLE:
        ok, live = _block_fit(blocks[::n_blocks // _DETECT_SAMPLE][:_DETECT_SAMPLE], record, rel)
        if ok < 0.5 * live:
            return False
    ok = live = 0
    for start in range(0, n_blocks, _DETECT_CHUNK):
        k, v = _block_fit(blocks[start:start + _DETECT_CHUNK], record, rel)
        ok, live = ok + k, live + v
        if live - ok > (1.0 - min_fraction) * n_blocks:
            return False
    return bool(live and ok / live >= min_fraction)


def _block_fit(chunk, record: Storage, rel: float) -> tuple[int, int]:
    """(live blocks consistent with the layout of ``record``, live blocks) of a chunk of
    32-blocks; a block is live when not constant (definitions: module docstring)."""
    b = np.asarray(chunk, dtype=np.float64)
    lo, hi = b.min(axis=1, keepdims=True), b.max(axis=1, keepdims=True)
    live = (hi - lo)[:, 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        _, kind, divisor, lo_q, hi_q = record.detect
        if kind == "affine":
            step, off, ref = (hi - lo) / divisor, lo, np.abs(hi) + np.abs(lo)
        else:
            xmax = np.take_along_axis(b, np.argmax(np.abs(b), axis=1)[:, None], axis=1)
            off, ref = 0.0 * lo, np.abs(xmax)
            step = (xmax if kind == "signed" else np.abs(xmax)) / divisor
        levels = (b - off) / step
        tol = 1e-3 + rel * (np.abs(b) + np.abs(off) + ref) / np.abs(step)
        r = np.round(levels)
        ok = (np.abs(levels - r) <= tol).all(axis=1) & (tol <= 0.25).all(axis=1)
        ok &= ((r >= lo_q) & (r <= hi_q)).all(axis=1)
    return int(np.count_nonzero(ok & live)), int(np.count_nonzero(live))


__all__ = ["LOOKS_FLOAT", "MIN_FRACTION", "QBLOCK", "block_layout", "detect_quantisation",
           "detect_record", "detected", "looks_float"]
