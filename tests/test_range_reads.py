"""Remote safetensors shards are read by HTTP byte ranges: only the tensors scored come over the
wire, the values equal the local folder's, a server without ranges falls back to a whole
download with a note, and the hub route builds its URLs and headers as huggingface_hub does.

A real HTTP server on 127.0.0.1 (``http.server`` in a thread, no external network) serves a
small sharded LLaMA (d = 64, 4 query heads on 2 key heads, 2 layers, an FFN of 512 and a
vocabulary of 512, so that q/k are a small part of the files). It implements single byte
ranges (RFC 9110 §14: ``206`` with ``Content-Range``) unless told not to, counts the body bytes
it sends per file, and logs each request's path, range and Authorization header. The expected
q/k byte counts come from the ``safetensors`` package's own reader, not from rmtbase.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rmtbase.errors import ModelError
from rmtbase.files.ranges import RemoteFile
from rmtbase.models import hub as hub_mod
from rmtbase.models import load_components, load_heads

D, H, KV, L = 64, 4, 2, 2


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        srv = self.server
        path = srv.routes.get(self.path.split("?")[0])
        rng = self.headers.get("Range")
        srv.log.append((self.path, rng, self.headers.get("Authorization")))
        if path is None:
            self.send_error(404)
            return
        if isinstance(path, str):  # a redirect, as the hub's to its CDN
            self.send_response(302)
            self.send_header("Location", path)
            self.send_header("X-Linked-Etag", f'"sha-{path.rsplit("/", 1)[-1]}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = path.read_bytes()
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng or "")
        if m and int(m[1]) >= 8 and srv.ranges in ("fail", "shift"):  # the header comes
            if srv.ranges == "fail":  # a server that breaks after the header length
                self.send_error(503)
                return
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", f"bytes={int(m[1]) + 1}-{int(m[2]) + 1}")
        if srv.ranges and m:
            lo, hi = int(m[1]), min(int(m[2]), len(data) - 1)
            body = data[lo:hi + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
            self.send_header("Accept-Ranges", "bytes")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        if srv.etag:
            self.send_header("ETag", f'"{srv.etag}-{path.name}"')
        self.end_headers()
        # counted before it is sent: the client may go on before this thread would count
        srv.served[path.name] = srv.served.get(path.name, 0) + len(body)
        self.wfile.write(body)


class _Server:
    """A range-capable (or not) HTTP server in a thread; ``routes``: {url path: file}."""

    def __init__(self, routes, *, ranges=True, etag="v1"):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.handle_error = lambda request, address: None  # a client that hung up
        self.httpd.routes, self.httpd.ranges, self.httpd.etag = routes, ranges, etag
        self.httpd.served, self.httpd.log = {}, []
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.root = f"http://127.0.0.1:{self.httpd.server_port}"

    def shard_bytes(self):
        return sum(v for k, v in self.httpd.served.items() if k.endswith(".safetensors"))

    def reset(self):
        self.httpd.served.clear()
        self.httpd.log.clear()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def _routes(folder: Path, prefix: str):
    return {f"{prefix}/{p.name}": p for p in folder.iterdir() if p.is_file()}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A small random LLaMA in LLaMA's tensor names, saved by the safetensors package in five
    shards with an index (as ``save_pretrained`` shards: whole tensors, in order)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    ffn, vocab, dh = 512, 512, D // H
    shapes = {"model.embed_tokens.weight": (vocab, D)}
    for i in range(L):
        p = f"model.layers.{i}."
        shapes |= {p + "input_layernorm.weight": (D,),
                   p + "self_attn.q_proj.weight": (H * dh, D),
                   p + "self_attn.k_proj.weight": (KV * dh, D),
                   p + "self_attn.v_proj.weight": (KV * dh, D),
                   p + "self_attn.o_proj.weight": (D, H * dh),
                   p + "post_attention_layernorm.weight": (D,),
                   p + "mlp.gate_proj.weight": (ffn, D),
                   p + "mlp.up_proj.weight": (ffn, D),
                   p + "mlp.down_proj.weight": (D, ffn)}
    shapes |= {"model.norm.weight": (D,), "lm_head.weight": (vocab, D)}
    names = list(shapes)
    out = tmp_path_factory.mktemp("llama")
    weight_map = {}
    for k, part in enumerate(np.array_split(np.arange(len(names)), 5)):
        file = f"model-{k + 1:05d}-of-00005.safetensors"
        save_file({names[j]: (0.02 * rng.standard_normal(shapes[names[j]])).astype(np.float32)
                   for j in part}, str(out / file))
        weight_map |= {names[j]: file for j in part}
    (out / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (out / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": D,
        "num_attention_heads": H, "num_key_value_heads": KV, "num_hidden_layers": L,
        "intermediate_size": ffn, "vocab_size": vocab}))
    return out


def _qk_shards(folder):
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    return {f for k, f in index.items() if "q_proj" in k or "k_proj" in k}


@pytest.fixture(scope="module")
def shards(folder):
    """{tensor name: nbytes} and the total header bytes (8 + n per shard), read with the
    safetensors package."""
    import struct

    from safetensors import safe_open

    sizes, headers = {}, 0
    for p in sorted(folder.glob("*.safetensors")):
        headers += 8 + struct.unpack("<Q", p.read_bytes()[:8])[0]
        with safe_open(str(p), "np") as f:
            for name in f.keys():
                sizes[name] = f.get_tensor(name).nbytes
    return sizes, headers


@pytest.fixture(scope="module")
def local_heads(folder):
    return [(x.wq, x.wk) for x in load_heads(folder)]


@pytest.fixture(scope="module")
def server(folder):
    srv = _Server(_routes(folder, "/m"))
    yield srv
    srv.close()


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same(heads, local):
    assert len(heads) == len(local) == L
    for (wq, wk), (lq, lk) in zip(heads, local, strict=True):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the same
        #  bytes, read by ranges or whole)
        np.testing.assert_array_equal(wq, lq)
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the same
        #  bytes, read by ranges or whole)
        np.testing.assert_array_equal(wk, lk)


def _bytes_of(sizes, parts):
    return sum(v for k, v in sizes.items()
               if any(f".self_attn.{p}_proj." in k for p in parts))


def test_url_reads_only_qk_and_values_equal_the_folder(server, shards, local_heads, cache,
                                                       capsys):
    sizes, headers = shards
    qk = _bytes_of(sizes, "qk")
    total = sum(sizes.values())
    assert total > 5 * qk  # the bound below is far from a whole download
    server.reset()
    heads = [(x.wq, x.wk) for x in load_heads(server.root + "/m")]
    _same(heads, local_heads)
    fetched = server.shard_bytes()
    assert qk <= fetched <= 1.2 * qk + headers, (fetched, qk, headers)
    assert all(r is not None for p, r, _ in server.httpd.log if p.endswith(".safetensors"))
    assert "note" not in capsys.readouterr().err
    # a second read comes from the user cache: only the 8-byte probe of each shard
    server.reset()
    _same([(x.wq, x.wk) for x in load_heads(server.root + "/m")], local_heads)
    assert server.shard_bytes() <= 8 * len(_qk_shards(server.httpd.routes["/m/config.json"].parent))


def test_components_read_only_what_is_asked(server, shards, folder, cache):
    sizes, headers = shards
    server.reset()
    remote = list(load_components(server.root + "/m", components=("q", "k", "v", "o")))
    local = list(load_components(folder, components=("q", "k", "v", "o")))
    for a, b in zip(remote, local, strict=True):
        assert a.matrices.keys() == b.matrices.keys() and a.storage == b.storage
        for k in a.matrices:
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (the same
            #  bytes, read by ranges or whole)
            np.testing.assert_array_equal(a.matrices[k], b.matrices[k])
    want = _bytes_of(sizes, "qkvo")
    assert want <= server.shard_bytes() <= 1.2 * want + headers


@pytest.mark.slow  # 26-56 s (JAX compilation, null table); the quick tests compare the inputs
def test_score_of_url_equals_score_of_folder(server, folder, module_cache):
    from rmtbase.scoring.score import score_model

    kw = dict(stats="spectral", draws=60, max_draws=60, progress=False, spectrum_draws=0)
    a, b = score_model(server.root + "/m", **kw), score_model(str(folder), **kw)
    for name in ("p_value", "qk_spectrum"):
        # exact: the same call twice in one process: same compiled programs, same inputs (the same
        #  bytes, read by ranges or whole)
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_server_without_ranges_falls_back_to_whole_download(folder, local_heads, cache, capsys):
    srv = _Server(_routes(folder, "/m"), ranges=False)
    try:
        _same([(x.wq, x.wk) for x in load_heads(srv.root + "/m")], local_heads)
        err = capsys.readouterr().err.strip().splitlines()
        used = _qk_shards(folder)  # shards without q/k are never opened
        assert 1 < len(used) < 5 and len(err) == len(used)
        assert all(ln.startswith("rmtbase: note: cannot read model-") and
                   "by byte ranges" in ln and ln.endswith("downloading the whole file")
                   for ln in err)
        whole = sum((folder / f).stat().st_size for f in used)
        assert srv.shard_bytes() == whole
        # the whole files are cached under their ETag: a second read downloads nothing again
        # (the probe's 200 answer is hung up on after its headers), and says nothing
        _same([(x.wq, x.wk) for x in load_heads(srv.root + "/m")], local_heads)
        assert capsys.readouterr().err == ""
    finally:
        srv.close()


@pytest.mark.parametrize("mode", ["fail", "shift"])
def test_range_errors_fall_back_to_whole_download(mode, folder, local_heads, cache, capsys):
    """A server that answers the 8-byte probe, then errors (503) or sends other bytes than
    asked (a shifted Content-Range): each shard falls back to a whole download."""
    srv = _Server(_routes(folder, "/m"), ranges=mode)
    try:
        _same([(x.wq, x.wk) for x in load_heads(srv.root + "/m")], local_heads)
        err = capsys.readouterr().err.strip().splitlines()
        reason = "HTTPError: HTTP Error 503" if mode == "fail" else "NoRanges: bad Content-Range"
        assert len(err) == len(_qk_shards(folder)) and all(reason in ln for ln in err), err
    finally:
        srv.close()


def test_redirect_to_another_host_drops_the_token_and_keeps_the_hop_etag(
        folder, local_heads, cache, monkeypatch):
    """The hub answers with a redirect to a CDN on another host (here: another port) that
    sends no ETag: the token is not sent there, ranges still work, and the redirect's
    X-Linked-Etag keys the disk cache (a second read fetches no tensor bytes)."""
    cdn = _Server(_routes(folder, "/blob"), etag=None)
    hub = _Server({f"/m/{p.name}": f"{cdn.root}/blob/{p.name}" for p in folder.iterdir()})
    try:
        token = {"authorization": "Bearer hf_abcdefghijklmnopqrstuvwxyz"}
        for _ in range(2):
            cdn.reset()
            for name in sorted(_qk_shards(folder)):
                f = RemoteFile(f"{hub.root}/m/{name}", headers=token)
                raw = (folder / name).read_bytes()
                n = 8 + int.from_bytes(raw[:8], "little")
                assert f.read_range(0, n) == raw[:n] and f.read_range(n, n + 999) == \
                    raw[n:n + 999]
            assert cdn.httpd.log and all(auth is None for _, _, auth in cdn.httpd.log)
            assert all(auth == "Bearer hf_abcdefghijklmnopqrstuvwxyz"
                       for _, _, auth in hub.httpd.log)
        assert cdn.shard_bytes() == 8 * len(_qk_shards(folder))  # the second pass: probes
    finally:
        cdn.close()
        hub.close()


def test_bad_urls_are_one_line_errors(server, cache, capsys):
    from rmtbase.cli import main
    from rmtbase.cli.model_args import expand_models

    assert expand_models(["https://h/m?sig=a*b"]) == ["https://h/m?sig=a*b"]  # not a glob
    with pytest.raises(ModelError, match=r"cannot get config\.json of .*/nothing: HTTPError: "
                                         r"HTTP Error 404") as err:
        load_heads(server.root + "/nothing")
    assert "\n" not in str(err.value)
    closed = _Server({})
    url = closed.root + "/m"
    closed.close()
    for model in (url, "hf://"):
        assert main(["score", model, "--quiet", "--out", str(cache.parent / "o")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rmtbase: error:"), lines


def test_fsspec_url_reads_the_same_values(folder, local_heads, cache):
    _same([(x.wq, x.wk) for x in load_heads(folder.as_uri())], local_heads)


def test_remote_file_ranges_equal_file_slices(tmp_path, cache):
    data = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8).tobytes()
    (tmp_path / "blob").write_bytes(data)
    srv = _Server({"/blob": tmp_path / "blob"})
    try:
        f = RemoteFile(srv.root + "/blob")
        f.prefetch([(100, 200), (200, 300), (250, 400), (1000, 1100)])
        # the 8-byte probe, then touching/overlapping ranges merged: 3 requests in all
        assert [r for _, r, _ in srv.httpd.log] == ["bytes=0-7", "bytes=100-399",
                                                   "bytes=1000-1099"]
        assert f.read_range(150, 350) == data[150:350] and len(srv.httpd.log) == 3
        for lo, hi in [(0, 8), (5, 9000), (9990, 10_000), (9990, 20_000), (3, 3)]:
            assert f.read_range(lo, hi) == data[lo:hi]
        assert f.size == len(data) and f.bytes_fetched == 8 + 300 + 100 + 8995 + 10
        assert len(list((cache / "remote").rglob("*-*"))) == 5  # (0, 8) and 4 ranges
    finally:
        srv.close()


def test_without_a_validator_nothing_is_cached_on_disk(tmp_path, cache):
    data = np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    (tmp_path / "blob").write_bytes(data)
    srv = _Server({"/blob": tmp_path / "blob"}, etag=None)
    try:
        f = RemoteFile(srv.root + "/blob")
        f.prefetch([(10, 20), (20, 4000)])
        assert f.read_range(10, 4000) == data[10:4000]
        assert f.read_range(0, 5000) == data and f.read_range(0, 5000) == data
        assert f.bytes_fetched == 8 + 3990 + 2 * 5000
        assert not [p for p in cache.rglob("*") if p.is_file()]
    finally:
        srv.close()


# -- the hub route -------------------------------------------------------------------------

def test_hub_urls_and_headers_as_huggingface_hub_builds_them(monkeypatch):
    from huggingface_hub import constants, hf_hub_url

    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", raising=False)
    url = hub_mod.file_url("org/m", "model-00001-of-00002.safetensors", "refs/pr/1")
    assert url == hf_hub_url("org/m", "model-00001-of-00002.safetensors", revision="refs/pr/1")
    assert url == (f"{constants.ENDPOINT}/org/m/resolve/refs%2Fpr%2F1/"
                   "model-00001-of-00002.safetensors")
    assert hub_mod.file_url("org/m", "x.safetensors", None).endswith("/org/m/resolve/main/"
                                                                      "x.safetensors")
    headers = {k.lower(): v for k, v in hub_mod.request_headers().items()}
    assert headers["authorization"] == "Bearer hf_abcdefghijklmnopqrstuvwxyz"
    assert "user-agent" in headers


def test_hub_repo_read_by_ranges_through_hub_urls(folder, local_heads, shards, cache,
                                                  monkeypatch):
    """The hub route end to end against a local server standing in for ``HF_ENDPOINT``:
    shards come by ranges from ``/org/tiny/resolve/v1/<file>`` with the token."""
    from huggingface_hub import constants

    srv = _Server({**_routes(folder, "/org/tiny/resolve/v1"),
                   **_routes(folder, "/org/tiny/resolve/main")})
    try:
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            srv.root + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
        downloads = []

        def download(repo_id, filename, revision):
            downloads.append(filename)
            return folder / filename

        monkeypatch.setattr(hub_mod, "_download", download)
        monkeypatch.setattr(hub_mod, "_list_files",
                            lambda repo_id, revision: [p.name for p in folder.iterdir()])
        for model, rev in (("org/tiny", "v1"), ("hf://org/tiny@v1", None)):
            srv.reset()
            _same([(x.wq, x.wk) for x in load_heads(model, revision=rev)], local_heads)
            log = srv.httpd.log
            assert log and all(p.startswith("/org/tiny/resolve/v1/model-") and r
                               and auth == "Bearer hf_abcdefghijklmnopqrstuvwxyz"
                               for p, r, auth in log)
        assert not any(f.endswith(".safetensors") for f in downloads)
        # a hub that serves no ranges: the shards come whole through hf_hub_download
        srv.httpd.ranges = False
        _same([(x.wq, x.wk) for x in load_heads("org/tiny", revision="main")], local_heads)
        assert {f for f in downloads if f.endswith(".safetensors")} == _qk_shards(folder)
    finally:
        srv.close()
