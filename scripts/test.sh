#!/usr/bin/env bash
# Install the test needs into .venv and run the tests. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" test
exec .venv/bin/python -m pytest -n 2 "$@"
