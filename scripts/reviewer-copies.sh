#!/usr/bin/env bash
# Reviewer's copies of published decisions whose signed document is misleading by the rules of
# docs/decision.md ("Words and attribution"): each is `qualify render` of the same evidence by
# this checkout's code, written beside the signed one, which stays as it was signed.
#   bash scripts/reviewer-copies.sh            (from the repository root; needs `make setup`)
set -euo pipefail
cd "$(dirname "$0")/.."
q="$PWD/.venv/bin/qualify"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unpack() { mkdir -p "$work/$1" && tar xf "$2" -C "$work/$1"; }
render() {  # evidence dir (under $work), run dir inside it, attempt, output path
    mkdir -p "$(dirname "$4")" && rm -f "$4"  # a copy made before: made again
    "$q" render "$work/$1/$2" --attempt "$3" --out "$4"
}
unpack gpu docs/gpu/evidence.tgz
for run in smollm2-135m-gpu-roomy/20261203T075044Z-b0366f smollm2-135m-gpu-tight/20261203T075242Z-97cfa5; do
    kind=${run%%/*}; kind=${kind##*-}
    # attempt 2 (decided again from the recorded evidence) is published beside the run
    cp -r "docs/gpu/$kind/${run#*/}/decision/attempt-002" "$work/gpu/evidence/$run/decision/"
    render gpu "evidence/$run" 2 "docs/gpu/$kind/reviewer-copy.md"
done
unpack vllm docs/gpu/vllm/evidence.tgz
render vllm evidence/smollm2-135m-vllm-h200-ngram-attach/20261203T133631Z-c43c9f 1 \
    docs/gpu/vllm/attach/reviewer-copy.md
unpack once docs/gpu/vllm/judged-once/evidence.tgz
render once smollm2-135m-vllm-h200-ngram-attach/20261204T190027Z-8440c7 1 \
    docs/gpu/vllm/judged-once/reviewer-copy.md
unpack load docs/gpu/load/vllm-evidence.tar.xz
render load vllm-pace/smollm2-135m-gpu-load-vllm/20261204T040520Z-9ea410 1 \
    docs/gpu/load/vllm-pace-run-3-reviewer-copy.md
unpack sglang docs/gpu/sglang/first-run/evidence.tgz
render sglang evidence-attach/smollm2-135m-sglang-h200-ngram-attach/20261205T090701Z-0f7f7a 1 \
    docs/gpu/sglang/first-run/attach-reviewer-copy.md
