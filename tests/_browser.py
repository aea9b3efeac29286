"""Run a report page in headless Chromium (Debian's ``chromium`` package) with a small harness.

:func:`run_page` copies the page, adds a first script that records ``window.onerror`` and
``console.error`` and, at the end of the body, ``actions`` (JavaScript that fills the object
``r``), then runs ``chromium --headless --dump-dom`` with every host name unresolvable (a
network fetch would fail and be logged) and console logging on stderr. It returns ``r`` (with
``r.errors``, the recorded errors) and the console lines Chromium logged.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
SKIP_REASON = ("headless Chromium not found: install Debian's 'chromium' package "
               "(RMTBASE_APT=1 scripts/test.sh does, as root, when apt-get is available)")

_HEAD = """<script>window.__errors=[];window.addEventListener('error',function(e){
window.__errors.push(String(e.message));});(function(){var ce=console.error;console.error=function(){
window.__errors.push(Array.prototype.join.call(arguments,' '));ce.apply(console,arguments);};})();</script>"""
_TAIL = """<script>(function(){var r={};try{%s}catch(e){window.__errors.push('harness: '+e);}
r.errors=window.__errors;var p=document.createElement('pre');p.id='harness';
p.textContent=JSON.stringify(r);document.body.appendChild(p);})();</script>"""


def run_page(page: Path, actions: str, workdir: Path, window: tuple[int, int] | None = None
             ) -> tuple[dict, list[str]]:
    """(harness result, Chromium console lines) of ``page`` with ``actions`` run after load;
    ``window``: the window's (width, height) in CSS pixels (Chromium's default otherwise)."""
    src = Path(page).read_text(encoding="utf-8")
    assert src.count("<head>") == 1 and src.count("</body>") == 1
    test_page = workdir / "harness.html"
    test_page.write_text(src.replace("<head>", "<head>" + _HEAD, 1)
                         .replace("</body>", _TAIL % actions + "</body>", 1), encoding="utf-8")
    profile = workdir / "chromium-profile"
    env = {**os.environ, "HOME": str(workdir)}
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000",
         *([f"--window-size={window[0]},{window[1]}"] if window else []),
         "--dump-dom", test_page.as_uri()],
        capture_output=True, text=True, timeout=120, env=env)
    m = re.search(r'<pre id="harness">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no harness output; chromium exit {proc.returncode}: {proc.stderr[-2000:]}"
    console = [line for line in proc.stderr.splitlines()
               if "CONSOLE" in line or "Uncaught" in line or "ERR_" in line
               or "Failed to load" in line]
    return json.loads(html.unescape(m.group(1))), console
