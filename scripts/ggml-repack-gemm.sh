#!/usr/bin/env bash
# Builds scripts/ggml-repack-gemm.c against the ggml that scripts/build-llama.sh made (never
# rebuilding llama.cpp) and runs it: ggml's repacked CPU matmul (weights in the CPU_REPACK buffer
# type) beside its default-buffer matmul, speed and bits. Usage:
#   scripts/ggml-repack-gemm.sh perf THREADS ROUNDS TYPE:ROWSxCOLS:N...
#   scripts/ggml-repack-gemm.sh bits ROWS COLS N TYPE...
#   scripts/ggml-repack-gemm.sh --build      (only build; prints the binary's path)
# With GGML_EXTRA_BUFFER=AMX (a CPU with AMX only) it is built against ggml's AMX build
# (LLAMA_AMX=1 scripts/build-llama.sh) and compares the AMX buffer type with the default one; with
# GGML_AMX_UNFUSED=1 as well, against the build whose fused multiply-adds are a product and a sum
# (LLAMA_AMX=unfused scripts/build-llama.sh).
# The matmul bench (tests/benches/matmul.rs) runs it for its "ggml repack" and "ggml amx" columns.
# Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${GGML_EXTRA_BUFFER:-}" = "AMX" ]; then
  if [ -n "${GGML_AMX_UNFUSED:-}" ]; then
    bin="$(LLAMA_AMX=unfused "$here/build-llama.sh")"
  else
    bin="$(LLAMA_AMX=1 "$here/build-llama.sh")"
  fi
else
  bin="$("$here/build-llama.sh")"
fi
src="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}/llama-src-0.3.36"
out="$bin/ggml-repack-gemm"
if [ ! -x "$out" ] || [ "$here/ggml-repack-gemm.c" -nt "$out" ]; then
  cc -O2 -std=c11 -D_POSIX_C_SOURCE=199309L -Wall -Wextra -o "$out" "$here/ggml-repack-gemm.c" \
    -I"$src/ggml/include" -L"$bin" -lggml -lggml-cpu -lggml-base -lm -Wl,-rpath,"$bin"
fi
if [ "${1:-}" = "--build" ]; then
  echo "$out"
  exit 0
fi
"$out" "$@"
