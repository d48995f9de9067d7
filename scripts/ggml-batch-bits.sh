#!/usr/bin/env bash
# Builds scripts/ggml-batch-bits.c against the ggml that scripts/build-llama.sh made and runs it:
# whether ggml's CPU matmul gives a column the same bits in a batch of n (its tinyBLAS and tiled
# K-quant paths) as alone (vec_dot). Usage: scripts/ggml-batch-bits.sh [n] (default 32).
# Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$("$here/build-llama.sh")"
src="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}/llama-src-0.3.36"
out="$bin/ggml-batch-bits"
cc -O2 -std=c11 -Wall -Wextra -o "$out" "$here/ggml-batch-bits.c" \
  -I"$src/ggml/include" -L"$bin" -lggml -lggml-cpu -lggml-base -lm -Wl,-rpath,"$bin"
"$out" "$@"
