"""Storage names, with no heavy import (the command line's choices are built from them before
JAX loads): the float storages and the block quantisation formats of
:mod:`rmtbase.stats.precision`, which holds their round trips."""

FLOAT_STORAGES = ("float32", "float16", "bfloat16")
#: FP8 of official FP8 checkpoints (:mod:`rmtbase.stats.fp8`): E4M3 and E5M2 in 128×128 tiles,
#: E4M3 with one scale per output channel (compressed-tensors).
FP8_FORMATS = ("fp8_e4m3", "fp8_e5m2", "fp8_e4m3_channel")
#: FP8 storages whose 128-row tiles span several heads (:func:`rmtbase.stats.precision.null_rows`).
FP8_TILED = ("fp8_e4m3", "fp8_e5m2")
QUANT_FORMATS = ("q4_0", "q4_1", "q8_0", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q2_k",
                 "q3_k") + FP8_FORMATS
STORAGES = FLOAT_STORAGES + QUANT_FORMATS

__all__ = ["FP8_FORMATS", "FP8_TILED", "FLOAT_STORAGES", "QUANT_FORMATS", "STORAGES"]
