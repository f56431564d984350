#!/usr/bin/env bash
# Qualify a real vLLM 0.26.0 (SmolLM2-135M on one H200) in attach mode and in launch mode.
# Needs, beside the checkout: .vllm-h200/ (the vLLM kit: vh.sh, SHA256SUMS, part-01..08) and
# .whl/ (wheels of qualify's dependencies the GPU image lacks). Everything lands under /tmp.
#   scripts/gpu/vllm.sh stage     copy the parts carried in this call (one a call: 01 .. 07)
#   scripts/gpu/vllm.sh up        (with the last part and .whl) install vLLM + qualify's wheels, convert
#                                 the model, start the candidate server (8000, ngram, dev mode)
#                                 and the control (8001), record their answers
#   scripts/gpu/vllm.sh attach    qualify the running servers (docs/gpu/vllm/candidates/*-attach)
#   scripts/gpu/vllm.sh repeats   the A/B alone on them, prompts repeated across runs (nonce off)
#   scripts/gpu/vllm.sh launch    stop them; qualify launching and stopping both itself
#   scripts/gpu/vllm.sh attach-bg start `attach` under setsid (it outlives the call), then wait
#   scripts/gpu/vllm.sh wait      wait (WAIT_S, default 560 s) for it; bring back what it left
#                                 (a run longer than one call's 10 minutes: attach-bg, then wait)
# Results go to $OUT (8 files at most): recorded-*.json, <mode>.tgz (evidence, logs), <mode>.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
VH=.vllm-h200/vh.sh
Q=/tmp/vq
OUT=${OUT:-$Q/out}
QSITE=/tmp/qsite
CANDS=docs/gpu/vllm/candidates
mkdir -p "$Q" "$OUT"
export GIT_AUTHOR_NAME=qualify GIT_AUTHOR_EMAIL=qualify@localhost
export GIT_COMMITTER_NAME=qualify GIT_COMMITTER_EMAIL=qualify@localhost
qpy() { PYTHONPATH="$ROOT:$QSITE:/tmp/vh/site" PYTHONUNBUFFERED=1 python3 "$@"; }
vh() { OUT=/tmp/vh/out bash "$VH" "$@"; }  # the kit's own evidence stays under /tmp/vh/out
gpu() { nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader 2>&1 | head -1; }

house() {
  [ -f "$Q/keys/gpu.key" ] || { mkdir -p "$Q/keys"; qpy -m qualify keygen --out "$Q/keys/gpu"; }
  if [ ! -d "$Q/house" ]; then
    qpy -m qualify house init "$Q/house" --policy examples/house/house-policy.toml
    qpy -m qualify house pin decision "$Q/keys/gpu.pub" --name gpu \
      --why "the GPU session signs its runs" --house "$Q/house"
  fi
  cp "$Q/keys/gpu.pub" "$Q/gpu.pub"
}

run_mode() {  # mode candidate
  local mode=$1 cand=$2 log="$Q/$1.txt"
  house >>"$log" 2>&1
  {
    echo "mode=$mode candidate=$cand"
    echo "gpu before: $(gpu)"
    echo "command: python3 -m qualify run $cand --evidence $Q/evidence-$mode --key $Q/keys/gpu.key --house $Q/house"
  } >>"$log"
  local t0; t0=$(date +%s)
  qpy -m qualify run "$cand" --evidence "$Q/evidence-$mode" --key "$Q/keys/gpu.key" \
    --house "$Q/house" >"$Q/$mode.stdout" 2>"$Q/$mode.stderr"
  local code=$?
  {
    echo "exit=$code seconds=$(( $(date +%s) - t0 ))"
    echo "gpu after: $(gpu)"
  } >>"$log"
  cp "$Q/$mode.stdout" "$Q/$mode.stderr" "$Q/gpu.pub" "$Q/evidence-$mode/" 2>/dev/null
  cp "$log" "$OUT/"
  tar czf "$OUT/$mode.tgz" -C "$Q" "evidence-$mode" "$mode.txt"
  tail -5 "$Q/$mode.stdout"; tail -3 "$Q/$mode.stderr"; cat "$log"
}

case "${1:-}" in
stage) vh stage ;;
up)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$QSITE" \
    .whl/*.whl 2>&1 | tail -3
  vh install >/dev/null 2>&1 || { tail -20 /tmp/vh/out/vh-install.log; exit 3; }
  vh convert >/dev/null 2>&1 || exit 4
  VLLM_SERVER_DEV_MODE=1 vh serve || { tail -30 /tmp/vh/server-8000.log; exit 5; }
  VH_PORT=8001 VH_SPEC=none vh serve || { tail -30 /tmp/vh/server-8001.log; exit 6; }
  python3 scripts/gpu/record_vllm.py "$OUT/recorded-vllm-0.26.0-h200.json" 8000 8001
  qpy -c "import qualify, httpx, pydantic, structlog, git; print('qualify imports ok', httpx.__version__, pydantic.__version__)"
  tar czf "$OUT/up.tgz" -C /tmp/vh out server-8000.log server-8001.log
  gpu
  ;;
attach) run_mode attach "$CANDS/candidate-attach.toml" ;;
repeats) run_mode repeats "$CANDS/candidate-repeats.toml" ;;
launch)
  vh stop; VH_PORT=8001 vh stop
  sleep 3
  run_mode launch "$CANDS/candidate.toml"
  ;;
attach-bg)
  rm -f "$Q/attach.rc"; mkdir -p "$Q/bgout"
  OUT=$Q/bgout setsid nohup bash -c 'bash scripts/gpu/vllm.sh attach; echo $? >/tmp/vq/attach.rc' \
    >"$Q/attach-bg.log" 2>&1 </dev/null &
  exec bash "$0" wait
  ;;
wait)
  t0=$(date +%s)
  while [ ! -f "$Q/attach.rc" ] && [ $(( $(date +%s) - t0 )) -lt "${WAIT_S:-560}" ]; do sleep 5; done
  if [ -f "$Q/attach.rc" ]; then
    cp "$Q"/bgout/* "$OUT"/ 2>/dev/null; cat "$Q/attach-bg.log"; exit "$(cat "$Q/attach.rc")"
  fi
  echo "still running after $(( $(date +%s) - t0 )) s:"; tail -5 "$Q/attach.stderr" 2>/dev/null
  exit 124
  ;;
*) sed -n 2,15p "$0"; exit 2 ;;
esac
