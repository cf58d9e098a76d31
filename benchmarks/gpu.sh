#!/usr/bin/env bash
# The project's GPU benchmarks in one short run, for a task that is lent a GPU machine.
#
#   bash benchmarks/gpu.sh            # on the GPU machine, in the repo root; figures land in $OUT
#   DRY_RUN=1 bash benchmarks/gpu.sh  # anywhere, on the CPU: the same table at tiny shapes (a check of the script)
#   GPU_ALL=1 bash benchmarks/gpu.sh  # also the older lines below the table (more than one call's 10 minutes)
#
# That machine has python3 with torch, transformers, safetensors and pyarrow but no pydantic:
# carry it as wheels in .whl/ (benchmarks/README.md, "Running on a lent GPU"). Budget: the
# whole script must stay well inside one 10-minute call; each line below says its own cap.
set -uo pipefail
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1

# long context (cap 470 s, issue 24): at 2K/8K/16K/32K tokens, an 8B-shaped drafter (H=4096, 128K target /
# 32K draft vocab, bf16, random weights, K=7): one train step through the blocked TTT attention,
# flex_attention (compiled) and SDPA (dense mask), each where it runs: peak memory, step time, tokens/s;
# then the extract engine on an 8B-shaped target against a bare forward. One table.
if [ "${DRY_RUN:-0}" = 1 ]; then
  timeout 300 $PY benchmarks/bench_long_context.py --dry-run --json "$OUT/long_context_dry_run.json" 2>&1 \
    | grep -v "Loading weights" | tee "$OUT/long_context_dry_run.log"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
timeout 470 $PY benchmarks/bench_long_context.py --device cuda --budget 400 --json "$OUT/long_context.json" 2>&1 \
  | grep -v "Loading weights" | tee "$OUT/long_context.log"
[ "${GPU_ALL:-0}" = 1 ] || exit 0

# extract (cap 180 s): an 8B-shaped Llama (H=4096, 32 layers, 128K vocab), random bf16 weights,
# 64 samples of ~1K tokens (log-normal), 16K-token batches; extraction vs a bare forward pass.
timeout 180 $PY benchmarks/bench_extract.py --preset llama-8b --device cuda --samples 64 --mean-len 1024 \
  --max-tokens-per-batch 16384 --shard-tokens 32768 --repeats 2 --json "$OUT/extract.json" 2>&1 \
  | grep -v "Loading weights" | tee "$OUT/extract.log"

# --- training and evaluation: append your lines below, each with its own timeout ---

# train (cap 200 s): an 8B-shaped drafter (H=4096, 32 heads, 32K draft of a 64K target vocab),
# 8K-token micro-batches, TTT 7, ZeRO-2 bf16 DeepSpeed engine vs a bare PyTorch loop, same batches.
# Needs deepspeed importable (carry its wheel in .whl/ beside pydantic).
timeout 200 $PY benchmarks/bench_train.py --device cuda --hidden 4096 --heads 32 --vocab 65536 --tokens 8192 \
  --seq 2048 --steps 6 --rounds 2 2>&1 | grep -v "^\[" | tee "$OUT/train.log"

# evaluate (cap 150 s): the offline chain loop (ChainDecoder, k=3, batch 1, bf16) against plain KV-cached
# greedy decoding on an 8B-shaped random Llama + random EAGLE-3 drafter: the loop's cost per emitted
# token (acceptance ~1.0 with random weights; vLLM's speed-up needs vLLM, which this machine lacks).
timeout 150 $PY benchmarks/bench_evaluate.py --preset llama-8b --device cuda --prompts 4 --prompt-len 256 \
  --max-tokens 64 -k 3 --json "$OUT/evaluate.json" 2>&1 | grep -v "Loading weights" | tee "$OUT/evaluate.log"

# TTT memory (cap 300 s): peak allocated memory and time of one training step (forward, TTT loss,
# backward, AdamW) of an 8B-shaped drafter (H=4096, 32 heads, 8 KV heads, MLP 14336, 32K draft
# vocab), bf16, K = 7, one sample of T tokens per step, each T in its own process; then 32K with
# train.recompute_ttt_steps. The projection in benchmarks/README.md ("TTT memory") says what to expect.
timeout 200 $PY benchmarks/bench_ttt_memory.py --device cuda --preset llama-8b --tokens 2048 8192 16384 \
  --json "$OUT/ttt_memory.json" 2>&1 | grep -v "^\[" | tee "$OUT/ttt_memory.log"
timeout 100 $PY benchmarks/bench_ttt_memory.py --device cuda --preset llama-8b --tokens 32768 --recompute \
  --json "$OUT/ttt_memory_32k_recompute.json" 2>&1 | grep -v "^\[" | tee -a "$OUT/ttt_memory.log"

# DFlash train step (cap 240 s, issue 36): an 8B-shaped DFlash drafter (H=4096, 32 heads, 8 KV heads, MLP 14336,
# 32K draft of 128K vocab, bf16), block 16, 512 anchors, one T-token sample: the block groups under activation
# checkpointing (train/kind_dflash.py): peak memory and step time at 2K-32K, beside bench_ttt_memory's EAGLE-3.
# (vLLM is not on this machine: DFlash's acceptance in vLLM is measured on the CPU, tests/drafter/test_dflash_vllm.py.)
timeout 240 $PY benchmarks/bench_dflash_memory.py --device cuda --tokens 2048 8192 16384 32768 \
  --json "$OUT/dflash_memory.json" 2>&1 | tee "$OUT/dflash_memory.log"

# DSpark train step (cap 150 s, issue 36): the same 8B-shaped backbone plus the Markov head (rank 256 over the
# 128K vocab, 32K draft), block 15 (k = 15, as DFlash's block 16), 512 anchors: what the Markov head and its
# chained logits add to DFlash's step (train/kind_dspark.py). (vLLM 0.32 serves DSpark only on its V2 GPU runner.)
timeout 150 $PY benchmarks/bench_dflash_memory.py --device cuda --kind dspark --block 15 --tokens 2048 8192 16384 \
  --json "$OUT/dspark_memory.json" 2>&1 | tee "$OUT/dspark_memory.log"
