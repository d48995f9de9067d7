//! What the candle comparisons share: the map between our ggml types and candle 0.11's
//! `GgmlDType`, byte copies into and out of candle's block structs, single-threaded candle, a seeded
//! random generator, and the model-file lookup.
//!
//! Included with `#[path]` by the integration tests (`tests/integration/main.rs`) and the kernels
//! bench, with `mod candle_common;` by `neon_counts.rs`; each of them uses only part of it.
#![allow(dead_code)]

pub use candle_core::quantized::k_quants::GgmlType as CandleBlock;
use candle_core::quantized::GgmlDType;
use miniquant::GgmlType;
use std::path::PathBuf;

/// The 15 types candle 0.11 implements (`GgmlDType`), in ggml code order.
pub const CANDLE_TYPES: [GgmlType; 15] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q8_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::BF16,
];

/// candle's dtype for our type, matched by ggml code (`None` for types candle lacks).
pub fn candle_dtype(t: GgmlType) -> Option<GgmlDType> {
    Some(match t {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}

/// Calls `$f::<Block>($args)` with candle's block struct for `$t` (one of [`CANDLE_TYPES`]).
#[allow(unused_macros)]
macro_rules! with_candle_block {
    ($t:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        use candle_core::quantized::k_quants as kq;
        match $t {
            miniquant::GgmlType::F32 => $f::<f32>($($arg),*),
            miniquant::GgmlType::F16 => $f::<half::f16>($($arg),*),
            miniquant::GgmlType::BF16 => $f::<half::bf16>($($arg),*),
            miniquant::GgmlType::Q4_0 => $f::<kq::BlockQ4_0>($($arg),*),
            miniquant::GgmlType::Q4_1 => $f::<kq::BlockQ4_1>($($arg),*),
            miniquant::GgmlType::Q5_0 => $f::<kq::BlockQ5_0>($($arg),*),
            miniquant::GgmlType::Q5_1 => $f::<kq::BlockQ5_1>($($arg),*),
            miniquant::GgmlType::Q8_0 => $f::<kq::BlockQ8_0>($($arg),*),
            miniquant::GgmlType::Q8_1 => $f::<kq::BlockQ8_1>($($arg),*),
            miniquant::GgmlType::Q2_K => $f::<kq::BlockQ2K>($($arg),*),
            miniquant::GgmlType::Q3_K => $f::<kq::BlockQ3K>($($arg),*),
            miniquant::GgmlType::Q4_K => $f::<kq::BlockQ4K>($($arg),*),
            miniquant::GgmlType::Q5_K => $f::<kq::BlockQ5K>($($arg),*),
            miniquant::GgmlType::Q6_K => $f::<kq::BlockQ6K>($($arg),*),
            miniquant::GgmlType::Q8_K => $f::<kq::BlockQ8K>($($arg),*),
            other => panic!("candle 0.11 has no {other}"),
        }
    }};
}
#[allow(unused_imports)]
pub(crate) use with_candle_block;

/// Copies `bytes` (whole blocks) into a vector of candle's block struct `T`.
///
/// Panics if `bytes` is not a whole number of `T`.
pub fn blocks_from_bytes<T: CandleBlock>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    assert_eq!(
        bytes.len() % size,
        0,
        "{} bytes are not whole blocks",
        bytes.len()
    );
    let mut blocks = vec![T::zeros(); bytes.len() / size];
    // SAFETY: candle's block types (and f32/f16/bf16) are `repr(C)` structs of integers, f16 and f32
    // fields and arrays of them; candle asserts that each size is the sum of its fields, so there is
    // no padding and every bit pattern is a valid value. `blocks` owns exactly `bytes.len()` bytes
    // and does not overlap `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            blocks.as_mut_ptr().cast::<u8>(),
            bytes.len(),
        );
    }
    blocks
}

/// The bytes of candle blocks, as they would be stored in a GGUF file.
pub fn bytes_of_blocks<T: CandleBlock>(blocks: &[T]) -> &[u8] {
    // SAFETY: as in `blocks_from_bytes`, the block types have no padding, so every byte of the
    // slice is initialised; u8 has alignment 1 and the length is the slice's size in bytes.
    unsafe {
        std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), std::mem::size_of_val(blocks))
    }
}

/// Makes candle's quantized matmul run on the calling thread only. Must run before candle's
/// thread pool is first used (it reads `CANDLE_NUM_THREADS` once); later calls do nothing.
pub fn single_threaded_candle() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("CANDLE_NUM_THREADS", "1"));
}

/// Whether candle's kernels in this build are the scalar ones: on x86_64 they switch to AVX2 code
/// only under `cfg(target_feature = "avx2")` (NEON and simd128 likewise), decided at compile time
/// by the same flags this crate is built with.
pub fn candle_simd_in_build() -> &'static str {
    if cfg!(target_feature = "avx2") {
        "avx2"
    } else if cfg!(target_feature = "neon") {
        "neon"
    } else if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "none (scalar vec_dot_unopt paths)"
    }
}

/// SplitMix64: a small, fixed, seedable generator, so every run sees the same data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// `rows` rows of `cols` Gaussian values: each row has its own scale (10^-3 .. 10^2) and about one
/// value in 500 is an outlier, 10 to 50 times larger.
pub fn gaussian_rows(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let scale = 10f64.powf(rng.uniform() * 5.0 - 3.0);
        for _ in 0..cols {
            let mut v = rng.gaussian() * scale;
            if rng.uniform() < 1.0 / 500.0 {
                v *= 10.0 + 40.0 * rng.uniform();
            }
            out.push(v as f32);
        }
    }
    out
}

/// The directory the real GGUF files live in: `$MINIQUANT_CACHE`, else `~/.cache/miniquant`.
pub fn model_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MINIQUANT_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").expect("HOME is not set and MINIQUANT_CACHE is not set");
    PathBuf::from(home).join(".cache").join("miniquant")
}

/// The path of a real model file; panics (failing the test) with the fetch command if it is missing.
pub fn model_file(name: &str) -> PathBuf {
    let path = model_cache_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-models.sh (it downloads and sha256-checks the test models)",
        path.display()
    );
    path
}
