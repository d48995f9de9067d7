//! The `validate` target: see `miniquant_fuzz_checks::validate`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| miniquant_fuzz_checks::validate::check(data));
