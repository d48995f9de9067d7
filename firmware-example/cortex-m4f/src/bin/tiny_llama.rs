//! The Cortex-M4F model image: runs the tiny llama `cargo xtask firmware` writes with the core's
//! GGUF writer (embedded in flash) with the core's forward pass, its working memory in the free
//! RAM, sized by the model's own `Layout`. It runs the host's prompt ids, generates greedily, logs
//! each step's token and logits digest, and exits with 0 if they equal the host's (`cargo xtask
//! firmware` also compares the logged lines), 1 if not (101/102 on a panic, 103 on a HardFault).
#![no_std]
#![no_main]

#[path = "../board.rs"]
mod board;
#[path = "../free_ram.rs"]
mod free_ram;

use cortex_m_rt::entry;
use defmt_semihosting as _;
use firmware_common::inputs::{TINY_LLAMA, TINY_LLAMA_EXPECTED, TINY_LLAMA_MAX_LAYERS};
use firmware_common::model::Expected;
use firmware_common::Board;

#[entry]
fn main() -> ! {
    if !board::start_ticks() {
        semihosting::process::exit(1)
    }
    let Some(expected) = Expected::parse(TINY_LLAMA_EXPECTED) else {
        defmt::error!("tiny-llama.expected is malformed");
        semihosting::process::exit(1)
    };
    defmt::info!(
        "{=str}: tiny llama {=usize} B in flash, kernel level {=str}",
        board::Mps2An386::NAME,
        TINY_LLAMA.len(),
        miniquant::quant::level::current().name()
    );
    let ok = free_ram::take().is_some_and(|free| {
        firmware_common::model_report::run::<_, TINY_LLAMA_MAX_LAYERS>(
            &board::Mps2An386,
            "tiny-llama",
            miniquant::quant::level::current(),
            TINY_LLAMA,
            &expected,
            free,
        )
    });
    semihosting::process::exit(if ok { 0 } else { 1 })
}
