"""The block-format profile null's chunk, part by part (issue 59 item 4).

    python benchmarks/profile_chunk.py [--reps N] [--shapes 640x256:q5_0,576x64:q4_1]

:func:`rmtbase.scoring.profile.factors._stored_null` draws 250 heads a call (a chunk), each two
(d_h, d) factors of N(0, 1) normals put through the storage's round trip, then the four factor
statistics. This script compiles cumulative prefixes of that chunk, each as its own program
with the chunk's loop (``lax.map`` over the 250 heads' keys, ``batch_size = _HEADS``), and
times them alternately in one process after compilation:

- ``normals``: the two factors' normals (:func:`rmtbase.ensembles.threefry.normal`);
- ``+round trip``: and their storage round trip (:func:`rmtbase.stats.precision.round_trip`);
- ``+align, focus``: and alignment and both input focuses (passes over the factors);
- ``+1 Gram``: round trip and one d_h × d_h product W_Q W_Kᵀ instead;
- ``+symmetry``: round trip and :func:`rmtbase.stats.alignment.symmetry` (three products);
- ``+sym blocks``: the same with ``blocks=True`` (‖W_QK‖² from the Grams' upper 64-row blocks
  where d_h ≥ 256);
- ``chunk fused``: the chunk as format 4 was first built (each factor's normals fused into its
  round trip, whole Grams);
- ``chunk v5``: the chunk as format 5 built it (normals or round trip written once for the
  formats of :data:`~rmtbase.scoring.profile.factors._STORED_ONCE`, the Grams assembled from their
  upper 64-row blocks where d_h ≥ 256, 10 heads a loop step, XLA's default options);
- ``chunk``: the chunk itself (format 6: 5 heads a step where d_h ≥ 256, ‖W_QK‖² summed from the
  Grams' upper blocks, :data:`~rmtbase.scoring.profile.factors._CHUNK_OPTIONS`).

Before timing, the largest difference of ``chunk`` from ``chunk v5`` and from ``chunk fused``
on the first key is printed per axis in units of the axis's spread over the chunk (0: the
same bits). ``first`` is the CPU of each part's first call (compile and one run).

A prefix returns sums over the whole factors so XLA cannot drop its work (a slice would let it
compute only the entries read; the sums fuse into the pass that makes the entries). Printed per
part: CPU seconds per 250 heads (user, system), wall seconds, and minor page faults
(``ru_minflt``) per 2,000 draws. Differences between lines estimate each part's cost (roughly:
the sums are themselves a pass, so ``+round trip`` can read above ``+align, focus``); on a
shared machine compare lines of one run only. Page faults depend on what the process
allocated before (glibc's heap grows and is trimmed), so a chunk run after other programs may
fault less than the same chunk in a fresh process.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402


def parts(d: int, d_h: int, storage) -> dict:
    """{part: jitted chunk(key)} for one shape and storage record (module docstring)."""
    import jax
    import jax.numpy as jnp

    from rmtbase.ensembles.threefry import normal
    from rmtbase.scoring.profile import factors as fa
    from rmtbase.stats.alignment import alignment, input_focus, symmetry
    from rmtbase.stats.precision import null_rows, round_trip

    rows = null_rows(storage, d_h)

    def factors(key, rt=True):
        kq, kk = jax.random.split(key)
        wq, wk = (normal(k, (rows, d), jnp.float32) for k in (kq, kk))
        if rt:
            wq, wk = round_trip(wq, storage)[:d_h], round_trip(wk, storage)[:d_h]
        return wq, wk

    def keep(wq, wk):  # full sums: a slice would let XLA compute only the entries it reads
        return jnp.sum(wq) + jnp.sum(wk)

    heads = {
        "normals": lambda k: keep(*factors(k, rt=False)),
        "+round trip": lambda k: keep(*factors(k)),
        "+align, focus": lambda k: (lambda q, w: alignment(q, w) + input_focus(q)
                                    + input_focus(w))(*factors(k)),
        "+1 Gram": lambda k: (lambda q, w: jnp.sum(jnp.matmul(q, w.T, precision="highest")))(
            *factors(k)),
        "+symmetry": lambda k: symmetry(*factors(k)),
        "+sym blocks": lambda k: symmetry(*factors(k), blocks=True),
        "chunk fused": lambda k: fa.factor_profile_jax(*factors(k)),
    }
    once = fa._STORED_ONCE.get(storage.name)
    kept = {"materialise": True} if once == "factors" else {}

    def v5(key):  # format 5's head: stored normals or round trip, Grams assembled from blocks
        keys = jax.random.split(key)
        if once == "normals":
            zq, zk = jax.lax.map(lambda k: normal(k, (rows, d), jnp.float32), keys)
        else:
            zq, zk = (normal(k, (rows, d), jnp.float32) for k in keys)
        wq, wk = (round_trip(z, storage, **kept)[:d_h] for z in (zq, zk))
        return {"alignment": alignment(wq, wk), "symmetry": _symmetry_v5(wq, wk),
                "q_input_focus": input_focus(wq), "k_input_focus": input_focus(wk)}

    heads["chunk v5"] = v5
    out = {}
    for name, one in heads.items():
        def chunk(key, one=one):
            keys = jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(fa._CHUNK))
            return jax.lax.map(one, keys, batch_size=fa._HEADS)
        out[name] = jax.jit(chunk)
    out["chunk"] = fa._stored_null(d, d_h, storage)
    return out


def _symmetry_v5(wq, wk):
    """Format 5's symmetry: the Grams assembled from their upper 64-row blocks (d_h ≥ 256)."""
    import jax.numpy as jnp

    from rmtbase._matmul import mm

    t = lambda x: jnp.swapaxes(x, -1, -2)  # noqa: E731

    def gram(w):
        d_h, s = w.shape[-2], 64
        if d_h % s or d_h < 4 * s:
            return mm(w, t(w))
        n = d_h // s
        rows = [w[..., i * s:(i + 1) * s, :] for i in range(n)]
        up = {(i, j): mm(rows[i], t(rows[j])) for i in range(n) for j in range(i, n)}
        return jnp.concatenate([jnp.concatenate([up[i, j] if j >= i else t(up[j, i])
                                                 for j in range(n)], -1) for i in range(n)], -2)

    c = mm(wq, t(wk))
    return jnp.sum(c * t(c), axis=(-2, -1)) / jnp.sum(gram(wq) * gram(wk), axis=(-2, -1))


def differences(fns: dict, key) -> dict:
    """{"v5"/"fused": {axis: max |chunk − other| / the other's spread}} on one key."""
    import numpy as np

    a = fns["chunk"](key)
    out = {}
    for name in ("chunk v5", "chunk fused"):
        b = fns[name](key)
        out[name] = {k: float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))
                              / np.std(np.asarray(b[k]))) for k in a}
    return out


def main(argv=None) -> None:
    import jax

    from rmtbase.stats.storage import storage_record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4, help="timed chunks per part (default 4)")
    ap.add_argument("--shapes", default="640x256:q5_0,576x64:q4_1",
                    help="DxD_H:STORAGE,... (default: the Gemma-3 Q5_0 and SmolLM2 Q4_1 shapes)")
    args = ap.parse_args(argv)
    for spec in args.shapes.split(","):
        shape, name = spec.split(":")
        d, d_h = (int(x) for x in shape.split("x"))
        fns = parts(d, d_h, storage_record(name))
        key = jax.random.key(0)
        first = {}
        for k, f in fns.items():  # compile and run once
            t0 = time.process_time()
            jax.block_until_ready(f(key))
            first[k] = time.process_time() - t0
        diff = differences(fns, key)
        tot = {k: [0.0, 0.0, 0.0, 0] for k in fns}
        for r in range(args.reps):
            # alternate, reversing the order every other round (none always runs first)
            for k, f in (list(fns.items()) if r % 2 == 0 else list(fns.items())[::-1]):
                r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                jax.block_until_ready(f(jax.random.fold_in(key, r + 1)))
                r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                for i, v in enumerate((r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime,
                                       t1 - t0, r1.ru_minflt - r0.ru_minflt)):
                    tot[k][i] += v
        n = args.reps
        print(f"{d} x {d_h} {name}: per 250 heads, mean of {n} (load {os.getloadavg()[0]:.1f})")
        for other, dev in diff.items():
            print(f"  chunk - {other}: max |diff| / spread " +
                  " ".join(f"{a} {v:.1e}" for a, v in dev.items()))
        print(f"  {'part':14s} {'user':>6s} {'sys':>6s} {'wall':>6s} {'minflt/2000':>12s} "
              f"{'first':>6s}")
        for k, (u, s, w, m) in tot.items():
            print(f"  {k:14s} {u / n:6.3f} {s / n:6.3f} {w / n:6.3f} {m / n * 8:12.0f} "
                  f"{first[k]:6.2f}")
        v5, v6 = (sum(tot[k][:2]) for k in ("chunk v5", "chunk"))
        print(f"  chunk / chunk v5 (user + sys): {v6 / v5:.3f}")


if __name__ == "__main__":
    main()
