#!/usr/bin/env bash
# Reproduce the README's real-data tables with the CPU embedded default (SmolLM2-135M-Instruct).
# Needs ../shared/data (or $TASKCAL_SHARED_DATA). Writes everything under runs/ (git-ignored).
# Every `taskcal sample` is resumable: rerun this script after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/taskcal
mkdir -p runs
if [ -z "${URL:-}" ]; then
  $T serve --port 8000 --url-file runs/server_url --log-file runs/server.log &
  trap 'kill %1' EXIT
  while [ ! -s runs/server_url ]; do sleep 5; done
  URL=$(cat runs/server_url)
fi
M=${MODEL:-smollm2-135m-instruct}
PROMPT="You are an assistant with tools. If a tool fits the request and every required argument is given, call the tool. If a tool fits but a required argument is missing, ask the user a short question for it. If no tool can do what the user wants, say that you cannot help with that."

# When2Call, all 300 items, cost [[0,1,2],[4,0,2],[4,1,0]]; the system prompt above.
$T data convert when2call --out runs/when2call.jsonl --task-out runs/when2call.task.yaml
python3 - "$PROMPT" <<'PY'
import sys, yaml
p = "runs/when2call.task.yaml"
d = yaml.safe_load(open(p)); d["prompt"] = sys.argv[1]; yaml.safe_dump(d, open(p, "w"), sort_keys=False)
PY
$T sample --task runs/when2call.task.yaml --data runs/when2call.jsonl --base-url "$URL" --model "$M" \
  --n 16 --max-tokens 64 --temperature 0.7 --concurrency 4 --out runs/when2call.n16.samples.jsonl || true
$T evaluate --samples runs/when2call.n16.samples.jsonl --folds 5 --out runs/when2call.n16.eval.json
$T report --evaluation runs/when2call.n16.eval.json --out-dir runs/when2call-report
$T sample --task runs/when2call.task.yaml --data runs/when2call.jsonl --base-url "$URL" --model "$M" \
  --belief logprob --choices call,ask,refuse --no-greedy --concurrency 2 \
  --out runs/when2call.logprob.samples.jsonl || true
$T evaluate --samples runs/when2call.logprob.samples.jsonl --folds 5 --out runs/when2call.logprob.eval.json

# STS-B (1,000 items, 0-5 rating, L1 cost) and MMLU val (300 random items, 0-1 cost): one-pass logprob.
$T data convert stsb --out runs/stsb.jsonl --task-out runs/stsb.task.yaml
$T sample --task runs/stsb.task.yaml --data runs/stsb.jsonl --base-url "$URL" --model "$M" \
  --belief logprob --choices 0,1,2,3,4,5 --no-greedy --concurrency 2 --out runs/stsb.logprob.samples.jsonl
$T evaluate --samples runs/stsb.logprob.samples.jsonl --folds 5 --out runs/stsb.logprob.eval.json
$T data convert mmlu --split val --limit 300 --seed 0 --out runs/mmlu.jsonl --task-out runs/mmlu.task.yaml
$T sample --task runs/mmlu.task.yaml --data runs/mmlu.jsonl --base-url "$URL" --model "$M" \
  --belief logprob --choices A,B,C,D --no-greedy --concurrency 2 --out runs/mmlu.logprob.samples.jsonl
$T evaluate --samples runs/mmlu.logprob.samples.jsonl --folds 5 --out runs/mmlu.logprob.eval.json

# NQ-open answer-or-abstain (wrong answer 4, abstaining 1; label = graded greedy answer), N = 8.
$T data convert nq-open --limit 300 --seed 0 --out runs/nq.jsonl --task-out runs/nq.task.yaml
$T sample --task runs/nq.task.yaml --data runs/nq.jsonl --base-url "$URL" --model "$M" \
  --n 8 --max-tokens 24 --temperature 0.7 --concurrency 2 --out runs/nq.n8.samples.jsonl ${NQ_LIMIT:+--limit $NQ_LIMIT}
$T evaluate --samples runs/nq.n8.samples.jsonl --folds 5 --out runs/nq.n8.eval.json
