//! ggml's C reference, as compiled by `build.rs` with fixed flags: the `quantize_row_*_ref`
//! quantizers, the `dequantize_row_*` dequantizers, the imatrix quantizers, the generic
//! `ggml_vec_dot_*` kernels and the data check `ggml_validate_row_data`, behind safe wrappers
//! keyed by [`GgmlType`].
//!
//! Every wrapper returns `None` when ggml has no such function for the type, and panics on a
//! harness mistake (a length that is not whole blocks). Inputs are copied into 8-byte aligned
//! buffers before they cross into C, because ggml's block structs have 2- and 4-byte alignment
//! while test slices may start anywhere.

use miniquant::GgmlType;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, Once};

type QuantizeRow = unsafe extern "C" fn(*const f32, *mut c_void, i64);
type DequantizeRow = unsafe extern "C" fn(*const c_void, *mut f32, i64);
type QuantizeImatrix = unsafe extern "C" fn(*const f32, *mut c_void, i64, i64, *const f32) -> usize;
type VecDot =
    unsafe extern "C" fn(c_int, *mut f32, usize, *const c_void, usize, *const c_void, usize, c_int);

macro_rules! extern_quantizers {
    ($($name:ident),* $(,)?) => {
        extern "C" {
            $(fn $name(x: *const f32, y: *mut c_void, k: i64);)*
        }
    };
}

// Quantizers `(const float *x, block *y, int64_t k)`.
extern_quantizers!(
    quantize_row_q4_0_ref,
    quantize_row_q4_1_ref,
    quantize_row_q5_0_ref,
    quantize_row_q5_1_ref,
    quantize_row_q8_0_ref,
    quantize_row_q8_1_ref,
    quantize_row_q2_K_ref,
    quantize_row_q3_K_ref,
    quantize_row_q4_K_ref,
    quantize_row_q5_K_ref,
    quantize_row_q6_K_ref,
    quantize_row_q8_K_ref,
    quantize_row_iq3_xxs_ref,
    quantize_row_iq4_nl_ref,
    quantize_row_iq4_xs_ref,
    quantize_row_iq3_s_ref,
    quantize_row_iq2_s_ref,
    quantize_row_tq1_0_ref,
    quantize_row_tq2_0_ref,
    quantize_row_mxfp4_ref,
    quantize_row_nvfp4_ref,
    quantize_row_q1_0_ref,
    quantize_row_q2_0_ref,
    miniquant_oracle_fp32_to_fp16_row,
    miniquant_oracle_fp32_to_bf16_row,
);

extern "C" {
    fn miniquant_oracle_init();
    fn ggml_validate_row_data(type_code: c_int, data: *const c_void, nbytes: usize) -> bool;
    fn miniquant_oracle_init_iq_grids(type_code: c_int);

    fn dequantize_row_q4_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q4_1(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q5_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q5_1(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q8_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q2_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q3_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q4_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q5_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q6_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q8_K(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq2_xxs(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq2_xs(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq2_s(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq3_xxs(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq1_s(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq1_m(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq4_nl(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq4_xs(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_iq3_s(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_tq1_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_tq2_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_mxfp4(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_nvfp4(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q1_0(x: *const c_void, y: *mut f32, k: i64);
    fn dequantize_row_q2_0(x: *const c_void, y: *mut f32, k: i64);
    fn miniquant_oracle_fp16_to_fp32_row(x: *const c_void, y: *mut f32, k: i64);
    fn miniquant_oracle_bf16_to_fp32_row(x: *const c_void, y: *mut f32, k: i64);

    fn quantize_iq2_xxs(
        x: *const f32,
        y: *mut c_void,
        rows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize;
    fn quantize_iq2_xs(
        x: *const f32,
        y: *mut c_void,
        rows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize;
    fn quantize_iq1_s(
        x: *const f32,
        y: *mut c_void,
        rows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize;
    fn quantize_iq1_m(
        x: *const f32,
        y: *mut c_void,
        rows: i64,
        n_per_row: i64,
        imatrix: *const f32,
    ) -> usize;
}

macro_rules! extern_dots {
    ($($name:ident),* $(,)?) => {
        extern "C" {
            $(fn $name(n: c_int, s: *mut f32, bs: usize, vx: *const c_void, bx: usize, vy: *const c_void, by: usize, nrc: c_int);)*
        }
    };
}

// With GGML_CPU_GENERIC these names are the portable `*_generic` kernels of ggml-cpu/quants.c.
extern_dots!(
    ggml_vec_dot_q4_0_q8_0,
    ggml_vec_dot_q4_1_q8_1,
    ggml_vec_dot_q5_0_q8_0,
    ggml_vec_dot_q5_1_q8_1,
    ggml_vec_dot_q8_0_q8_0,
    ggml_vec_dot_q2_K_q8_K,
    ggml_vec_dot_q3_K_q8_K,
    ggml_vec_dot_q4_K_q8_K,
    ggml_vec_dot_q5_K_q8_K,
    ggml_vec_dot_q6_K_q8_K,
    ggml_vec_dot_iq2_xxs_q8_K,
    ggml_vec_dot_iq2_xs_q8_K,
    ggml_vec_dot_iq3_xxs_q8_K,
    ggml_vec_dot_iq1_s_q8_K,
    ggml_vec_dot_iq4_nl_q8_0,
    ggml_vec_dot_iq3_s_q8_K,
    ggml_vec_dot_iq2_s_q8_K,
    ggml_vec_dot_iq4_xs_q8_K,
    ggml_vec_dot_iq1_m_q8_K,
    ggml_vec_dot_tq1_0_q8_K,
    ggml_vec_dot_tq2_0_q8_K,
    ggml_vec_dot_mxfp4_q8_0,
    ggml_vec_dot_nvfp4_q8_0,
    ggml_vec_dot_q1_0_q8_0,
    ggml_vec_dot_q2_0_q8_0,
);

// The scalar loops of ggml-cpu/vec.cpp, compiled without SIMD (x86_64 only, see build.rs).
#[cfg(ggml_float_dot)]
extern_dots!(ggml_vec_dot_f32, ggml_vec_dot_f16, ggml_vec_dot_bf16);

static INIT: Once = Once::new();
static IQ_GRIDS: Mutex<()> = Mutex::new(());

/// Fills ggml's fp16 lookup table once, before any other call.
fn init() {
    // SAFETY: the shim's init takes no arguments and only writes ggml's global table; `Once`
    // runs it exactly once and makes every later call happen after it.
    INIT.call_once(|| unsafe { miniquant_oracle_init() });
}

/// Builds the search grids `t`'s quantizer needs, if any (ggml skips grids already built).
fn init_iq_grids(t: GgmlType) {
    init();
    let _serialised = IQ_GRIDS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // SAFETY: ggml's grid builders write global tables without locking; the mutex serialises
    // them, and a grid is never rebuilt once present, so quantizers reading it are unaffected.
    unsafe { miniquant_oracle_init_iq_grids(t.code() as c_int) };
}

fn quantize_fn(t: GgmlType) -> Option<QuantizeRow> {
    use GgmlType::*;
    Some(match t {
        Q4_0 => quantize_row_q4_0_ref,
        Q4_1 => quantize_row_q4_1_ref,
        Q5_0 => quantize_row_q5_0_ref,
        Q5_1 => quantize_row_q5_1_ref,
        Q8_0 => quantize_row_q8_0_ref,
        Q8_1 => quantize_row_q8_1_ref,
        Q2_K => quantize_row_q2_K_ref,
        Q3_K => quantize_row_q3_K_ref,
        Q4_K => quantize_row_q4_K_ref,
        Q5_K => quantize_row_q5_K_ref,
        Q6_K => quantize_row_q6_K_ref,
        Q8_K => quantize_row_q8_K_ref,
        IQ3_XXS => quantize_row_iq3_xxs_ref,
        IQ4_NL => quantize_row_iq4_nl_ref,
        IQ4_XS => quantize_row_iq4_xs_ref,
        IQ3_S => quantize_row_iq3_s_ref,
        IQ2_S => quantize_row_iq2_s_ref,
        TQ1_0 => quantize_row_tq1_0_ref,
        TQ2_0 => quantize_row_tq2_0_ref,
        MXFP4 => quantize_row_mxfp4_ref,
        NVFP4 => quantize_row_nvfp4_ref,
        Q1_0 => quantize_row_q1_0_ref,
        Q2_0 => quantize_row_q2_0_ref,
        F16 => miniquant_oracle_fp32_to_fp16_row,
        BF16 => miniquant_oracle_fp32_to_bf16_row,
        F32 | F64 | I8 | I16 | I32 | I64 | IQ2_XXS | IQ2_XS | IQ1_S | IQ1_M => return None,
    })
}

fn dequantize_fn(t: GgmlType) -> Option<DequantizeRow> {
    use GgmlType::*;
    Some(match t {
        Q4_0 => dequantize_row_q4_0,
        Q4_1 => dequantize_row_q4_1,
        Q5_0 => dequantize_row_q5_0,
        Q5_1 => dequantize_row_q5_1,
        Q8_0 => dequantize_row_q8_0,
        Q2_K => dequantize_row_q2_K,
        Q3_K => dequantize_row_q3_K,
        Q4_K => dequantize_row_q4_K,
        Q5_K => dequantize_row_q5_K,
        Q6_K => dequantize_row_q6_K,
        Q8_K => dequantize_row_q8_K,
        IQ2_XXS => dequantize_row_iq2_xxs,
        IQ2_XS => dequantize_row_iq2_xs,
        IQ2_S => dequantize_row_iq2_s,
        IQ3_XXS => dequantize_row_iq3_xxs,
        IQ1_S => dequantize_row_iq1_s,
        IQ1_M => dequantize_row_iq1_m,
        IQ4_NL => dequantize_row_iq4_nl,
        IQ4_XS => dequantize_row_iq4_xs,
        IQ3_S => dequantize_row_iq3_s,
        TQ1_0 => dequantize_row_tq1_0,
        TQ2_0 => dequantize_row_tq2_0,
        MXFP4 => dequantize_row_mxfp4,
        NVFP4 => dequantize_row_nvfp4,
        Q1_0 => dequantize_row_q1_0,
        Q2_0 => dequantize_row_q2_0,
        F16 => miniquant_oracle_fp16_to_fp32_row,
        BF16 => miniquant_oracle_bf16_to_fp32_row,
        F32 | F64 | I8 | I16 | I32 | I64 | Q8_1 => return None,
    })
}

fn imatrix_fn(t: GgmlType) -> Option<QuantizeImatrix> {
    Some(match t {
        GgmlType::IQ2_XXS => quantize_iq2_xxs,
        GgmlType::IQ2_XS => quantize_iq2_xs,
        GgmlType::IQ1_S => quantize_iq1_s,
        GgmlType::IQ1_M => quantize_iq1_m,
        _ => return None,
    })
}

fn vec_dot_fn(t: GgmlType) -> Option<VecDot> {
    use GgmlType::*;
    Some(match t {
        Q4_0 => ggml_vec_dot_q4_0_q8_0,
        Q4_1 => ggml_vec_dot_q4_1_q8_1,
        Q5_0 => ggml_vec_dot_q5_0_q8_0,
        Q5_1 => ggml_vec_dot_q5_1_q8_1,
        Q8_0 => ggml_vec_dot_q8_0_q8_0,
        Q2_K => ggml_vec_dot_q2_K_q8_K,
        Q3_K => ggml_vec_dot_q3_K_q8_K,
        Q4_K => ggml_vec_dot_q4_K_q8_K,
        Q5_K => ggml_vec_dot_q5_K_q8_K,
        Q6_K => ggml_vec_dot_q6_K_q8_K,
        IQ2_XXS => ggml_vec_dot_iq2_xxs_q8_K,
        IQ2_XS => ggml_vec_dot_iq2_xs_q8_K,
        IQ3_XXS => ggml_vec_dot_iq3_xxs_q8_K,
        IQ1_S => ggml_vec_dot_iq1_s_q8_K,
        IQ4_NL => ggml_vec_dot_iq4_nl_q8_0,
        IQ3_S => ggml_vec_dot_iq3_s_q8_K,
        IQ2_S => ggml_vec_dot_iq2_s_q8_K,
        IQ4_XS => ggml_vec_dot_iq4_xs_q8_K,
        IQ1_M => ggml_vec_dot_iq1_m_q8_K,
        TQ1_0 => ggml_vec_dot_tq1_0_q8_K,
        TQ2_0 => ggml_vec_dot_tq2_0_q8_K,
        MXFP4 => ggml_vec_dot_mxfp4_q8_0,
        NVFP4 => ggml_vec_dot_nvfp4_q8_0,
        Q1_0 => ggml_vec_dot_q1_0_q8_0,
        Q2_0 => ggml_vec_dot_q2_0_q8_0,
        #[cfg(ggml_float_dot)]
        F32 => ggml_vec_dot_f32,
        #[cfg(ggml_float_dot)]
        F16 => ggml_vec_dot_f16,
        #[cfg(ggml_float_dot)]
        BF16 => ggml_vec_dot_bf16,
        _ => return None,
    })
}

/// ggml's second-operand type for `t`'s dot (`type_traits_cpu[t].vec_dot_type`), written out here
/// from ggml's table so the harness does not take it from the code under test.
pub fn ggml_vec_dot_type(t: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    Some(match t {
        F32 | F16 | BF16 => t,
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 | NVFP4 | Q1_0 | Q2_0 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S | IQ3_S | IQ2_S
        | IQ4_XS | IQ1_M | TQ1_0 | TQ2_0 => Q8_K,
        Q8_1 | Q8_K | I8 | I16 | I32 | I64 | F64 => return None,
    })
}

/// Types with a ggml reference quantizer that miniquant's `quantize` must reproduce byte for byte.
/// (ggml also has `_ref` quantizers for IQ3_XXS, IQ3_S and IQ2_S; matching them is optional.)
pub const REQUIRED_QUANTIZERS: [GgmlType; 23] = {
    use GgmlType::*;
    [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
        IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0,
    ]
};

/// Whether ggml has a reference quantizer (`from_float_ref`) for `t`. F32's is a copy.
pub fn has_quantize_ref(t: GgmlType) -> bool {
    t == GgmlType::F32 || quantize_fn(t).is_some()
}

/// Whether ggml has a dequantizer (`to_float`) for `t`. F32's is a copy.
pub fn has_dequantize(t: GgmlType) -> bool {
    t == GgmlType::F32 || dequantize_fn(t).is_some()
}

/// Whether this build has ggml's generic vec_dot for `t`.
pub fn has_vec_dot(t: GgmlType) -> bool {
    vec_dot_fn(t).is_some()
}

/// Bytes that `elements` values of `t` take; panics if they are not whole blocks.
fn bytes_of(t: GgmlType, elements: usize) -> usize {
    let block = t.block_size() as usize;
    assert!(
        elements.is_multiple_of(block),
        "{elements} values are not whole {t} blocks of {block}"
    );
    elements / block * t.block_bytes() as usize
}

/// Elements in `bytes` bytes of `t`; panics if they are not whole blocks.
fn elements_of(t: GgmlType, bytes: usize) -> usize {
    let block_bytes = t.block_bytes() as usize;
    assert!(
        bytes.is_multiple_of(block_bytes),
        "{bytes} bytes are not whole {t} blocks of {block_bytes} bytes"
    );
    bytes / block_bytes * t.block_size() as usize
}

/// Bytes held in 8-byte aligned storage, for C structs with alignment up to 8.
struct Aligned {
    words: Vec<u64>,
    len: usize,
}

impl Aligned {
    fn filled(len: usize, byte: u8) -> Self {
        Self {
            words: vec![u64::from_ne_bytes([byte; 8]); len.div_ceil(8)],
            len,
        }
    }

    fn copy_of(bytes: &[u8]) -> Self {
        let mut aligned = Self::filled(bytes.len(), 0);
        aligned.bytes_mut().copy_from_slice(bytes);
        aligned
    }

    fn bytes(&self) -> &[u8] {
        &word_bytes(&self.words)[..self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut word_bytes_mut(&mut self.words)[..len]
    }

    fn ptr(&self) -> *const c_void {
        self.words.as_ptr().cast()
    }

    fn mut_ptr(&mut self) -> *mut c_void {
        self.words.as_mut_ptr().cast()
    }
}

fn word_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any byte pattern is valid u8; the length is exact.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) }
}

fn word_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: as above; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}

/// ggml's `amax` loop (`if (fabsf(x) > amax) amax = fabsf(x)` from 0): the largest |x|, with NaN
/// never taken.
pub fn ggml_amax(values: &[f32]) -> f32 {
    values
        .iter()
        .fold(0.0, |amax, v| if v.abs() > amax { v.abs() } else { amax })
}

/// Whether byte `byte` of the block ggml's reference quantizer writes for `block_values` is
/// determined by those values. ggml leaves two outputs to chance:
/// - IQ4_NL with amax < 1e-15: `qs` is packed from the caller's index buffer, which holds the
///   previous block's indices (stack garbage for the first block); only `d` (bytes 0..2) is set.
/// - Q8_K with amax = 0: `d` and `qs` are zeroed but `bsums` (bytes 260..292) is never written.
pub fn reference_byte_is_defined(t: GgmlType, block_values: &[f32], byte: usize) -> bool {
    match t {
        GgmlType::IQ4_NL if byte >= 2 => ggml_amax(block_values) >= 1e-15,
        GgmlType::Q8_K if byte >= 260 => ggml_amax(block_values) != 0.0,
        _ => true,
    }
}

/// The byte the quantizers' output buffers are filled with before the call, so bytes a quantizer
/// leaves unwritten show up as this pattern instead of as stale memory.
pub const UNWRITTEN: u8 = 0xa5;

/// ggml's reference quantization of `x` into `t` (`quantize_row_*_ref`; ggml.c's conversion loops
/// for F16/BF16; a copy for F32), or `None` if ggml has none (the imatrix-only IQ types, integers,
/// F64). The output buffer is pre-filled with [`UNWRITTEN`].
pub fn ggml_quantize_ref(t: GgmlType, x: &[f32]) -> Option<Vec<u8>> {
    ggml_quantize_ref_over(t, x, UNWRITTEN)
}

/// [`ggml_quantize_ref`] with the output buffer pre-filled with `fill`: bytes that change with
/// `fill` are bytes ggml does not write.
pub fn ggml_quantize_ref_over(t: GgmlType, x: &[f32], fill: u8) -> Option<Vec<u8>> {
    let bytes = bytes_of(t, x.len());
    if t == GgmlType::F32 {
        return Some(x.iter().flat_map(|v| v.to_le_bytes()).collect());
    }
    let quantize = quantize_fn(t)?;
    init_iq_grids(t);
    let mut out = Aligned::filled(bytes, fill);
    // SAFETY: `x` holds `x.len()` floats, a whole number of blocks (checked above); `out` holds
    // exactly the bytes for them, 8-byte aligned. ggml writes only inside that range.
    unsafe { quantize(x.as_ptr(), out.mut_ptr(), x.len() as i64) };
    Some(out.bytes().to_vec())
}

/// ggml's quantization of `x` (rows of `n_per_row`) with an importance matrix of `n_per_row`
/// weights, for the IQ types whose quantizer requires one (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M); `None`
/// for the others. Used to make realistic blocks of types we cannot quantize.
pub fn ggml_quantize_imatrix(
    t: GgmlType,
    x: &[f32],
    n_per_row: usize,
    imatrix: &[f32],
) -> Option<Vec<u8>> {
    let quantize = imatrix_fn(t)?;
    assert_eq!(imatrix.len(), n_per_row, "one importance weight per column");
    assert!(
        n_per_row > 0 && x.len().is_multiple_of(n_per_row),
        "x is not whole rows of {n_per_row}"
    );
    let row_bytes = bytes_of(t, n_per_row);
    let rows = x.len() / n_per_row;
    init_iq_grids(t);
    let mut out = Aligned::filled(rows * row_bytes, UNWRITTEN);
    // SAFETY: `x` holds `rows * n_per_row` floats and `imatrix` `n_per_row`; `out` holds the
    // `rows * row_bytes` bytes ggml writes for them.
    let written = unsafe {
        quantize(
            x.as_ptr(),
            out.mut_ptr(),
            rows as i64,
            n_per_row as i64,
            imatrix.as_ptr(),
        )
    };
    assert_eq!(
        written,
        rows * row_bytes,
        "ggml wrote an unexpected number of bytes for {t}"
    );
    Some(out.bytes().to_vec())
}

/// ggml's dequantization of whole blocks of `t` (`dequantize_row_*`, ggml.c's conversions for
/// F16/BF16, a copy for F32), or `None` if ggml has no `to_float` for `t` (Q8_1, integers, F64).
pub fn ggml_dequantize(t: GgmlType, bytes: &[u8]) -> Option<Vec<f32>> {
    let n = elements_of(t, bytes.len());
    if t == GgmlType::F32 {
        return Some(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        );
    }
    let dequantize = dequantize_fn(t)?;
    init();
    let src = Aligned::copy_of(bytes);
    let mut out = vec![0f32; n];
    // SAFETY: `src` holds whole blocks for `n` elements, 8-byte aligned; `out` holds `n` floats.
    unsafe { dequantize(src.ptr(), out.as_mut_ptr(), n as i64) };
    Some(out)
}

/// ggml's verdict on `bytes` of type `t` (`ggml_validate_row_data`, which llama.cpp's
/// `--check-tensors` runs on every tensor): `true` if no value or block scale is NaN or infinite
/// (and, for MXFP4, no shared exponent is 0xFF). Bytes that are not whole blocks give `false`, as
/// in ggml. ggml prints why it refuses on stderr.
pub fn ggml_validate(t: GgmlType, bytes: &[u8]) -> bool {
    init();
    let data = Aligned::copy_of(bytes);
    // SAFETY: `data` holds `bytes.len()` readable bytes, 8-byte aligned; ggml reads whole blocks
    // of `t` within `nbytes` after checking that `nbytes` is a multiple of the block size, and
    // reads nothing for a type it does not know.
    unsafe { ggml_validate_row_data(t.code() as c_int, data.ptr(), bytes.len()) }
}

/// [`ggml_validate`], with the time of ggml's call alone (not the copy into aligned memory) added
/// to `took`: for the benchmark.
pub fn ggml_validate_timed(t: GgmlType, bytes: &[u8], took: &mut std::time::Duration) -> bool {
    init();
    let data = Aligned::copy_of(bytes);
    let start = std::time::Instant::now();
    // SAFETY: as in `ggml_validate`.
    let ok = unsafe { ggml_validate_row_data(t.code() as c_int, data.ptr(), bytes.len()) };
    *took += start.elapsed();
    ok
}

/// ggml's generic dot of `w` (whole blocks of `t`) with `x` (the same number of elements in
/// [`ggml_vec_dot_type`]`(t)`), or `None` if this build has no ggml dot for `t`.
pub fn ggml_vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Option<f32> {
    let dot = vec_dot_fn(t)?;
    let vd = ggml_vec_dot_type(t)?;
    let n = elements_of(t, w.len());
    assert_eq!(
        x.len(),
        bytes_of(vd, n),
        "x must hold {n} values of {vd} for a {t} dot"
    );
    let n = c_int::try_from(n).expect("ggml's vec_dot takes an int length");
    init();
    let (w, x) = (Aligned::copy_of(w), Aligned::copy_of(x));
    let mut s = f32::NAN;
    // SAFETY: `w` and `x` hold `n` elements of their types, 8-byte aligned; one row (nrc = 1), so
    // the strides are unused; ggml writes the single result to `s`.
    unsafe { dot(n, &mut s, 0, w.ptr(), 0, x.ptr(), 0, 1) };
    Some(s)
}

/// ggml's reference quantization of an activation row into a vec-dot type: `quantize_row_q8_0_ref`,
/// `_q8_1_ref`, `_q8_K_ref` (equal to ggml-cpu's generic `from_float`), or the F32/F16/BF16
/// conversions. Panics if `vd` is not a vec-dot type.
pub fn ggml_quantize_activation(vd: GgmlType, x: &[f32]) -> Vec<u8> {
    use GgmlType::*;
    assert!(
        matches!(vd, Q8_0 | Q8_1 | Q8_K | F32 | F16 | BF16),
        "{vd} is not a vec_dot type"
    );
    ggml_quantize_ref(vd, x).expect("every vec_dot type has a reference quantizer")
}
