//! The kernels by ggml type code: dequantize, quantize, vec_dot and matvec over caller buffers,
//! their size functions, and the kernel level in use.

use core::ffi::c_char;

use miniquant::quant::{self, level, matvec};
use miniquant::GgmlType;

use crate::error::{mq_error, Failure};
use crate::ffi::{self, c_str};

fn ggml_type(code: u32) -> Result<GgmlType, Failure> {
    GgmlType::from_code(code).map_err(|_| Failure::TypeCode {
        code,
        removed: matches!(code, 4 | 5 | 31..=33 | 36..=38),
    })
}

/// Runs `f` and turns its result into a C return code and `err`.
///
/// # Safety
/// `err` NULL or valid for writes of an `mq_error`.
unsafe fn call(err: *mut mq_error, f: impl FnOnce() -> Result<(), Failure>) -> i32 {
    // SAFETY: the caller's contract on `err`.
    unsafe { ffi::finish(err, f()) }
}

/// A core function from one kind of element to another: `quant::dequantize` or `quant::quantize`.
type Conversion<S, D> = fn(GgmlType, &[S], &mut [D]) -> Result<(), miniquant::Error>;

/// `mq_dequantize` and `mq_quantize`: `op` from `src_len` elements at `src` into `dst_len` at
/// `dst`, the type code and every pointer/length pair checked, the output not overlapping the
/// input.
///
/// # Safety
/// `src` valid for `src_len` reads, `dst` for `dst_len` writes, `err` NULL or valid for writes.
unsafe fn convert<S, D>(
    code: u32,
    src: *const S,
    src_len: usize,
    dst: *mut D,
    dst_len: usize,
    err: *mut mq_error,
    op: Conversion<S, D>,
) -> i32 {
    // SAFETY: the caller's contracts; the overlap is checked before the slices are made.
    unsafe {
        call(err, || {
            let t = ggml_type(code)?;
            ffi::disjoint(
                ffi::span(dst.cast_const(), dst_len)?,
                &[ffi::span(src, src_len)?],
            )?;
            let src = ffi::slice(src, src_len)?;
            let dst = ffi::slice_mut(dst, dst_len)?;
            Ok(op(t, src, dst)?)
        })
    }
}

/// Elements per block and bytes per block of type `code`, into `*block_size` and `*block_bytes`
/// (either may be NULL). Returns `MQ_OK`, `MQ_E_UNKNOWN_GGML_TYPE` or `MQ_E_REMOVED_GGML_TYPE`.
///
/// # Safety
/// `block_size`, `block_bytes` and `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_type_block(
    code: u32,
    block_size: *mut u32,
    block_bytes: *mut u32,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts.
    unsafe {
        call(err, || {
            let t = ggml_type(code)?;
            ffi::put(block_size, t.block_size());
            ffi::put(block_bytes, t.block_bytes());
            Ok(())
        })
    }
}

/// Bytes that `elements` values of type `code` take, into `*out`. Returns `MQ_OK`,
/// `MQ_E_PARTIAL_BLOCK` (not whole blocks, or too large for `size_t`), `MQ_E_UNKNOWN_GGML_TYPE`,
/// `MQ_E_REMOVED_GGML_TYPE` or `MQ_E_NULL` (`out` NULL).
///
/// # Safety
/// `out` valid for writes; `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_row_bytes(
    code: u32,
    elements: usize,
    out: *mut usize,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts.
    unsafe {
        call(err, || {
            let bytes = quant::bytes_for(ggml_type(code)?, elements)?;
            ffi::put_required(out, bytes)
        })
    }
}

/// The type code `vec_dot` and `matvec` quantize the activations of type `code` into, into `*out`.
/// Returns `MQ_OK`, `MQ_E_UNSUPPORTED` (ggml has no vec_dot for the type), a type-code error or
/// `MQ_E_NULL`.
///
/// # Safety
/// `out` valid for writes; `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_vec_dot_type(code: u32, out: *mut u32, err: *mut mq_error) -> i32 {
    // SAFETY: the caller's contracts.
    unsafe {
        call(err, || {
            let t = ggml_type(code)?;
            let vd = quant::vec_dot_type(t).ok_or(miniquant::Error::Unsupported {
                ggml_type: t,
                op: miniquant::error::Op::VecDot,
            })?;
            ffi::put_required(out, vd.code())
        })
    }
}

/// Dequantizes `src_len` bytes of type `code` (whole blocks) at `src` into the `dst_len` floats at
/// `dst`, which must be exactly the elements they hold.
///
/// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED`, a type-code
/// error, `MQ_E_NULL` (a NULL pointer with a non-zero length), `MQ_E_MISALIGNED_POINTER` (`dst` not
/// 4-aligned), `MQ_E_TOO_LONG` or `MQ_E_OVERLAP` (`dst` overlaps `src`). Lengths are checked before anything
/// is written.
///
/// # Safety
/// `src` valid for `src_len` bytes of reads; `dst` valid for `dst_len` floats of writes; `err` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_dequantize(
    code: u32,
    src: *const u8,
    src_len: usize,
    dst: *mut f32,
    dst_len: usize,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts, passed on.
    unsafe { convert(code, src, src_len, dst, dst_len, err, quant::dequantize) }
}

/// Quantizes the `src_len` floats at `src` into `dst_len` bytes of type `code` at `dst` (exactly
/// the bytes they take; `mq_row_bytes` gives it), byte-identical to ggml's reference quantizer.
///
/// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED` (types ggml
/// quantizes only with an importance matrix), a type-code error, `MQ_E_NULL`,
/// `MQ_E_MISALIGNED_POINTER` (`src` not 4-aligned), `MQ_E_TOO_LONG` or `MQ_E_OVERLAP`.
///
/// # Safety
/// `src` valid for `src_len` floats of reads; `dst` valid for `dst_len` bytes of writes; `err` NULL
/// or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_quantize(
    code: u32,
    src: *const f32,
    src_len: usize,
    dst: *mut u8,
    dst_len: usize,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts, passed on.
    unsafe { convert(code, src, src_len, dst, dst_len, err, quant::quantize) }
}

/// The dot product of `w` (`w_len` bytes, whole blocks of type `code`) with `x` (`x_len` bytes:
/// as many elements in type `mq_vec_dot_type(code)`), into `*out`, in ggml's float order.
///
/// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED`, a type-code
/// error, `MQ_E_NULL` (`out` NULL, or a NULL buffer with a non-zero length),
/// `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`.
///
/// # Safety
/// `w` and `x` valid for their lengths of reads; `out` valid for writes; `err` NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn mq_vec_dot(
    code: u32,
    w: *const u8,
    w_len: usize,
    x: *const u8,
    x_len: usize,
    out: *mut f32,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts.
    unsafe {
        call(err, || {
            let t = ggml_type(code)?;
            ffi::span(out.cast_const(), 1)?;
            let dot = quant::vec_dot(t, ffi::slice(w, w_len)?, ffi::slice(x, x_len)?)?;
            ffi::put_required(out, dot)
        })
    }
}

/// Scratch bytes `mq_matvec` needs for `cols` columns of weights of type `code`, into `*out`.
/// Returns `MQ_OK`, `MQ_E_UNSUPPORTED`, `MQ_E_PARTIAL_BLOCK` (`cols` not whole blocks), a type-code
/// error or `MQ_E_NULL`.
///
/// # Safety
/// `out` valid for writes; `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_matvec_scratch_bytes(
    code: u32,
    cols: usize,
    out: *mut usize,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts.
    unsafe {
        call(err, || {
            let bytes = matvec::matvec_scratch_bytes(ggml_type(code)?, cols)?;
            ffi::put_required(out, bytes)
        })
    }
}

/// `y = W x` for a row-major `rows` x `cols` matrix `w` of type `code` (`w_len` bytes: exactly
/// `rows` rows of `cols` elements), `x` of `x_len` = `cols` floats and `y` of `y_len` = `rows`
/// floats. `x` is quantized once into the caller's `scratch` (`scratch_len` at least
/// `mq_matvec_scratch_bytes(code, cols)`). Every output has the bits of `mq_vec_dot` of its row.
///
/// Returns `MQ_OK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_UNSUPPORTED`, a type-code
/// error, `MQ_E_NULL`, `MQ_E_MISALIGNED_POINTER` (`x` or `y` not 4-aligned), `MQ_E_TOO_LONG` or
/// `MQ_E_OVERLAP` (`y` or `scratch` overlaps another buffer).
///
/// # Safety
/// Each pointer valid for its length (reads for `w` and `x`, writes for `scratch` and `y`); `err`
/// NULL or valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mq_matvec(
    code: u32,
    w: *const u8,
    w_len: usize,
    rows: usize,
    cols: usize,
    x: *const f32,
    x_len: usize,
    scratch: *mut u8,
    scratch_len: usize,
    y: *mut f32,
    y_len: usize,
    err: *mut mq_error,
) -> i32 {
    // SAFETY: the caller's contracts; overlaps are checked before the slices are made.
    unsafe {
        call(err, || {
            let t = ggml_type(code)?;
            let (w_span, x_span) = (ffi::span(w, w_len)?, ffi::span(x, x_len)?);
            let scratch_span = ffi::span(scratch.cast_const(), scratch_len)?;
            let y_span = ffi::span(y.cast_const(), y_len)?;
            ffi::disjoint(y_span, &[w_span, x_span, scratch_span])?;
            ffi::disjoint(scratch_span, &[w_span, x_span])?;
            let (w, x) = (ffi::slice(w, w_len)?, ffi::slice(x, x_len)?);
            let scratch = ffi::slice_mut(scratch, scratch_len)?;
            let y = ffi::slice_mut(y, y_len)?;
            Ok(matvec::matvec(t, w, rows, cols, x, scratch, y)?)
        })
    }
}

/// The kernel level in use (`"scalar"`, `"avx2"`, `"neon"`, ...): on x86_64 the best this CPU
/// has (detected once with `cpuid`, no OS call; so never `"amx"`, which needs the OS's permission
/// that this library does not ask for), elsewhere the best the build's target features allow.
/// Static, NUL-terminated.
#[no_mangle]
pub extern "C" fn mq_kernel_level() -> *const c_char {
    c_str(match level::current() {
        level::Level::Scalar => c"scalar",
        level::Level::Neon => c"neon",
        level::Level::Dotprod => c"dotprod",
        level::Level::I8mm => c"i8mm",
        level::Level::Avx2 => c"avx2",
        level::Level::Avx512Vnni => c"avx512vnni",
        level::Level::Amx => c"amx",
        #[allow(unreachable_patterns)]
        _ => c"?",
    })
}
