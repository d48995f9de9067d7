#!/usr/bin/env bash
# The tokenizer oracle: llama.cpp's own llama-tokenize on every text of tests/data/tokenizer/texts
# with both real model files, written to tests/data/tokenizer/expected/<model>.tsv, which
# std-adapter/tests/api/tokenizer.rs compares miniquant's tokenizer against. The expected ids come
# from llama.cpp only, never from miniquant.
#
#   scripts/tokenizer-oracle.sh          regenerate the expected files
#   scripts/tokenizer-oracle.sh --check  compare llama-tokenize's live output with the committed
#                                        files; exits 1 and shows the difference if they disagree
#
# Besides the two files as they are, variants made with gguf-py's tools cover the other paths:
# SmolLM2's vocabulary under the other pre-tokenizers miniquant implements (tokenizer.ggml.pre set
# to llama-bpe, gpt-2, default: smollm2-135m-<pre>) and with add_bos_token true
# (smollm2-135m-add-bos), and Gemma 3's with add_space_prefix true, as Llama 2-style
# SentencePiece files have it (gemma3-270m-space-prefix).
#
# Each line of a .tsv file: case name, mode, the ids separated by spaces. Modes:
#   default  BOS as the file says, special tokens in the text parsed (llama-tokenize's defaults)
#   plain    --no-bos --no-parse-special
# Texts are read verbatim (-f, --no-escape): a file's bytes are the text, trailing newline included.
#
# Needs llama.cpp's tools (scripts/build-llama.sh builds them, minutes; not part of CI) and the
# model files (scripts/fetch-models.sh).
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
#   LLAMA_BIN        directory of llama-tokenize (default: what scripts/build-llama.sh prints)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
bin="${LLAMA_BIN:-$("$root/scripts/build-llama.sh")}"
tokenize="$bin/llama-tokenize"
[ -x "$tokenize" ] || { echo "no llama-tokenize in $bin" >&2; exit 1; }
texts="$root/tests/data/tokenizer/texts"
expected="$root/tests/data/tokenizer/expected"
smollm="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
gemma="$cache/gemma-3-270m-q4_k_m.gguf"
# name:file:change, the change `pre=NAME` (tokenizer.ggml.pre) or `KEY=1` (a bool key set true);
# none: the file as it is.
models=(
  "smollm2-135m:$smollm:"
  "gemma3-270m:$gemma:"
  "smollm2-135m-llama-bpe:$smollm:pre=llama-bpe"
  "smollm2-135m-gpt-2:$smollm:pre=gpt-2"
  "smollm2-135m-default:$smollm:pre=default"
  "smollm2-135m-add-bos:$smollm:tokenizer.ggml.add_bos_token=1"
  "gemma3-270m-space-prefix:$gemma:tokenizer.ggml.add_space_prefix=1"
)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gguf_py_bin="$(dirname "$(python3 "$root/scripts/gguf_py_dequant.py" --setup)")"

# llama-tokenize --ids prints `[1, 2, 3]`; an error or anything else fails the run.
ids_of() { # model text-file flags... -> ids separated by spaces
  local out
  out="$("$tokenize" -m "$1" -f "$2" --ids --log-disable --no-escape "${@:3}" 2>"$work/stderr")" || {
    echo "llama-tokenize failed on $2:" >&2
    cat "$work/stderr" >&2
    exit 1
  }
  case "$out" in
    \[*\]) ;;
    *) echo "unexpected llama-tokenize output for $2: $out" >&2; exit 1 ;;
  esac
  out="${out#[}"
  out="${out%]}"
  echo "${out//, / }"
}

status=0
for entry in "${models[@]}"; do
  name="${entry%%:*}"
  rest="${entry#*:}"
  model="${rest%:*}"
  change="${rest##*:}"
  [ -f "$model" ] || { echo "missing $model (run scripts/fetch-models.sh)" >&2; exit 1; }
  case "$change" in
    "") ;;
    pre=*)
      "$gguf_py_bin/gguf-new-metadata" --pre-tokenizer "${change#pre=}" --force "$model" \
        "$work/$name.gguf" >/dev/null 2>&1 || { echo "gguf-new-metadata failed for $name" >&2; exit 1; }
      model="$work/$name.gguf"
      ;;
    *=*)
      cp "$model" "$work/$name.gguf"
      "$gguf_py_bin/gguf-set-metadata" --force "$work/$name.gguf" "${change%%=*}" "${change#*=}" \
        >/dev/null 2>&1 || { echo "gguf-set-metadata failed for $name" >&2; exit 1; }
      model="$work/$name.gguf"
      ;;
  esac
  table="$work/$name.tsv"
  : >"$table"
  for text in "$texts"/*.txt; do
    case_name="$(basename "$text" .txt)"
    printf '%s\tdefault\t%s\n' "$case_name" "$(ids_of "$model" "$text")" >>"$table"
    printf '%s\tplain\t%s\n' "$case_name" "$(ids_of "$model" "$text" --no-bos --no-parse-special)" >>"$table"
  done
  if [ "$check" = 1 ]; then
    if diff -u "$expected/$name.tsv" "$table"; then
      echo "$name: $(wc -l <"$table") lines agree with llama-tokenize"
    else
      status=1
    fi
  else
    mkdir -p "$expected"
    # Complete files only: written aside, then moved into place.
    mv "$table" "$expected/$name.tsv.new"
    mv "$expected/$name.tsv.new" "$expected/$name.tsv"
    echo "wrote $expected/$name.tsv ($(wc -l <"$expected/$name.tsv") lines)"
  fi
  rm -f "$work/$name.gguf"
done
exit "$status"
