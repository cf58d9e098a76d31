#!/usr/bin/env bash
# The project's GPU benchmarks in one call (about 9 minutes), for a task that is lent a GPU machine.
#
#   bash benchmarks/gpu.sh            # on the GPU machine, in the repo root; figures land in $OUT
#   DRY_RUN=1 bash benchmarks/gpu.sh  # anywhere, on the CPU: each line at tiny shapes (a check of the script)
#
# That machine has python3 with torch, transformers, safetensors and pyarrow but no pydantic or
# DeepSpeed: carry them as wheels in .whl/ (benchmarks/README.md, "Running on a lent GPU").
# A session has 15 minutes of device time, start-up included: the lines run most wanted first,
# each under its own cap (the caps add up to 590 s), and every line's output goes to $OUT/all.log,
# the JSON rows to $OUT/<line>.json (the tool brings back 8 files at most).
set -uo pipefail
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -d .whl ] && [ "${DRY_RUN:-0}" != 1 ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
LOG=$OUT/all.log
line() {  # line CAP NAME COMMAND...: one benchmark under its cap, its output kept in the log
  local cap=$1 name=$2 start=$SECONDS
  shift 2
  echo "### $name (cap $cap s): $*" | tee -a "$LOG"
  timeout "$cap" "$@" 2>&1 | grep -v -e "Loading weights" -e "^\[20" | tee -a "$LOG"
  echo "### $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s" | tee -a "$LOG"
}

if [ "${DRY_RUN:-0}" = 1 ]; then
  line 120 dflash_memory $PY benchmarks/bench_dflash_memory.py --dry-run --json "$OUT/dflash_memory.json"
  line 120 dspark_memory $PY benchmarks/bench_dflash_memory.py --kind dspark --dry-run --json "$OUT/dspark_memory.json"
  line 300 long_context $PY benchmarks/bench_long_context.py --dry-run --json "$OUT/long_context.json"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$LOG"
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$LOG"

# flex's gradients (train.ttt_attention: flex): the attention tests that need a GPU, compiled flex padded to
# its length against the dense reference (tests/drafter/test_attention_kernels.py; skipped on a CPU).
line 90 flex_gradients $PY -m pytest -q -p no:cacheprovider --noconftest tests/drafter/test_attention_kernels.py -k flex

# DFlash train step (issue 36): an 8B-shaped DFlash drafter (H=4096, 32 heads, 8 KV heads, MLP 14336,
# 32K draft of 128K vocab, bf16), block 16, 512 anchors, one T-token sample, after one warm-up step:
# peak memory, step time, tokens/s at 2K-32K, beside the long-context table's EAGLE-3 rows.
line 80 dflash_memory $PY benchmarks/bench_dflash_memory.py --device cuda --tokens 2048 8192 16384 32768 \
  --json "$OUT/dflash_memory.json"

# DSpark train step (issue 36): the same, with DSpark's Markov head (rank 256 over the 128K vocab). Not run yet.
line 70 dspark_memory $PY benchmarks/bench_dflash_memory.py --kind dspark --device cuda --tokens 2048 8192 16384 32768 \
  --json "$OUT/dspark_memory.json"

# long context (issue 24): at 2K/8K/16K/32K tokens, an 8B-shaped EAGLE-3 drafter (H=4096, 128K target /
# 32K draft vocab, bf16, random weights, K=7): one train step through the blocked TTT attention,
# flex_attention (compiled) and SDPA (dense mask), each where it runs: peak memory, step time, tokens/s;
# then the extract engine on an 8B-shaped target against a bare forward. Rows past its budget are listed as not run.
line 190 long_context $PY benchmarks/bench_long_context.py --device cuda --budget 150 --child-timeout 80 \
  --json "$OUT/long_context.json"

# extract: an 8B-shaped Llama (32 layers, 128K vocab), random bf16 weights, 32 samples of ~1K tokens
# (log-normal), 16K-token batches; the stage's engine against a bare forward pass.
line 60 extract $PY benchmarks/bench_extract.py --preset llama-8b --device cuda --samples 32 --mean-len 1024 \
  --max-tokens-per-batch 16384 --shard-tokens 32768 --repeats 1 --json "$OUT/extract.json"

# evaluate: the offline chain loop (k=3, batch 1, bf16) against plain KV-cached greedy decoding on an
# 8B-shaped random Llama + random EAGLE-3 drafter: the loop's cost per emitted token (acceptance ~1 at random).
line 40 evaluate $PY benchmarks/bench_evaluate.py --preset llama-8b --device cuda --prompts 2 --prompt-len 256 \
  --max-tokens 48 -k 3 --json "$OUT/evaluate.json"

# train: an 8B-shaped drafter (H=4096, 32 heads, 32K draft of a 64K target vocab), 8K-token micro-batches,
# TTT 7, the ZeRO-2 bf16 DeepSpeed engine against a bare PyTorch loop on the same batches.
line 60 train $PY benchmarks/bench_train.py --device cuda --hidden 4096 --heads 32 --vocab 65536 --tokens 8192 \
  --seq 2048 --steps 4 --rounds 1
