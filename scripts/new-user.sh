#!/usr/bin/env bash
# What a llama.cpp / gguf-py user types on first meeting miniquant, mistakes included: each command
# with the exit code it must give and a check of what it prints or writes. Prints one line per
# check, then "N passed, N failed"; exits 1 if any check failed.
#
# Needs: the release binary (built here if $MINIQUANT is unset and it is missing), examples/tiny.gguf,
# and from `cargo xtask fetch` the SmolLM2 file and the gguf-py venv (numpy, gguf-convert-endian) in
# ${MINIQUANT_CACHE:-~/.cache/miniquant}. `script` and `timeout` (util-linux, coreutils) run the
# terminal checks.
set -u
cd "$(dirname "$0")/.."

cache=${MINIQUANT_CACHE:-$HOME/.cache/miniquant}
model=$cache/SmolLM2-135M-Instruct.Q4_1.gguf
py=$cache/gguf-py-venv/bin/python
convert_endian=$cache/gguf-py-venv/bin/gguf-convert-endian
tiny=examples/tiny.gguf
if [ -z "${MINIQUANT:-}" ]; then
    cargo build --release --quiet -p miniquant-std || exit 1
    MINIQUANT=$PWD/target/release/miniquant
fi
mq=$MINIQUANT
for need in "$model" "$py" "$convert_endian" "$tiny"; do
    [ -e "$need" ] || { echo "new-user: missing $need (run cargo xtask fetch)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok    $1"; }
bad() {
    failed=$((failed + 1))
    echo "FAIL  $1: $2"
    [ -n "${3:-}" ] && printf '%s\n' "$3" | head -n 6 | sed 's/^/        /'
}

# check NAME CODE PATTERN COMMAND...: COMMAND exits with CODE ("nonzero": anything but 0) and its
# stdout+stderr matches the extended regex PATTERN ("" for no pattern).
check() {
    local name=$1 want=$2 pattern=$3
    shift 3
    local out code
    out=$("$@" 2>&1)
    code=$?
    if [ "$want" = nonzero ] && [ "$code" -ne 0 ] || [ "$code" = "$want" ]; then
        if [ -z "$pattern" ] || grep -Eq -- "$pattern" <<<"$out"; then
            ok "$name"
        else
            bad "$name" "exit $code as expected, but no match for /$pattern/ in:" "$out"
        fi
    else
        bad "$name" "exit $code, expected $want" "$out"
    fi
}

# holds NAME COMMAND...: COMMAND (a test of files, numbers) succeeds.
holds() {
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name" "does not hold: $*"; fi
}

sum() { sha256sum "$1" | cut -d' ' -f1; }

cp "$model" "$work/model.gguf"
m=$work/model.gguf
model_sum=$(sum "$m")

echo "== first contact"
check "--help says what the tool does" 0 "Inspect, check, dequantize and requantize GGUF" "$mq" --help
check "no command is a usage error" 2 "Usage" "$mq"
check "inspect a model" 0 "output_norm.weight +F32 +\[576\]" "$mq" inspect "$m"
check "inspect one key" 0 "llama" "$mq" inspect --key general.architecture "$m"
check "validate a good model" 0 "^ok: 33 metadata keys, 272 tensors" "$mq" validate "$m"
check "validate --data a good model" 0 "no NaN or infinite value or scale" "$mq" validate --data "$m"
check "gguf-dump JSON" 0 '"GGUF.tensor_count"' "$mq" inspect --json-format gguf-dump "$m"
check "shell completions" 0 "complete -F" "$mq" completions bash
check "man page" 0 '^\.TH miniquant 1' "$mq" man

echo "== flags that do not go together (issue 23, defect 7)"
# --json with --tensor: either the JSON holds only that tensor, or it is a usage error.
out=$("$mq" inspect --json --tensor output_norm.weight "$m" 2>/dev/null)
code=$?
if [ "$code" = 2 ]; then
    ok "inspect --json --tensor: usage error"
elif [ "$code" = 0 ] && "$py" -c 'import json,sys; t=json.load(sys.stdin)["tensors"]; sys.exit(0 if [x["name"] for x in t]==["output_norm.weight"] else 1)' <<<"$out"; then
    ok "inspect --json --tensor: only that tensor"
else
    bad "inspect --json --tensor" "exit $code, not one tensor nor a usage error" "${out:0:300}"
fi
out=$("$mq" inspect --json --key general.architecture "$m" 2>/dev/null)
code=$?
if [ "$code" = 2 ] || { [ "$code" = 0 ] && "$py" -c 'import json,sys; json.load(sys.stdin)' <<<"$out"; }; then
    ok "inspect --json --key: JSON or a usage error"
else
    bad "inspect --json --key" "exit $code, neither JSON nor a usage error" "${out:0:300}"
fi
check "inspect --tensor X --no-tensors is a usage error" 2 "" "$mq" inspect --tensor output_norm.weight --no-tensors "$m"
check "inspect --tensor matching nothing exits 1" 1 "" "$mq" inspect --tensor 'nothing*' "$m"
check "--threads 0 (requantize) is a usage error" 2 "" "$mq" requantize "$m" "$work/t0.gguf" --type q8_0 --threads 0
check "--threads 0 (matvec) is a usage error" 2 "" "$mq" matvec "$m" blk.0.attn_q.weight /dev/null --threads 0
m1=$("$mq" requantize "$m" "$work/t0.gguf" --type q8_0 --threads 0 2>&1 | head -n 1)
m2=$("$mq" matvec "$m" blk.0.attn_q.weight /dev/null --threads 0 2>&1 | head -n 1)
holds "--threads 0 gives one message everywhere" test "$m1" = "$m2"
check "a llama-quantize file type is explained" 2 "Q4_K_M" "$mq" requantize "$m" "$work/km.gguf" --type Q4_K_M

echo "== wrong tensor names"
check "a typo gets 'did you mean'" 1 "did you mean .*output_norm\.weight" "$mq" dequant "$m" output_norm.weigth -o "$work/n.npy"
check "gguf-py's name for a tensor" 1 "no tensor named" "$mq" dequant "$m" model.norm.weight -o "$work/n.npy"
holds "no output after a wrong name" test ! -e "$work/n.npy"

echo "== NumPy in and out (defect 6)"
check "dequant to .npy" 0 "" "$mq" dequant "$m" output_norm.weight -o "$work/norm.npy"
check "numpy loads it" 0 "^\(576,\) float32$" "$py" -c "import numpy as np; a=np.load('$work/norm.npy'); print(a.shape, a.dtype)"
"$py" -c "import numpy as np; np.save('$work/x.npy', np.linspace(-1, 1, 576, dtype='<f4')); np.linspace(-1, 1, 576, dtype='<f4').tofile('$work/x.f32')"
check "matvec with x.npy, y.npy" 0 "" "$mq" matvec "$m" blk.0.attn_q.weight "$work/x.npy" -o "$work/y.npy"
check "matvec with raw x.f32" 0 "" "$mq" matvec "$m" blk.0.attn_q.weight "$work/x.f32" -o "$work/y.f32"
check "y.npy loads and equals the raw y" 0 "^same$" "$py" -c "import numpy as np; a=np.load('$work/y.npy'); b=np.fromfile('$work/y.f32', '<f4'); print('same' if a.shape==(576,) and (a.view('u4')==b.view('u4')).all() else 'differ')"
check "quantize-raw reads x.npy as 576 values" 0 "" "$mq" quantize-raw --type q8_0 "$work/x.npy" "$work/x.q8"
holds "18 Q8_0 blocks of 34 bytes" test "$(stat -c %s "$work/x.q8" 2>/dev/null)" = 612
"$py" -c "import numpy as np; np.save('$work/x64.npy', np.zeros(576))"
check "a float64 .npy is refused" 1 "f4|float32|dtype" "$mq" matvec "$m" blk.0.attn_q.weight "$work/x64.npy" -o "$work/y64.f32"

echo "== an output onto its own input (defect 2)"
check "dequant -o the model itself" 2 "" "$mq" dequant "$m" output_norm.weight -o "$m"
ln -s "$m" "$work/link.gguf"
check "dequant -o a symlink to the model" 2 "" "$mq" dequant "$m" output_norm.weight -o "$work/link.gguf"
check "matvec -o the model itself" 2 "" "$mq" matvec "$m" blk.0.attn_q.weight "$work/x.f32" -o "$m"
holds "the model is intact" test "$(sum "$m")" = "$model_sum"
# (If it was not, the later checks still get a model to work on.)
cp "$model" "$m"

echo "== a big-endian file (defect 3)"
cp "$tiny" "$work/be.gguf"
echo YES | "$convert_endian" "$work/be.gguf" big >/dev/null 2>&1
check "inspect says big-endian" 0 '"byte_order": ?"big"' "$mq" inspect --json "$work/be.gguf"
for t in output_norm.weight token_embd.weight blk.0.attn_q.weight blk.0.ffn_up.weight blk.0.ffn_down.weight; do
    "$mq" dequant "$tiny" "$t" -o "$work/le-$t.f32" >/dev/null 2>&1
    check "dequant big-endian $t" 0 "" "$mq" dequant "$work/be.gguf" "$t" -o "$work/be-$t.f32"
    holds "big-endian $t equals little-endian" cmp "$work/le-$t.f32" "$work/be-$t.f32"
done
check "extract a big-endian file" 0 "" "$mq" extract "$work/be.gguf" "$work/be-copy.gguf"
holds "extract keeps it byte-identical" cmp "$work/be.gguf" "$work/be-copy.gguf"
# (F16: the example's 8-column token_embd has no quantized fallback.)
check "requantize a big-endian file" 0 "" "$mq" requantize "$work/be.gguf" "$work/be-f16.gguf" --type f16
"$mq" requantize "$tiny" "$work/le-f16.gguf" --type f16 >/dev/null 2>&1
check "its output is big-endian too" 0 '"byte_order": ?"big"' "$mq" inspect --json "$work/be-f16.gguf"
"$mq" dequant "$work/le-f16.gguf" output_norm.weight -o "$work/le-f16-norm.f32" >/dev/null 2>&1
"$mq" dequant "$work/be-f16.gguf" output_norm.weight -o "$work/be-f16-norm.f32" >/dev/null 2>&1
holds "its norms read as the little-endian requantize's" cmp "$work/le-f16-norm.f32" "$work/be-f16-norm.f32"

echo "== in a terminal (defect 1)"
check "requantize under a pty ends" 0 "" timeout 60 script -q -e -c "$mq requantize $m $work/pty-q8.gguf --type q8_0" /dev/null
check "its output is valid" 0 "^ok: " "$mq" validate "$work/pty-q8.gguf"
check "dequant under a pty ends" 0 "" timeout 60 script -q -e -c "$mq dequant $m token_embd.weight -o $work/pty-te.npy" /dev/null

echo "== broken files"
cp "$tiny" "$work/nan.gguf"
MQ="$mq" "$py" - "$work/nan.gguf" <<'EOF'
import json, subprocess, sys, os
path = sys.argv[1]
info = json.loads(subprocess.run([os.environ["MQ"], "inspect", "--json", path], capture_output=True, check=True).stdout)
t = next(t for t in info["tensors"] if t["name"] == "blk.0.attn_q.weight")
with open(path, "r+b") as f:
    f.seek(info["data_offset"] + t["offset"] + 34)  # row 0, block 1: its f16 scale
    f.write(bytes([0x00, 0x7e]))  # NaN
EOF
check "validate alone does not read the data" 0 "^ok: " "$mq" validate "$work/nan.gguf"
check "validate --data finds the NaN scale" 1 'tensor "blk\.0\.attn_q\.weight" \(Q8_0\): row 0, block 1 .*d is NaN' "$mq" validate --data "$work/nan.gguf"
"$py" - "$tiny" "$work/count.gguf" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<Q", b, 8, struct.unpack_from("<Q", b, 8)[0] + 1)
open(sys.argv[2], "wb").write(b)
EOF
check "a tensor count off by one gets a hint" 1 "hint: the header declares 6 tensors, but with 5" "$mq" validate "$work/count.gguf"
head -c 50000000 "$m" >"$work/partial.gguf"
check "a partial download: validate says truncated" 1 "^error: file is truncated" "$mq" validate "$work/partial.gguf"
check "a partial download: a tensor wholly there dequantizes" 0 "" "$mq" dequant "$work/partial.gguf" token_embd.weight -o "$work/partial-te.f32"
check "a partial download: a cut tensor is named" 1 'tensor "output_norm\.weight" is cut at byte 0 of 2304' "$mq" dequant "$work/partial.gguf" output_norm.weight -o "$work/partial-norm.f32"
check "a partial download: extract what is there" 0 "" "$mq" extract "$work/partial.gguf" "$work/partial-te.gguf" --tensor token_embd.weight
check "extract --tensor with a glob" 0 "" "$mq" extract "$tiny" "$work/blk0.gguf" --tensor 'blk.0.*'
check "the glob kept the three blk.0 tensors" 0 "^ok: .*, 3 tensors" "$mq" validate "$work/blk0.gguf"
check "extract --tensor matching nothing fails" nonzero "" "$mq" extract "$tiny" "$work/none.gguf" --tensor 'nothing*'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
