"""Naming the heads behind a non-finite tensor: :func:`named_heads` turns a reader's refusal
(:class:`rmtbase.models._reader.NonFiniteTensor`) into one line naming the attention heads whose
factors hold NaN or inf, reading the heads again with the check off, layer by layer.
"""

from __future__ import annotations

import contextlib

from ..errors import ModelError
from ._reader import NonFiniteTensor, finite_unchecked

__all__ = ["check_finite_model", "named_heads", "naming_heads", "nonfinite_heads"]


def nonfinite_heads(model, *, allow_pickle: bool = False, revision=None) -> str | None:
    """The heads of ``model`` with a NaN or infinite entry in W_Q/W_K or W_V/W_O, as one line
    (``heads L0H2 (W_Q or W_K), … have non-finite (NaN/inf) weights; cannot score them``), or
    None where every head is finite (the tensor is not an attention head's) or the heads cannot
    be read."""
    import numpy as np

    from .loading import load_heads
    from .ov import load_ov_heads

    bad = []
    try:
        with finite_unchecked():
            for load, factors in ((load_heads, "W_Q or W_K"), (load_ov_heads, "W_O or W_V")):
                for lh in load(model, revision=revision, allow_pickle=allow_pickle):
                    ok = (np.isfinite(np.asarray(lh.wq)).all(axis=(1, 2))
                          & np.isfinite(np.asarray(lh.wk)).all(axis=(1, 2)))
                    bad += [f"L{lh.layer}H{h} ({factors})" for h in np.flatnonzero(~ok)]
    except Exception:  # noqa: BLE001 - the tensor's own message stands
        return None
    if not bad:
        return None
    more = f" and {len(bad) - 4} more" if len(bad) > 4 else ""
    one = len(bad) == 1
    return (f"{'head' if one else 'heads'} {', '.join(bad[:4])}{more} of {model} "
            f"{'has' if one else 'have'} non-finite (NaN/inf) weights; cannot score "
            f"{'it' if one else 'them'}")


def named_heads(exc: Exception, model, *, allow_pickle: bool = False,
                revision=None) -> Exception:
    """``exc`` as it is, unless it is a :class:`NonFiniteTensor` of an attention head's tensor:
    then a ModelError naming the heads (:func:`nonfinite_heads`), the tensor's line in
    parentheses."""
    if not isinstance(exc, NonFiniteTensor):
        return exc
    heads = nonfinite_heads(model, allow_pickle=allow_pickle, revision=revision)
    return exc if heads is None else ModelError(f"{heads} ({exc})")


@contextlib.contextmanager
def naming_heads(model, *, allow_pickle: bool = False, revision=None):
    """Within, a :class:`NonFiniteTensor` of an attention head's tensor is raised as
    :func:`named_heads`' ModelError (the tensor's error chained); any other error as it is."""
    try:
        yield
    except NonFiniteTensor as exc:
        named = named_heads(exc, model, allow_pickle=allow_pickle, revision=revision)
        if named is exc:
            raise
        raise named from exc


def check_finite_model(model, allow_pickle: bool) -> None:
    """The probe's and the circuit search's precondition (they run the whole model): no NaN or
    infinite float tensor, an MLP's too, in one line naming the tensor and, for an attention
    tensor, the heads (:func:`naming_heads`); read one tensor at a time (local safetensors,
    pickled weights with ``allow_pickle``, a GGUF's tensors dequantised, block formats too).
    Others are checked when loaded (:func:`rmtbase.probe.loader.check_finite_weights`)."""
    import numpy as np

    from . import default_model_path
    from ._reader import check_finite
    from ._resolve import resolve

    model = default_model_path() if model is None else model
    resolved = resolve(model, None)
    with naming_heads(model, allow_pickle=allow_pickle):  # an attention tensor: its heads named
        if resolved.source == "gguf":
            from gguf.quants import dequantize

            from .gguf import gguf_reader as _reader

            for t in _reader(resolved.folder).tensors:
                try:
                    values = np.asarray(dequantize(t.data, t.tensor_type))
                except Exception:  # noqa: BLE001 - a type gguf cannot read: the reader says so
                    continue
                check_finite(values, t.name, resolved.name)
            return
        if resolved.source != "folder":
            return
        weights = resolved.open_weights(allow_pickle)
        if weights.format == "pickle":  # --allow-pickle: each file's float tensors, in turn
            for name in sorted(weights.keys(), key=lambda n: (weights.file_of(n), n)):
                t = weights._load_pickle(weights.file_of(name)).get(name)
                if t is not None and t.is_floating_point():
                    check_finite(t.detach().float().numpy(), name,
                                 f"{resolved.name}/{weights.file_of(name)}")
            return
        if weights.format != "safetensors":
            return
        from ._safetensors import read_float32

        for name in sorted(weights.keys()):
            filename = weights.file_of(name)
            info = weights._header(filename)[name]
            if info["dtype"] in ("F64", "F32", "F16", "BF16"):
                check_finite(read_float32(weights._headers[filename]["path"], info), name,
                             f"{resolved.name}/{filename}")
