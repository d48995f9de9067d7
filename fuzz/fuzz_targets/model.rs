//! The `model` target: see `miniquant_fuzz_checks::model`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| miniquant_fuzz_checks::model::check(data));
