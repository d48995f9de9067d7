#!/usr/bin/env bash
# Builds scripts/llama-logits.c against the libllama that scripts/build-llama.sh made, and prints
# the binary's path. Not part of CI: its outputs are committed as test expectations
# (std-adapter/tests/data/llama-cpp/).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="$("$here/build-llama.sh")"
src="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}/llama-src-0.3.36"
out="$bin/llama-logits"
cc -O2 -std=c11 -Wall -Wextra -o "$out" "$here/llama-logits.c" \
  -I"$src/include" -I"$src/ggml/include" -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin"
echo "$out"
