"""Bytes a remote score fetches: q/k by HTTP byte ranges against the whole shards (no network).

    python benchmarks/range_reads.py [--d 1024] [--heads 16] [--kv 4] [--layers 8]
                                     [--ffn 2816] [--vocab 32000] [--shards 4]

Writes a random LLaMA-shaped float16 checkpoint of that shape (safetensors package, sharded,
with an index) to a temporary folder, serves it from a range-capable HTTP server on
127.0.0.1 (a thread), and reads every layer's per-head W_Q, W_K through
``rmtbase.models.load_heads(url)`` with an empty user cache, then again with the cache filled,
then ``load_components(url, components=("q","k","v","o"))``. The server counts the body bytes
it sends; the q/k bytes come from the checkpoint's tensors. The values are checked equal to
the local folder's. Prints the bytes of the files, of q/k, fetched, the requests, and the same
arithmetic for the LLaMA-3-70B shape (d = 8192, 64 heads on 8 key heads of 128, 80 layers,
FFN 28672, vocabulary 128256, bfloat16), where nothing is fetched here.

Measured 2026-11-25 03:55 UTC on the shared 2-core machine, defaults::

    shape d=1024, 16 heads on 4 key heads, 8 layers, FFN 2816, vocab 32000, float16, 4 shards: files 0.311 GB
      q/k, empty cache       fetched 0.021 GB in 26 requests; q/k 0.021 GB; fetched/q-k 1.0004, fetched/files 0.0674
      q/k, cache filled      fetched 0.000 GB in 6 requests; q/k 0.021 GB; fetched/q-k 0.0000, fetched/files 0.0000
      + v, o (components)    fetched 0.021 GB in 21 requests; v/o 0.021 GB; fetched/v-o 1.0000
    LLaMA-3-70B shape (bfloat16, arithmetic): files 141.107 GB, q/k 12.080 GB (8.6% of the files)

(The 0.0004 above 1 is the shards' 8-byte lengths and JSON headers; requests include
config.json and the index. A filled cache asks each shard for its first 8 bytes only.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        path = srv.folder / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
        lo, hi = (int(m[1]), min(int(m[2]), size - 1)) if m else (0, size - 1)
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{size}")
        self.send_header("Content-Length", str(hi - lo + 1))
        self.send_header("ETag", f'"{path.name}-{size}"')
        self.end_headers()
        srv.requests += 1  # counted before sending: the client may go on before a late count
        srv.served += (hi - lo + 1) if path.suffix == ".safetensors" else 0
        with open(path, "rb") as f:
            f.seek(lo)
            self.wfile.write(f.read(hi - lo + 1))


def write_llama(folder: Path, d, heads, kv, layers, ffn, vocab, shards, seed=0):
    from safetensors.numpy import save_file

    dh = d // heads
    shapes = {"model.embed_tokens.weight": (vocab, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {p + "input_layernorm.weight": (d,), p + "self_attn.q_proj.weight": (heads * dh, d),
                   p + "self_attn.k_proj.weight": (kv * dh, d),
                   p + "self_attn.v_proj.weight": (kv * dh, d),
                   p + "self_attn.o_proj.weight": (d, heads * dh),
                   p + "post_attention_layernorm.weight": (d,),
                   p + "mlp.gate_proj.weight": (ffn, d), p + "mlp.up_proj.weight": (ffn, d),
                   p + "mlp.down_proj.weight": (d, ffn)}
    shapes |= {"model.norm.weight": (d,), "lm_head.weight": (vocab, d)}
    names, rng, weight_map = list(shapes), np.random.default_rng(seed), {}
    for k, part in enumerate(np.array_split(np.arange(len(names)), shards)):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file({names[j]: (0.02 * rng.standard_normal(shapes[names[j]], dtype=np.float32))
                   .astype(np.float16) for j in part}, str(folder / file))
        weight_map |= {names[j]: file for j in part}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
        "num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": layers,
        "intermediate_size": ffn, "vocab_size": vocab}))
    nbytes = {n: 2 * int(np.prod(s)) for n, s in shapes.items()}
    return nbytes


def _gb(x):
    return f"{x / 1e9:.3f} GB"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("d", 1024), ("heads", 16), ("kv", 4), ("layers", 8), ("ffn", 2816),
                          ("vocab", 32000), ("shards", 4)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RMTBASE_CACHE"] = str(Path(tmp) / "cache")
        folder = Path(tmp) / "model"
        folder.mkdir()
        nbytes = write_llama(folder, a.d, a.heads, a.kv, a.layers, a.ffn, a.vocab, a.shards)
        from rmtbase.models import load_components, load_heads

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.folder, httpd.served, httpd.requests = folder, 0, 0
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_port}"
        total = sum(p.stat().st_size for p in folder.glob("*.safetensors"))

        def part_bytes(parts):
            return sum(v for k, v in nbytes.items() if re.search(rf"\.({parts})_proj\.", k))

        local = [(x.wq, x.wk) for x in load_heads(folder)]
        print(f"shape d={a.d}, {a.heads} heads on {a.kv} key heads, {a.layers} layers, "
              f"FFN {a.ffn}, vocab {a.vocab}, float16, {a.shards} shards: files {_gb(total)}")
        for label in ("q/k, empty cache", "q/k, cache filled"):
            httpd.served = httpd.requests = 0
            got = [(x.wq, x.wk) for x in load_heads(url)]
            assert all(np.array_equal(p, q) for g, w in zip(got, local, strict=True)
                       for p, q in zip(g, w, strict=True)), "values differ from the folder"
            qk = part_bytes("q|k")
            print(f"  {label:22s} fetched {_gb(httpd.served)} in {httpd.requests} requests; "
                  f"q/k {_gb(qk)}; fetched/q-k {httpd.served / qk:.4f}, "
                  f"fetched/files {httpd.served / total:.4f}")
        httpd.served = httpd.requests = 0
        for _ in load_components(url, components=("q", "k", "v", "o")):
            pass
        # q/k cached above: this fetches v and o (and each shard's 8-byte probe)
        vo = part_bytes("v|o")
        print(f"  {'+ v, o (components)':22s} fetched {_gb(httpd.served)} in {httpd.requests} "
              f"requests; v/o {_gb(vo)}; fetched/v-o {httpd.served / vo:.4f}")
        httpd.shutdown()
        httpd.server_close()
    d, h, kv, layers, ffn, vocab = 8192, 64, 8, 80, 28672, 128256
    per_layer = 2 * (h * 128 * d + kv * 128 * d)  # bytes of q and k per layer
    whole = 2 * (2 * vocab * d + d
                 + layers * (2 * h * 128 * d + 2 * kv * 128 * d + 3 * ffn * d + 2 * d))
    print(f"LLaMA-3-70B shape (bfloat16, arithmetic): files {_gb(whole)}, q/k "
          f"{_gb(layers * per_layer)} ({layers * per_layer / whole:.1%} of the files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
