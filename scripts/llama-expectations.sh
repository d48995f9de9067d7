#!/usr/bin/env bash
# Writes the llama.cpp expectations of std-adapter/tests/model_vs_llama_cpp.rs: for each candidate
# prompt, llama.cpp's greedy continuation under four of its own settings (prompt in one batch with
# an f32 KV cache; token by token; f16 KV cache; flash attention). A prompt is kept only if all
# four agree on every generated token: most natural prompts have near-ties that llama.cpp itself
# resolves differently from one setting to the next, and those say nothing about us. Four settings
# are only four samples of rounding noise, so a prompt is also dropped if, at any of the first
# $checked steps, llama.cpp's two best logits are within $min_margin of each other: reordering a
# single sum of our attention moved the top-2 gap by 0.16 on a test prompt, so a closer tie is a
# coin flip for any implementation that rounds differently.
# Every prompt goes to prompts.txt (name, kept or why dropped, ids, the f32-KV batch run's
# continuation); the logits after the prompt (little-endian f32, n_vocab values) go to NAME.f32
# for the kept prompts and those listed in $with_logits (the logit bound holds near ties too).
# For Gemma 3 (a 262144-token vocabulary: 1 MiB of logits per prompt) they go to NAME.txt as a
# sample instead: the 64 largest and every 256th, "id value" per line (llama-logits -sample).
#   scripts/llama-expectations.sh [MODEL]   SmolLM2-135M (default) or gemma-3-270m
# Not part of CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
model="${1:-$cache/SmolLM2-135M-Instruct.Q4_1.gguf}"
case "$(basename "$model")" in
  gemma-3*)
    out="$here/../std-adapter/tests/data/llama-cpp-gemma3"
    chat='<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n'
    sample=1
    ;;
  *)
    out="$here/../std-adapter/tests/data/llama-cpp"
    chat='<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n'
    sample=0
    ;;
esac
gen=40
checked=32
min_margin=0.25
with_logits=" capital fibonacci prime chat recipe "
driver="$("$here/llama-logits.sh")"
bin="$(dirname "$driver")"
mkdir -p "$out"
list="$out/prompts.txt"
{
  echo "# llama.cpp (llama-cpp-python 0.3.36 sdist) on $(basename "$model"), written by"
  echo "# scripts/llama-expectations.sh: name | status | prompt ids | greedy continuation ($gen"
  echo "# tokens). Kept only where four llama.cpp settings agree on the whole continuation and the"
  echo "# top-2 margin of the first $checked steps is at least $min_margin logits."
} >"$list"
kept=0
while IFS='|' read -r name text; do
  [ -z "$name" ] && continue
  [ "$name" = chat ] && text="$chat"
  # (The command substitution drops trailing newlines: the chat prompt ends without its last
  # "\n", which tests/cli/run.rs takes into account.)
  text="$(printf '%b' "$text")"
  ids="$("$bin/llama-tokenize" -m "$model" -p "$text" --ids --log-disable 2>/dev/null | tail -1 | tr -d '[],')"
  if [ "$sample" = 1 ]; then
    a="$("$driver" "$model" -ids "$ids" -n $gen -sample "$out/$name.txt" -margins 2>"$out/margins.tmp")"
    logits="$out/$name.txt"
  else
    a="$("$driver" "$model" -ids "$ids" -n $gen -o "$out/$name.f32" -margins 2>"$out/margins.tmp")"
    logits="$out/$name.f32"
    # The driver wrote every step's logits: keep the first (after the prompt).
    truncate -s $(($(stat -c %s "$logits") / (gen + 1))) "$logits"
  fi
  low="$(tr ' ' '\n' <"$out/margins.tmp" | head -n $checked | awk -v m=$min_margin '$1 < m' | wc -l)"
  rm -f "$out/margins.tmp"
  b="" c="" d=""
  if [ "$low" = 0 ]; then
    b="$("$driver" "$model" -ids "$ids" -n $gen -one)"
    c="$("$driver" "$model" -ids "$ids" -n $gen -kv f16)"
    d="$("$driver" "$model" -ids "$ids" -n $gen -fa on)"
  fi
  if [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "$a" = "$d" ] && [ "$low" = 0 ]; then
    echo "$name | kept | $ids | $a" >>"$list"
    kept=$((kept + 1))
    echo "kept     $name" >&2
  else
    case "$with_logits" in *" $name "*) ;; *) rm -f "$logits" ;; esac
    if [ "$low" = 0 ]; then why="settings disagree"; else why="$low near-ties"; fi
    echo "$name | dropped: $why | $ids | $a" >>"$list"
    echo "dropped  $name ($why)" >&2
  fi
done <<'PROMPTS'
capital|The capital of France is
fibonacci|def fibonacci(n):
counting|1, 2, 3, 4, 5,
story|Once upon a time, there was a little
fox|The quick brown fox jumps over the lazy dog. The quick brown fox
numpy|import numpy as np\nimport
weekdays|Monday, Tuesday, Wednesday,
planets|The following is a list of the planets in the solar system:
prime|In mathematics, a prime number is
chat|(the model's chat template, set above)
water|Water boils at a temperature of
alphabet|A B C D E F G
html|<!DOCTYPE html>\n<html>\n<head>
recipe|To make a cup of tea, first
months|January, February, March,
even|2, 4, 6, 8, 10,
python|for i in range(10):\n   
letters|a, b, c, d, e,
hello|#include <stdio.h>\n\nint main() {\n   
squares|1, 4, 9, 16, 25,
sun|The Sun is a star at the center of the
photosynthesis|Photosynthesis is the process by which
json|{"name": "John", "age": 30, "city":
sql|SELECT * FROM users WHERE
haiku|Write a haiku about autumn.\n
translate|English: Hello, how are you?\nFrench:
PROMPTS
echo "$kept prompts kept" >&2
