//! The `kernels` target: see `miniquant_fuzz_checks::kernels`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| miniquant_fuzz_checks::kernels::check(data));
