#!/usr/bin/env bash
# Rough prompt and generation speed of `miniquant run` against llama.cpp's (scripts/llama-logits.c)
# on the same file, ids and thread count, in one script: each side's time for a 1-token prompt
# (load + one step) is subtracted from its time for a P-token prompt (prefill) and for a 1-token
# prompt with N generated tokens (generation). Prints tokens/s and ratios (ours / llama.cpp).
# A stand-in until `miniquant bench` sits beside llama-bench; not part of CI.
#   bench-run-vs-llama.sh [MODEL] [THREADS] [P] [N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
model="${1:-$cache/SmolLM2-135M-Instruct.Q4_1.gguf}"
threads="${2:-1}" p="${3:-128}" n="${4:-64}"
driver="$("$here/llama-logits.sh")"
(cd "$here/.." && cargo build --release -q -p miniquant-std)
ours="$here/../target/release/miniquant"
ids="$(seq 100 $((100 + p - 1)) | tr '\n' ' ')"
best() { # best of 3 wall-clock seconds of "$@"
  local b=""
  for _ in 1 2 3; do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N)
    b=$(echo "$s $e ${b:-1e9}" | awk '{t = $2 - $1; print (t < $3 ? t : $3)}')
  done
  echo "$b"
}
o_base=$(best "$ours" run "$model" --prompt-ids 100 -n 1 --threads "$threads" --batch "$p")
o_pp=$(best "$ours" run "$model" --prompt-ids "$ids" -n 1 --threads "$threads" --batch "$p")
o_tg=$(best "$ours" run "$model" --prompt-ids 100 -n $((n + 1)) --threads "$threads")
l_base=$(best "$driver" "$model" -ids 100 -n 0 -t "$threads")
l_pp=$(best "$driver" "$model" -ids "$ids" -n 0 -t "$threads")
l_tg=$(best "$driver" "$model" -ids 100 -n "$n" -t "$threads")
awk -v p="$p" -v n="$n" -v t="$threads" -v ob="$o_base" -v op="$o_pp" -v og="$o_tg" \
  -v lb="$l_base" -v lp="$l_pp" -v lg="$l_tg" 'BEGIN {
  opp = (p - 1) / (op - ob); lpp = (p - 1) / (lp - lb)
  otg = n / (og - ob); ltg = n / (lg - lb)
  printf "threads %d  prompt %d: ours %.1f t/s, llama.cpp %.1f t/s, ratio %.2f\n", t, p, opp, lpp, opp / lpp
  printf "threads %d  generate %d: ours %.1f t/s, llama.cpp %.1f t/s, ratio %.2f\n", t, n, otg, ltg, otg / ltg
}'
