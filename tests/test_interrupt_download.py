"""Ctrl-C ends a stalled whole-file download at once.

When a server ignores byte ranges, :class:`rmtbase.files.ranges.RemoteFile` falls back to
downloading the whole file. That download used to run inside
:func:`rmtbase.files.interrupts.deferred` (it was the fill of
:func:`rmtbase.files.atomic.write_atomic`), so a SIGINT arriving while the server stalled was
held until the socket timeout (``transport.TIMEOUT`` = 60 s; 57.2 s measured by the red team).

Here a real HTTP server on 127.0.0.1 (``http.server`` in a thread, no external network)
answers the range request with ``200``, a ``Content-Length`` of 8 MiB, 64 KiB of body and then
nothing. A subprocess reads the file as the ``rmtbase`` executable would (its SIGINT handler,
:func:`rmtbase.files.interrupts.install`), and is sent SIGINT once the server has sent the
first bytes and the client has announced the whole download. It must end with status 130
and leave nothing in the cache. The bound is the subprocess wait's ``timeout=10``: not a
timing measurement (an interrupt takes milliseconds), but the old code waited ~60 s and so
fails it by ~50 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SIZE = 8 * 2**20
SENT = 64 * 2**10

_CHILD = """
import sys
from rmtbase.files import interrupts
interrupts.install()
from rmtbase.files.ranges import RemoteFile
try:
    RemoteFile(sys.argv[1]).read_range(0, 8)
except KeyboardInterrupt:
    print("rmtbase: interrupted", file=sys.stderr, flush=True)
    sys.exit(130)
print("read", flush=True)
"""


class _Stalling(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        srv = self.server
        self.send_response(200)  # a server that ignores Range
        self.send_header("Content-Length", str(SIZE))
        self.send_header("ETag", '"stall-1"')
        self.end_headers()
        self.wfile.write(b"\0" * SENT)
        self.wfile.flush()
        srv.started.set()
        srv.release.wait(120)  # then nothing: the client waits on its socket


@pytest.fixture
def stalling():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stalling)
    httpd.daemon_threads = True
    httpd.handle_error = lambda request, address: None  # a client that hung up
    httpd.started, httpd.release = threading.Event(), threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_sigint_ends_a_stalled_whole_download(stalling, tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "RMTBASE_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
    url = f"http://127.0.0.1:{stalling.server_port}/model.safetensors"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, url], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert stalling.started.wait(60), "the client never asked for the file"
        note = proc.stderr.readline()  # announced before the download starts
        assert "downloading the whole file" in note, note
        time.sleep(0.5)  # well inside the stalled read of the body
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=10)  # the old code held the SIGINT for ~60 s
        except subprocess.TimeoutExpired:
            pytest.fail("SIGINT did not end the stalled download within 10 s")
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert code == 130, err
    assert "rmtbase: interrupted" in err, err
    left = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert left == [], f"an interrupted download left {left}"
