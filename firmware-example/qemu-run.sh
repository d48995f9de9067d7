#!/usr/bin/env bash
# Runs a firmware ELF in QEMU and decodes its defmt log. The exit status is the firmware's
# semihosting exit code (124: it hung and `timeout` killed QEMU).
# QEMU's -icount shift=0 makes virtual time advance 1 ns per instruction, so the firmware's step
# timings are deterministic instruction-based counts, not host wall time.
set -euo pipefail
elf="$1"
case "$elf" in
  *thumbv7em-none-eabihf*) qemu=(qemu-system-arm -machine mps2-an386 -cpu cortex-m4) ;;
  *aarch64-unknown-none*)  qemu=(qemu-system-aarch64 -machine virt -cpu max -m 64M -nic none) ;;
  *riscv32imac-unknown-none-elf*) qemu=(qemu-system-riscv32 -machine virt -bios none -m 64M -nic none) ;;
  *) echo "qemu-run.sh: which target is $elf for?" >&2; exit 2 ;;
esac
timeout "${QEMU_TIMEOUT:-120}" "${qemu[@]}" -icount shift=0 -nographic \
  -semihosting-config enable=on,target=native -kernel "$elf" </dev/null \
  | defmt-print -e "$elf"
