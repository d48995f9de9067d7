//! The instructions that stable Rust has no intrinsic for (`sdot`, `smmla`, half-to-single
//! conversion), as inline assembly, plus small NEON helpers shared by the kernels.

use core::arch::aarch64::*;
use core::arch::asm;

/// `sdot`: each i32 lane of `acc` plus the four products of the matching four i8 lanes of `a`, `b`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(super) fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `sdot` only reads and writes the named registers; the enclosing function requires
    // the dotprod feature, so the instruction exists.
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `smmla`: `acc += A · Bᵀ` where `a` holds the 2×8 i8 matrix A (row 0 in bytes 0..8, row 1 in
/// 8..16), `b` the 2×8 matrix B likewise; `acc` lanes are `[a0·b0, a0·b1, a1·b0, a1·b1]`.
#[inline]
#[target_feature(enable = "neon,i8mm")]
pub(super) fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `smmla` only reads and writes the named registers; the enclosing function requires
    // the i8mm feature, so the instruction exists.
    unsafe {
        asm!(
            "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// An f16 scale (two little-endian bytes) as f32 with `fcvt`: exact, NaNs made quiet with their
/// payload kept, the same bits as [`f16_le`](crate::quant::cast::f16_le).
#[inline(always)]
pub(super) fn f16_le(bytes: [u8; 2]) -> f32 {
    let bits = u32::from(u16::from_le_bytes(bytes));
    let out: f32;
    // SAFETY: `fmov` and the half-to-single `fcvt` are base ARMv8-A floating point (every AArch64
    // target has it) and touch only the named registers.
    unsafe {
        asm!(
            "fmov {out:s}, {bits:w}",
            "fcvt {out:s}, {out:h}",
            bits = in(reg) bits,
            out = out(vreg) out,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// 16 bytes from a 16-byte array.
#[inline(always)]
pub(super) fn load_i8(bytes: &[i8; 16]) -> int8x16_t {
    // SAFETY: the reference covers exactly the 16 bytes that `ld1` reads (no alignment needed).
    unsafe { vld1q_s8(bytes.as_ptr()) }
}

/// 16 bytes from a 16-byte array.
#[inline(always)]
pub(super) fn load_u8(bytes: &[u8; 16]) -> uint8x16_t {
    // SAFETY: the reference covers exactly the 16 bytes that `ld1` reads (no alignment needed).
    unsafe { vld1q_u8(bytes.as_ptr()) }
}

/// Four f32 into a 4-element array.
#[inline(always)]
pub(super) fn store_f32(out: &mut [f32; 4], v: float32x4_t) {
    // SAFETY: the reference covers exactly the 16 bytes that `st1` writes.
    unsafe { vst1q_f32(out.as_mut_ptr(), v) }
}

/// Byte types whose 16-element pieces [`piece`] hands out.
pub(super) trait Byte: Sized + 'static {
    /// Sixteen zeros, the (never used) fallback of an out-of-range piece.
    const ZEROS: &'static [Self; 16];
}
impl Byte for u8 {
    const ZEROS: &'static [u8; 16] = &[0; 16];
}
impl Byte for i8 {
    const ZEROS: &'static [i8; 16] = &[0; 16];
}

/// The `i`-th 16-byte piece of an array. Indices are constants after inlining and always in
/// range; the zero fallback keeps the code free of a panic path.
#[inline(always)]
pub(super) fn piece<T: Byte, const N: usize>(a: &[T; N], i: usize) -> &[T; 16] {
    let start = 16 * i;
    a.get(start..start + 16)
        .and_then(|s| s.try_into().ok())
        .unwrap_or(T::ZEROS)
}
