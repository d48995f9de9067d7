//! The parser-only image: the `&[u8]` driver and `Catalog` over the embedded extract, no kernels,
//! no logging. Its panic handler calls a symbol that exists nowhere, so the image links only if the
//! optimizer proved every panic in the parser unreachable: the link itself is the check.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use firmware_common::inputs::{tensor_names, MODEL};
use miniquant::gguf::{Catalog, Limits, SliceParser};

#[entry]
fn main() -> ! {
    let names = tensor_names();
    let mut found = Catalog::<1, 2>::new(&["general.architecture"], &names);
    let mut parser = SliceParser::new(MODEL, Limits::DEFAULT);
    let mut ok = true;
    loop {
        match parser.next_event() {
            Ok(Some(event)) => found.observe(&event, parser.event_offset()),
            Ok(None) => break,
            Err(_) => {
                ok = false;
                break;
            }
        }
    }
    let all_found = names.iter().all(|n| found.tensor(n).is_some());
    semihosting::process::exit(if ok && all_found { 0 } else { 1 })
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    extern "C" {
        /// Defined nowhere: referenced only if some panic is reachable.
        fn miniquant_parser_only_image_has_a_reachable_panic() -> !;
    }
    // SAFETY: never runs; if the call survives optimization, the link fails, which is the point.
    unsafe { miniquant_parser_only_image_has_a_reachable_panic() }
}
