#!/usr/bin/env bash
# TransformerLens models (tests/test_transformer_lens.py) in a venv of their own, .venv-tl.
# Not part of .venv or scripts/test.sh: transformer-lens brings datasets, pyarrow and wandb,
# and pyarrow switches pandas 3's default string storage from python to pyarrow for every
# test. Measured (2 shared cores): first install 6 min 35 s, 2.5 GB; the tests 2-3 min.
# RMTBASE_TL3=1 also puts TransformerLens 3.9.0 first on the path (its HookedTransformer,
# removed in 4.0, is read too). Extra arguments go to pytest. Set RMTBASE_TL_VENV to use
# another venv folder.
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1
venv=${RMTBASE_TL_VENV:-.venv-tl}
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q "torch==2.13.0"
"$venv/bin/python" -m pip install -q -e ".[test,tl]"
if [ "${RMTBASE_TL3:-}" = 1 ]; then
  tl3="$(cd "$venv" && pwd)/tl3"
  [ -d "$tl3/transformer_lens" ] || "$venv/bin/python" -m pip install -q --no-deps \
    --target "$tl3" "transformer-lens==3.9.0" better-abc
  export PYTHONPATH="$tl3${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$venv/bin/python" -m pytest tests/test_transformer_lens.py -p no:cacheprovider "$@"
