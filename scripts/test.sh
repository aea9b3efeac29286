#!/usr/bin/env bash
# Install the test needs into .venv and run the tests. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" test
# Headless Chromium for the report.html browser test (tests/test_html.py), from Debian's
# packages when running as root with apt-get; otherwise (or if it fails) that test skips and
# says why. RMTBASE_NO_APT=1 skips this step.
if [ -z "${RMTBASE_NO_APT:-}" ] && ! command -v chromium >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { timeout 600 apt-get update -q && DEBIAN_FRONTEND=noninteractive timeout 900 \
      apt-get install -y -q --no-install-recommends chromium; } >/dev/null 2>&1 \
    || echo "scripts/test.sh: could not install chromium; the browser test will skip" >&2
fi
# The quick tier by default (every statistical claim at a small shape; <= 10 min on 2 cores);
# `--all` adds the long Monte Carlo, calibration and model tests marked slow; a `-m` of the
# caller's replaces the default selection (e.g. `-m slow`).
marker=(-m "not slow")
if [ "${1:-}" = --all ]; then marker=(); shift; fi
# --dist loadfile: each test module runs in one worker, so its JAX programs compile once.
exec .venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 "${marker[@]}" "$@"
