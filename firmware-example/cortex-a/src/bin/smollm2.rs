//! The Cortex-A model image: runs SmolLM2-135M (Q4_1) on QEMU `virt -cpu max` with the core's
//! forward pass, parsed in place where `qemu-run.sh` loads the file (QEMU's generic loader, no
//! copy), with its working memory in the RAM after it, sized by the model's own `Layout`; then the
//! M4F image's tiny llama from flash. For each it runs the host's prompt ids, generates greedily,
//! logs each step's token and logits digest, and exits with 0 if they all equal the host's (`cargo
//! xtask firmware` also compares the logged lines), 1 if not (101/102 on a panic or an unexpected
//! exception).
#![no_std]
#![no_main]

#[path = "../board.rs"]
mod board;

use aarch64_rt::entry;
use defmt::{error, info};
use defmt_semihosting as _;
use firmware_common::inputs::{
    SMOLLM2_EXPECTED, TINY_LLAMA, TINY_LLAMA_EXPECTED, TINY_LLAMA_MAX_LAYERS,
};
use firmware_common::model::Expected;
use firmware_common::Board;
use miniquant::quant::{level, Level};

entry!(main, { board::STACK_PAGES });

/// Where `qemu-run.sh` puts the file's length (a little-endian u64) and the file itself; QEMU
/// runs this image with 256 MiB of RAM from 0x4000_0000, and the image itself lies below
/// `LENGTH_ADDR` (`memory.ld`).
const LENGTH_ADDR: usize = 0x4300_0000;
const MODEL_ADDR: usize = 0x4400_0000;
const RAM_END: usize = 0x5000_0000;

/// The levels below i8mm the tiny llama also runs at, with their names in the log.
const LOWER_LEVELS: [(Level, &str); 3] = [
    (Level::Scalar, "tiny-llama/scalar"),
    (Level::Neon, "tiny-llama/neon"),
    (Level::Dotprod, "tiny-llama/dotprod"),
];

/// SmolLM2-135M has 30 blocks.
const MAX_LAYERS: usize = 32;

fn main(_x0: u64, _x1: u64, _x2: u64, _x3: u64) -> ! {
    semihosting::process::exit(if run() { 0 } else { 1 })
}

fn run() -> bool {
    let Some(expected) = Expected::parse(SMOLLM2_EXPECTED) else {
        error!("smollm2.expected is malformed");
        return false;
    };
    // SAFETY: an aligned read of RAM mapped by the page table; QEMU's loader wrote the word
    // before the CPU started (a zero means nothing was loaded).
    let length = unsafe { core::ptr::read_volatile(LENGTH_ADDR as *const u64) } as usize;
    let model_end = MODEL_ADDR.saturating_add(length);
    if length == 0 || model_end > RAM_END {
        error!(
            "no model at {=usize:#x} (length word {=usize}): qemu-run.sh loads it",
            MODEL_ADDR, length
        );
        return false;
    }
    // SAFETY: `MODEL_ADDR..model_end` is RAM (below RAM_END, mapped as normal memory) that QEMU's
    // loader filled with the file before the CPU started; nothing else in this image writes there
    // (the image and its stack lie below LENGTH_ADDR, the working memory starts after model_end).
    let file: &'static [u8] =
        unsafe { core::slice::from_raw_parts(MODEL_ADDR as *const u8, length) };
    info!(
        "{=str}: SmolLM2 file {=usize} B at {=usize:#x}, kernel level {=str}",
        board::Virt::NAME,
        length,
        MODEL_ADDR,
        level::current().name()
    );
    let work_start = model_end.next_multiple_of(64);
    let free_words = RAM_END.saturating_sub(work_start) / 4;
    // SAFETY: `work_start..RAM_END` is RAM above the model (64-byte aligned, mapped as normal
    // memory) that nothing else in this image uses; this is its only reference.
    let free: &mut [f32] =
        unsafe { core::slice::from_raw_parts_mut(work_start as *mut f32, free_words) };
    let smollm2 = firmware_common::model_report::run::<_, MAX_LAYERS>(
        &board::Virt,
        "smollm2",
        level::current(),
        file,
        &expected,
        free,
    );
    // The M4F's tiny llama too (Q4_K as well as Q8_0 through the i8mm kernels), from flash: the
    // same file on x86_64, AArch64 and the M4F.
    let Some(tiny_expected) = Expected::parse(TINY_LLAMA_EXPECTED) else {
        error!("tiny-llama.expected is malformed");
        return false;
    };
    let tiny = firmware_common::model_report::run::<_, TINY_LLAMA_MAX_LAYERS>(
        &board::Virt,
        "tiny-llama",
        level::current(),
        TINY_LLAMA,
        &tiny_expected,
        free,
    );
    // And at the lower levels (a few million instructions each): every AArch64 kernel family
    // gives the host's bits. `cargo xtask firmware` compares the current level's steps; these
    // check themselves.
    let mut lower = true;
    for (other, name) in LOWER_LEVELS {
        if other != level::current() && other.is_available() {
            lower &= firmware_common::model_report::run::<_, TINY_LLAMA_MAX_LAYERS>(
                &board::Virt,
                name,
                other,
                TINY_LLAMA,
                &tiny_expected,
                free,
            );
        }
    }
    smollm2 && tiny && lower
}
