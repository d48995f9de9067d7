#!/usr/bin/env bash
# Runs a firmware ELF in QEMU and decodes its defmt log. The exit status is the firmware's
# semihosting exit code (124: it hung and `timeout` killed QEMU).
# QEMU's -icount shift=0 makes virtual time advance 1 ns per instruction, so the firmware's step
# timings are deterministic instruction-based counts, not host wall time.
set -euo pipefail
elf="$1"
case "$elf" in
  *thumbv7em-none-eabihf*) qemu=(qemu-system-arm -machine mps2-an386 -cpu cortex-m4) ;;
  # The `smollm2` image parses SmolLM2 where QEMU's loader puts it (0x4400_0000, its length as a
  # u64 at 0x4300_0000: the addresses in cortex-a/src/bin/smollm2.rs); 256 MiB of RAM hold the file
  # and the working memory after it.
  *aarch64-unknown-none*/smollm2)
    model="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -f "$model" ] || { echo "qemu-run.sh: $model is missing (cargo xtask fetch)" >&2; exit 2; }
    qemu=(qemu-system-aarch64 -machine virt -cpu "${QEMU_CPU:-max}" -m 256M -nic none
      -device "loader,file=$model,addr=0x44000000,force-raw=on"
      -device "loader,addr=0x43000000,data=$(stat -c %s "$model"),data-len=8") ;;
  *aarch64-unknown-none*)  qemu=(qemu-system-aarch64 -machine virt -cpu max -m 64M -nic none) ;;
  *riscv32imac-unknown-none-elf*) qemu=(qemu-system-riscv32 -machine virt -bios none -m 64M -nic none) ;;
  *) echo "qemu-run.sh: which target is $elf for?" >&2; exit 2 ;;
esac
timeout "${QEMU_TIMEOUT:-120}" "${qemu[@]}" -icount shift=0 -nographic \
  -semihosting-config enable=on,target=native -kernel "$elf" </dev/null \
  | defmt-print -e "$elf"
