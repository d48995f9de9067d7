#!/usr/bin/env bash
# Prompt and generation speed of `miniquant bench` beside llama.cpp's `llama-bench` on the same
# file, test sizes, repetitions and thread counts, in one script: for each thread count, ours then
# theirs, each table printed as it comes, then the ratios (ours / llama.cpp, mean t/s). The load
# average before each run is printed too (a loaded machine slows llama.cpp's spinning threads far
# more than ours: read ratios taken under load with that in mind). Not part of CI.
#   bench-run-vs-llama.sh [MODEL] [P] [N] [REPS] [THREADS...]   (defaults: SmolLM2 Q4_1 512 128 5 1 2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
model="${1:-$cache/SmolLM2-135M-Instruct.Q4_1.gguf}"
p="${2:-512}" n="${3:-128}" reps="${4:-5}"
shift $(($# < 4 ? $# : 4))
threads=(1 2)
[ $# -eq 0 ] || threads=("$@")
llama_bench="$cache/llama-build-0.3.36/bin/llama-bench"
[ -x "$llama_bench" ] || { echo "no $llama_bench: run scripts/build-llama.sh" >&2; exit 1; }
(cd "$here/.." && cargo build --release -q -p miniquant-std)
ours="$here/../target/release/miniquant"
grep -m1 "model name" /proc/cpuinfo || true
echo "model $model, -p $p -n $n -r $reps, threads ${threads[*]}"
rows=""
for t in "${threads[@]}"; do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  table=$("$ours" bench "$model" -p "$p" -n "$n" -r "$reps" -t "$t")
  echo "$table"
  rows+=$(echo "$table" | awk -v who=ours '/±/ {print who "|" $0}')$'\n'
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  table=$("$llama_bench" -m "$model" -p "$p" -n "$n" -r "$reps" -t "$t" 2>/dev/null)
  echo "$table"
  rows+=$(echo "$table" | awk -v who=llama '/±/ {print who "|" $0}')$'\n'
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# Fields of a row after the "who|" prefix: | model | size | params | backend | threads | test | t/s |
printf '%s' "$rows" | awk -F'|' '
  NF > 8 {
    gsub(/ /, "", $7); gsub(/ /, "", $8); split($9, r, "±"); gsub(/ /, "", r[1])
    key = $7 " " $8; if (!(key in seen)) { seen[key] = 1; order[++k] = key }
    mean[$1, key] = r[1]
  }
  END {
    printf "%-8s %-8s %12s %12s %7s\n", "threads", "test", "ours t/s", "llama t/s", "ratio"
    for (i = 1; i <= k; i++) {
      split(order[i], f, " "); o = mean["ours", order[i]]; l = mean["llama", order[i]]
      printf "%-8s %-8s %12.2f %12.2f %6.2fx\n", f[1], f[2], o, l, (l > 0 ? o / l : 0)
    }
  }'
