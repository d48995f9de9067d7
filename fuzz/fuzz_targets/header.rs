//! The `header` target: see `miniquant_fuzz_checks::header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| miniquant_fuzz_checks::header::check(data));
