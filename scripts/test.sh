#!/usr/bin/env bash
# Install the test needs into .venv and run the tests. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" test
# Headless Chromium for the report.html browser test (tests/test_html.py). System packages
# are installed only when asked: RMTBASE_APT=1 (as root, with apt-get) installs Debian's
# chromium; without it nothing outside .venv is touched, and a missing chromium is said here
# (that one test then skips and says why).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "${RMTBASE_APT:-}" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { timeout 600 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 900 \
        apt-get install -y -q --no-install-recommends chromium; } >/dev/null 2>&1 \
      || echo "scripts/test.sh: could not install chromium; the browser test will skip" >&2
  elif [ "${RMTBASE_APT:-}" = 1 ]; then
    echo "scripts/test.sh: RMTBASE_APT=1 needs root and apt-get; not installing chromium," \
      "the browser test will skip" >&2
  else
    echo "scripts/test.sh: no chromium; skipping its install (system packages only with" \
      "RMTBASE_APT=1, as root with apt-get); the browser test (tests/test_html.py) will skip" >&2
  fi
fi
# The quick tier by default (every statistical claim at a small shape; aim: 10 min on 2 cores);
# `--all` adds the long Monte Carlo, calibration and model tests marked slow; a `-m` of the
# caller's replaces the default selection (e.g. `-m slow`).
marker=(-m "not slow")
if [ "${1:-}" = --all ]; then marker=(); shift; fi
# Bytecode of src/ and tests/ is written (to the checkout's ignored __pycache__ folders) even
# where PYTHONDONTWRITEBYTECODE is set: each of the run's processes (2 workers, every rmtbase
# command a test starts) would otherwise compile and assertion-rewrite every module again.
unset PYTHONDONTWRITEBYTECODE
# --dist loadfile: each test module runs in one worker, so its JAX programs compile once.
exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "${marker[@]}" "$@"
