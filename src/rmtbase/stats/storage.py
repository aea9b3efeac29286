"""Storage formats as records: one :class:`Storage` per format, in one registry.

A record holds all the library knows of a format (name, family, quantiser, block span, lattice
bits, GGUF type, detection); a layer in several formats is a :class:`MixedStorage`. Modules read
records (:func:`storage_record`), never compare names; a format is added by one record
(:func:`register`, entry point ``rmtbase.storages``). Quantiser ``fn(x, record)``: block formats
get and return ``(..., n_blocks, block)``; others the whole array in its own dtype."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InputError
from ..registry import GROUPS, Registry, record_plugin

__all__ = ["FAMILIES", "FLOAT32", "REGISTRY", "MixedStorage", "Storage", "gguf_storage", "one_quantisation",
           "is_shipped", "quantisation_record", "records", "register", "registered",
           "shipped_records", "storage_record", "unregister"]

#: The shipped storage families: float casts, blocks along the last axis, FP8 tiles or rows
#: (a record may name another: the families are open, module docstring).
FAMILIES = ("float", "block", "fp8")


@dataclass(frozen=True)
class Storage:
    """One storage format (module docstring). Frozen and hashable."""

    name: str
    family: str
    #: ``"module:function"`` of :mod:`rmtbase.stats`, or a callable ``fn(x, record)``
    quantiser: str | Callable
    #: entries per block along the last axis (the length must be a multiple); 1: none
    block: int = 1
    #: significant bits (with the implicit one) of the stored values, for the lattice cells
    #: and for detection's tolerance (half an ulp: 2^-bits); 24 for what is read as float32
    bits: int = 24
    #: smallest spacing of a lattice storage (its subnormal step)
    tiny: float = 0.0
    #: whether a histogram spreads each stored value over its rounding cell
    lattice: bool = False
    #: GGUF tensor type name (``"Q4_K"``), None where GGUF has none
    gguf: str | None = None
    #: rows of a 2-D scale tile spanning several heads (FP8 128x128): the null draws a head
    #: inside a full tile (:func:`rmtbase.stats.precision.null_rows`); 0 for none
    tile_rows: int = 0
    #: FP8: the element format (``"e4m3"``, ``"e5m2"``)
    element: str | None = None
    #: format parameters read by the quantiser (legacy: levels; K-quants: codec and search
    #: constants; FP8: largest finite value and the jnp 8-bit dtype name)
    spec: tuple = ()
    #: the 32-entry block layout read by :func:`rmtbase.stats.detection.block_layout`:
    #: (order, step, divisor, lowest level, highest level), tried in increasing order; step
    #: "affine": (max − min)/divisor from the minimum, "signed": x_amax/divisor (x_amax the
    #: entry of largest |x|), "absolute": |x_amax|/divisor; None for no layout (a record with
    #: a layout and no ``detector`` is given that function)
    detect: tuple | None = None
    #: lattice detection as a function of the record, ``detector(w, record, rel) -> bool``:
    #: whether ``w`` ``(..., n)`` was dequantised from this format (``rel``: the relative
    #: rounding margin of the float storage it was read in), a callable or ``"module:function"``
    #: of :mod:`rmtbase.stats`; None where detection does not know the format
    #: (:func:`rmtbase.stats.detection.detect_record`, which asks the records without a layout
    #: first, in registry order)
    detector: str | Callable | None = None

    def __post_init__(self):
        if not isinstance(self.family, str) or not self.family:
            raise InputError(f"storage family must be a name (shipped: {', '.join(FAMILIES)}), "
                             f"got {self.family!r}")
        if not isinstance(self.block, int) or self.block < 1:
            raise InputError(f"storage {self.name!r}: block must be a positive int")
        if self.detect and self.detector is None:  # a layout is detected by the layouts' rule
            object.__setattr__(self, "detector", "detection:block_layout")

    @property
    def is_float(self) -> bool:
        """A float cast (float32, float16, bfloat16): no blocks, no scales."""
        return self.family == "float"

    @property
    def is_quantised(self) -> bool:
        """A block or FP8 format: values share a scale (the ``--quantized-null`` choices)."""
        return not self.is_float

    @property
    def is_identity(self) -> bool:
        """float32: storing changes nothing (tables and file names omit it)."""
        return self.is_float and self.bits == 24

    @property
    def is_narrow_float(self) -> bool:
        """A float cast that rounds (float16, bfloat16): drawn whole through the cast where a
        reduced float32 sampler would miss the rounding."""
        return self.is_float and not self.is_identity

    @property
    def suffix(self) -> str:
        """The storage in a file name: "" for float32 (so earlier names stay valid), else
        ``"-<name>"``."""
        return "" if self.is_identity else f"-{self.name}"

    #: one format (a layer stored in several is a :class:`MixedStorage`)
    is_mixed = False

    def quantise(self) -> Callable:
        """The quantiser as a function ``fn(x, record)`` (imported on first use)."""
        return _resolve(self.quantiser)

    def detection(self) -> Callable:
        """The detector as a function ``fn(w, record, rel) -> bool`` (imported on first use;
        the record must have one)."""
        return _resolve(self.detector)

    def stored_as(self) -> str:
        """How a value is stored, as words: "float32", "rounded to float16", "passed through
        the q4_k block quantiser"."""
        if self.is_identity:
            return "float32"
        if self.is_float:
            return f"rounded to {self.name}"
        return f"passed through the {self.name} block quantiser"


def _resolve(ref) -> Callable:
    """A callable as it is; ``"module:function"`` of :mod:`rmtbase.stats`, imported."""
    if callable(ref):
        return ref
    module, attr = ref.split(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


@dataclass(frozen=True)
class MixedStorage:
    """A layer stored in several formats: its records, distinct and sorted; :attr:`name` joins
    theirs with "+". Scored against its float null without the histogram statistics."""

    parts: tuple[Storage, ...]
    is_mixed = True

    def __post_init__(self):
        parts = tuple(sorted(set(self.parts), key=lambda s: s.name))
        if len(parts) < 2 or not all(isinstance(s, Storage) for s in parts):
            raise InputError(f"a mixed storage needs two or more storage records, got "
                             f"{self.parts!r}")
        object.__setattr__(self, "parts", parts)

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.parts)

    @property
    def is_quantised(self) -> bool:
        return any(s.is_quantised for s in self.parts)


def one_quantisation(record) -> bool:
    """Whether a layer's quantisation ``record`` (:func:`quantisation_record`'s answer) is one
    block format a null can be drawn at: not None, not mixed, quantised."""
    return record is not None and not record.is_mixed and record.is_quantised


def quantisation_record(name) -> Storage | MixedStorage | None:
    """The record of a layer's quantisation as named: None for None, ``""`` or ``"none"``;
    "+"-joined formats a :class:`MixedStorage`; a record as is; InputError for an unknown name."""
    if name is None or isinstance(name, Storage | MixedStorage):
        return name
    if str(name) in ("", "none"):
        return None
    parts = str(name).split("+")
    if len(parts) == 1:
        return storage_record(parts[0])
    return MixedStorage(tuple(storage_record(p) for p in parts))


_F16_TINY, _BF16_TINY = 2.0**-24, 2.0**-126


#: The registered records by name (a :class:`rmtbase.registry.Registry`, entry-point group
#: ``rmtbase.storages``: a plugin's entry point names a :class:`Storage` record)
def _check(name: str, record) -> None:
    if not isinstance(record, Storage) or record.name != name:
        raise TypeError(f"{record!r} is not a Storage record named {name!r}")


_REGISTRY: Registry = Registry("storage", GROUPS["storage"],
                               record_plugin(Storage, lambda r: register(r)), _check)


#: The registry itself (public name; :class:`rmtbase.registry.Registry`).
REGISTRY = _REGISTRY


def register(record: Storage, *, shipped: bool = False) -> Storage:
    """Add ``record`` to the registry (InputError if its name is taken by another record);
    ``shipped``: one of rmtbase's own formats."""
    old = _REGISTRY.peek(record.name)
    if old is not None and old != record:
        raise InputError(f"storage {record.name!r} is already registered")
    return _REGISTRY.register(record.name, record, shipped=shipped)


def unregister(name: str) -> None:
    """Remove the record ``name`` (a test's toy format)."""
    if _REGISTRY.peek(name) is not None:
        _REGISTRY.unregister(name)


def storage_record(name) -> Storage:
    """The record of storage ``name`` (case-insensitive; None means float32); a record is
    returned as it is. InputError (one line) for an unknown name."""
    if isinstance(name, Storage):
        return name
    if name is None:
        name = "float32"
    if isinstance(name, str) and name.lower() in _REGISTRY:
        return _REGISTRY[name.lower()]
    raise InputError(_REGISTRY.unknown(name, f"storage must be one of {', '.join(_REGISTRY)}, "
                                             f"got {name!r}"))


def registered(name: str) -> Storage | None:
    """The record registered under exactly ``name`` (the registry's key: no case folding, as a
    list of names compares), else None."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def records() -> tuple[Storage, ...]:
    """Every registered record, in registry order (plugins loaded)."""
    return tuple(_REGISTRY.values())


def shipped_records() -> tuple[Storage, ...]:
    """rmtbase's own records, in registry order, without loading plugins (for what a module
    derives when imported: nothing enumerates plugins at import)."""
    return _REGISTRY.shipped_values()


def is_shipped(record) -> bool:
    """Whether ``record`` is one of rmtbase's own formats (not a plugin's or a test's)."""
    return isinstance(record, Storage) and _REGISTRY.shipped(record.name) \
        and _REGISTRY.peek(record.name) == record


def gguf_storage(type_name: str) -> str | None:
    """The storage name of GGUF tensor type ``type_name`` (``"Q4_K"`` -> ``"q4_k"``), None for
    a type no record reads."""
    return next((s.name for s in _REGISTRY.values() if s.gguf == type_name), None)


def _legacy(name, gguf, quantiser, spec, detect=None):
    return Storage(name, "block", quantiser, block=32, gguf=gguf, spec=spec, detect=detect)


def _kquant(name, gguf, spec):
    return Storage(name, "block", "kquants:k_blocks", block=256, gguf=gguf, spec=spec)


# Order: the float storages, then the block formats and FP8 as the CLI lists them.
for _record in (
    Storage("float32", "float", "precision:cast", bits=24, gguf="F32"),
    Storage("float16", "float", "precision:cast", bits=11, tiny=_F16_TINY, lattice=True,
            gguf="F16"),
    # bfloat16's subnormal step 2^-133 would be flushed to zero by XLA on CPU: its cells stop
    # at the float32 normal range (only exact zeros are affected; they count as points)
    Storage("bfloat16", "float", "precision:cast", bits=8, tiny=_BF16_TINY, lattice=True,
            gguf="BF16"),
    # ggml's legacy quantisers (rmtbase.stats.precision): symmetric (levels -half .. half-1),
    # affine (0 .. top) and Q8_0; detection tries Q4_1, Q4_0, Q5_0, Q8_0 (coarsest first)
    _legacy("q4_0", "Q4_0", "precision:symmetric", (8,), (1, "signed", -8.0, -8, 7)),
    _legacy("q4_1", "Q4_1", "precision:affine", (15,), (0, "affine", 15.0, 0, 15)),
    _legacy("q8_0", "Q8_0", "precision:q8_0", (127,), (3, "absolute", 127.0, -127, 127)),
    # after Q4_0 (whose levels are every other Q5_0 level: coarser first), before Q8_0
    _legacy("q5_0", "Q5_0", "precision:symmetric", (16,), (2, "signed", -16.0, -16, 15)),
    _legacy("q5_1", "Q5_1", "precision:affine", (31,)),
    # ggml's K-quants (rmtbase.stats.kquants): the codec and make_qkx2_quants' (nmax, rmin,
    # rdelta, nstep) of quantize_row_q{4,5}_K_ref
    _kquant("q4_k", "Q4_K", ("qkx2", 15, -1.0, 0.1, 20)),
    _kquant("q5_k", "Q5_K", ("qkx2", 31, -0.5, 0.1, 15)),
    _kquant("q6_k", "Q6_K", ("q6",)),
    _kquant("q2_k", "Q2_K", ("q2",)),
    _kquant("q3_k", "Q3_K", ("q3",)),
    # FP8 of official FP8 checkpoints (rmtbase.stats.fp8): 128x128 tiles, or one E4M3 scale
    # per output row (compressed-tensors); spec = (largest finite value, jnp dtype)
    Storage("fp8_e4m3", "fp8", "fp8:fp8_values", tile_rows=128, element="e4m3",
            spec=(448.0, "float8_e4m3fn")),
    Storage("fp8_e5m2", "fp8", "fp8:fp8_values", tile_rows=128, element="e5m2",
            spec=(57344.0, "float8_e5m2")),
    Storage("fp8_e4m3_channel", "fp8", "fp8:fp8_values", element="e4m3",
            spec=(448.0, "float8_e4m3fn")),
):
    register(_record, shipped=True)
del _record

#: float32's record (the identity storage: where no storage is given, and what block-quantised
#: values are read as), for code that needs it without a name to look up
FLOAT32 = _REGISTRY.peek("float32")
