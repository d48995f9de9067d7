//! The `roundtrip` target: see `miniquant_fuzz_checks::roundtrip`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| miniquant_fuzz_checks::roundtrip::check(data));
