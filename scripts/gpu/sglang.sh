#!/usr/bin/env bash
# SGLang 0.5.17 serving SmolLM2-135M-Instruct on the H200 image (no package registry there), from the
# kit that scripts/gpu/sglang-kit.py builds into the ignored folder .sglang-h200/ (part-NN, SHA256SUMS).
# The machine forgets everything 30 s after a call: run the calls back to back. Everything it builds
# lives under /tmp/sgk there. Verbs run in order, stopping at the first that fails:
#   bash scripts/gpu/sglang.sh stage            keep the parts carried in this call (/tmp/sgk/parts), check sums
#   bash scripts/gpu/sglang.sh install          (all parts staged) unpack, pip install --target /tmp/sgk/site, import check
#   bash scripts/gpu/sglang.sh importcheck      versions, the serve path's modules, the serve flags (sgk-import.json)
#   bash scripts/gpu/sglang.sh convert          GGUF -> /tmp/sgk/smollm2-hf (HF folder), sha256 of every file
#   bash scripts/gpu/sglang.sh serve            start one server under setsid (outlives the call), wait for it
#   bash scripts/gpu/sglang.sh probe            /health /server_info /model_info /v1/models /v1/tokenize /metrics + chats
#   bash scripts/gpu/sglang.sh stop             stop the server of SGK_PORT
#   bash scripts/gpu/sglang.sh up               install (if not yet), convert (if not yet), the candidate (30000,
#                                               NGRAM), then the control (30001, none), probe both
#   bash scripts/gpu/sglang.sh attach|launch    qualify the running servers | stop them and let qualify launch
# e.g. the last part's call: `bash scripts/gpu/sglang.sh stage install convert`.
# Env: SGK_PORT (30000), SGK_SPEC (ngram | none; default ngram), SGK_WAIT (420 s from a server's start),
#      SGK_EXTRA (more launch_server flags: "--attention-backend triton", "--disable-cuda-graph", ...).
# Evidence: /tmp/sgk/ev/*; each call leaves in $OUT sgk-<verbs>.tgz (all of it) and the short text files.
set -uo pipefail
[ $# -gt 0 ] || { sed -n 2,19p "$0"; exit 2; }
cd "$(dirname "$0")/../.."
ROOT=$PWD
KIT=$ROOT/.sglang-h200
ST=/tmp/sgk
B=$ST/bundle
SITE=$ST/site
MODEL=$ST/smollm2-hf
TEMPLATE=$B/templates/Qwen-Qwen3-0.6B.jinja
EV=$ST/ev
OUT=${OUT:-$ST/out}
PY=${PY:-python3}
PORT=${SGK_PORT:-30000}
QSITE=/tmp/qsite
Q=/tmp/sgq
CANDS=docs/gpu/sglang/candidates
mkdir -p "$ST/parts" "$EV" "$OUT"

venv() {
  export PYTHONPATH="$SITE"
  local pybin; pybin=$($PY -c 'import os,sys; print(os.path.dirname(sys.executable))')
  # ninja and the console scripts of the image's venv, then the kit's; nvcc for the JIT kernels
  export PATH="$pybin:$SITE/bin:$PATH"
  command -v nvcc >/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"; }
  if [ -z "${CUDA_HOME:-}" ] && command -v nvcc >/dev/null; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")"); export CUDA_HOME
  fi
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
}

stage() {
  local n=0
  for p in "$KIT"/part-*; do [ -f "$p" ] && cp -f "$p" "$ST/parts/" && n=$((n + 1)); done
  cp -f "$KIT/SHA256SUMS" "$ST/SHA256SUMS" 2>/dev/null
  [ -f "$ST/SHA256SUMS" ] || { echo "no SHA256SUMS (carry .sglang-h200/SHA256SUMS)"; return 3; }
  {
    echo "carried in this call: $n part(s)"
    (cd "$ST/parts" && sha256sum -c --ignore-missing "$ST/SHA256SUMS") 2>&1
    local want; want=$(awk '{print $2}' "$ST/SHA256SUMS")
    local miss=""; for p in $want; do [ -f "$ST/parts/$p" ] || miss="$miss $p"; done
    echo "staged $(ls "$ST/parts" | wc -l) of $(echo "$want" | wc -w); missing:${miss:- none}"
    df -h /tmp | tail -1
  } | tee "$EV/sgk-stage.txt"
  ! grep -q FAILED "$EV/sgk-stage.txt"
}

install() {
  stage >/dev/null || return 3
  (cd "$ST/parts" && sha256sum -c --quiet "$ST/SHA256SUMS") || { echo "parts missing or bad"; return 3; }
  local t0; t0=$(date +%s)
  rm -rf "$B" "$SITE" "$ST/installed"
  # python's lzma + tarfile: no reliance on an xz binary in the image
  cat $(awk '{print "'"$ST"'/parts/" $2}' "$ST/SHA256SUMS") | $PY -c 'import lzma,sys,tarfile; tarfile.open(fileobj=lzma.open(sys.stdin.buffer), mode="r|").extractall(sys.argv[1], filter="data")' "$ST" || return 4
  (cd "$B" && sha256sum -c --quiet MANIFEST.sha256) || { echo "bundle manifest mismatch"; return 5; }
  echo "unpacked in $(( $(date +%s) - t0 )) s" | tee "$EV/sgk-install.log"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$B"/whl/*.whl \
    2>&1 | tail -20 | tee -a "$EV/sgk-install.log"
  [ -d "$SITE/sglang" ] || { echo "sglang not installed"; return 6; }
  echo "install seconds: $(( $(date +%s) - t0 ))" | tee -a "$EV/sgk-install.log"
  { rm -rf "$B/whl"; } # the wheels are installed: 1.6 GB less under /tmp
  touch "$ST/installed"
  importcheck
}

importcheck() {
  venv
  {
    echo "python: $(command -v $PY) $($PY -V 2>&1)"
    echo "nvcc: $(command -v nvcc) $(nvcc --version 2>/dev/null | tail -2 | head -1)"
    echo "c++: $(command -v c++ g++ | head -1) $(c++ --version 2>/dev/null | head -1)"
    echo "ninja: $(command -v ninja) $(ninja --version 2>/dev/null)"
    echo "CUDA_HOME=${CUDA_HOME:-}"
  } >"$EV/sgk-tools.txt" 2>&1
  cat "$EV/sgk-tools.txt"
  $PY scripts/gpu/sglang_importcheck.py --model "$MODEL" --template "$TEMPLATE" >"$EV/sgk-import.json" 2>"$EV/sgk-import.err"
  local rc=$?
  $PY - "$EV/sgk-import.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("versions:", json.dumps(r.get("versions")))
for k, v in r.items():
    if isinstance(v, str) and v.startswith("FAIL"):
        print(k, v[:400])
print("failed:", r.get("failed"))
PYEOF
  return $rc
}

convert() {
  venv
  rm -rf "$MODEL"
  $PY "$B/tools/gguf2hf.py" "$B/model/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL" | tee "$EV/sgk-model.txt" || return 7
  (cd "$MODEL" && sha256sum -- *) | tee -a "$EV/sgk-model.txt"
}

cmdline() {  # port spec -> the launch_server argv (one word a line)
  local port=$1 spec=$2
  printf '%s\n' "$PY" -m sglang.launch_server --model-path "$MODEL" \
    --served-model-name SmolLM2-135M-Instruct --host 127.0.0.1 --port "$port" \
    --dtype bfloat16 --context-length 8192 --max-running-requests 8 --mem-fraction-static 0.25 \
    --chat-template "$TEMPLATE" --tool-call-parser qwen --reasoning-parser qwen3 \
    --enable-metrics --sampling-backend pytorch
  [ "$spec" = none ] || printf '%s\n' --speculative-algorithm NGRAM --speculative-num-draft-tokens 6
  # shellcheck disable=SC2086
  [ -n "${SGK_EXTRA:-}" ] && printf '%s\n' ${SGK_EXTRA}
  return 0
}

start() {  # port spec: start under setsid (a new session outlives the call); returns at once
  local port=$1 spec=$2 pid=$ST/server-$1.pid log=$ST/server-$1.log
  venv
  if [ -f "$pid" ] && kill -0 "$(cat "$pid")" 2>/dev/null; then echo "port $port: already up"; return 0; fi
  mapfile -t cmd < <(cmdline "$port" "$spec")
  { printf 'PYTHONPATH=%q ' "$PYTHONPATH"; printf '%q ' "${cmd[@]}"; echo; } >>"$EV/sgk-serve.txt"
  rm -f "$pid"
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pid" "${cmd[@]}" >"$log" 2>&1 </dev/null &
  for _ in $(seq 1 50); do [ -s "$pid" ] && break; sleep 0.1; done
  date +%s >"$ST/server-$port.t0"
}

wait_up() {  # port: /v1/models and /health answer 200, or the server died, or SGK_WAIT s since its start
  local port=$1 pid log=$ST/server-$1.log ok=0 t0 n=0
  pid=$(cat "$ST/server-$port.pid" 2>/dev/null); t0=$(cat "$ST/server-$port.t0" 2>/dev/null || date +%s)
  while [ $(( $(date +%s) - t0 )) -lt "${SGK_WAIT:-420}" ]; do
    if $PY -c "import urllib.request as u; [u.urlopen('http://127.0.0.1:$port'+p, timeout=3) for p in ('/v1/models','/health')]" 2>/dev/null; then ok=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    n=$((n + 1)); [ $((n % 30)) = 0 ] && echo "port $port: waiting $(( $(date +%s) - t0 )) s: $(tail -1 "$log" | cut -c1-200)"
    sleep 1
  done
  echo "port $port: healthy=$ok seconds=$(( $(date +%s) - t0 )) pid=$pid alive=$(kill -0 "$pid" 2>/dev/null && echo yes || echo no)" | tee -a "$EV/sgk-serve.txt"
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader >>"$EV/sgk-serve.txt" 2>&1
  cp "$log" "$EV/sgk-server-$port.log"
  [ $ok = 1 ] || { grep -E "Error|error|Traceback|Exception" "$log" | tail -15; tail -25 "$log"; }
  [ $ok = 1 ]
}

serve() { start "$PORT" "${SGK_SPEC:-ngram}" && wait_up "$PORT"; }

probe() {  # port
  local port=${1:-$PORT}
  $PY scripts/gpu/sglang_probe.py "$port" 2>&1 | tee "$EV/sgk-probe-$port.txt"
  cp "$ST/server-$port.log" "$EV/sgk-server-$port.log" 2>/dev/null || true
}

stop() {  # port
  local port=${1:-$PORT} pidf=$ST/server-${1:-$PORT}.pid pid
  [ -f "$pidf" ] || { echo "port $port: no server of ours"; return 0; }
  pid=$(cat "$pidf")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$pidf"
  echo "port $port: stopped"
}

up() {
  [ -f "$ST/installed" ] || install || return $?
  [ -f "$MODEL/config.json" ] || convert >/dev/null || return 7
  # one after the other: started together, the second one's memory profile saw the first one
  # loading and refused (`Raise --mem-fraction-static above 0.261`, seen on the H100)
  local a=0 b=0
  start 30000 ngram || return 8
  wait_up 30000 || a=1
  start 30001 none || return 8
  wait_up 30001 || b=1
  [ $a = 0 ] && probe 30000 >/dev/null
  [ $b = 0 ] && probe 30001 >/dev/null
  grep -h "^== \|spec_\|gen_throughput" "$EV"/sgk-probe-*.txt 2>/dev/null | cut -c1-220
  [ $a = 0 ] && [ $b = 0 ]
}

qualify_deps() {  # qualify's own wheels the image lacks (.whl/, as scripts/gpu/vllm.sh uses them)
  [ -d "$QSITE/qualify_deps_ok" ] && return 0
  ls .whl/*.whl >/dev/null 2>&1 || { echo "no .whl/ carried (qualify's wheels)"; return 0; }
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$QSITE" .whl/*.whl 2>&1 | tail -3
  mkdir -p "$QSITE/qualify_deps_ok"
}

run_mode() {  # mode candidate
  local mode=$1 cand=$2 log=$Q/$1.txt t0 code
  mkdir -p "$Q"
  qualify_deps
  venv  # PATH (ninja, nvcc), CUDA_HOME, offline switches: the servers qualify launches inherit them
  export PYTHONPATH=
  export GIT_AUTHOR_NAME=qualify GIT_AUTHOR_EMAIL=qualify@localhost
  export GIT_COMMITTER_NAME=qualify GIT_COMMITTER_EMAIL=qualify@localhost
  qpy() { PYTHONPATH="$ROOT:$QSITE" PYTHONUNBUFFERED=1 $PY "$@"; }
  [ -f "$Q/keys/gpu.key" ] || { mkdir -p "$Q/keys"; qpy -m qualify keygen --out "$Q/keys/gpu" >>"$log" 2>&1; }
  if [ ! -d "$Q/house" ]; then
    qpy -m qualify house init "$Q/house" --policy examples/house/house-policy.toml >>"$log" 2>&1
    qpy -m qualify house pin decision "$Q/keys/gpu.pub" --name gpu \
      --why "the GPU session signs its runs" --house "$Q/house" >>"$log" 2>&1
  fi
  echo "mode=$mode candidate=$cand gpu before: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>&1 | head -1)" >>"$log"
  t0=$(date +%s)
  qpy -m qualify run "$cand" --evidence "$Q/evidence-$mode" --key "$Q/keys/gpu.key" \
    --house "$Q/house" >"$Q/$mode.stdout" 2>"$Q/$mode.stderr"
  code=$?
  echo "exit=$code seconds=$(( $(date +%s) - t0 ))" >>"$log"
  cp "$Q/$mode.stdout" "$Q/$mode.stderr" "$Q/keys/gpu.pub" "$Q/evidence-$mode/" 2>/dev/null
  tar czf "$OUT/qualify-$mode.tgz" -C "$Q" "evidence-$mode" "$mode.txt" 2>/dev/null
  cp "$log" "$OUT/"
  tail -5 "$Q/$mode.stdout"; tail -3 "$Q/$mode.stderr"; cat "$log"
  return $code
}

finish() {  # what comes back: one tgz of the evidence and the short text files (8 files at most)
  local tag=$1
  tar czf "$OUT/sgk-$tag.tgz" -C "$ST" ev 2>/dev/null
  for f in sgk-stage.txt sgk-import.json sgk-serve.txt sgk-probe-30000.txt sgk-probe-30001.txt; do
    [ -f "$EV/$f" ] && [ "$(ls "$OUT" | wc -l)" -lt 7 ] && cp "$EV/$f" "$OUT/"
  done
  return 0
}

tag=$(echo "$*" | tr ' ' '-')
rc=0
for verb in "$@"; do
  case "$verb" in
    stage) stage ;;
    install) install ;;
    importcheck) importcheck ;;
    convert) convert ;;
    serve) serve ;;
    probe) probe "$PORT" ;;
    stop) stop "$PORT" ;;
    up) up ;;
    attach) run_mode attach "$CANDS/candidate-attach.toml" ;;
    launch) stop 30000; stop 30001; sleep 3; run_mode launch "$CANDS/candidate.toml" ;;
    *) sed -n 2,19p "$0"; (exit 2) ;;
  esac
  rc=$?
  [ $rc = 0 ] || { echo "sglang.sh: '$verb' failed (rc=$rc)"; break; }
done
finish "$tag"
exit $rc
