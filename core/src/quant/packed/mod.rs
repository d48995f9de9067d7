//! Weight rows packed 16 at a time for products of one or a few columns (a decode step's matvec,
//! a short prompt's matmul).
//!
//! A plain matrix stores each row's blocks one after another, so a SIMD kernel reads one row at a
//! time and reduces every block across a vector's lanes. Packed, the rows of a group of
//! [`GROUP_ROWS`] are interleaved block by block: for each block, its quant bytes a dword per row
//! side by side (dword `j` of rows 0..16 fill the `j`-th 64 bytes), then the rows' f16 `d` (and,
//! for Q4_1, their `m`). A kernel then keeps 16 outputs in the lanes of one vector and never
//! reduces across lanes; with several columns, each block's weight vectors are loaded once for
//! eight of them. The float steps stay the scalar twin's, lane by lane, so every output has the
//! bits of [`matvec`](super::matvec::matvec) of its row and column: the layout changes the speed,
//! never a result.
//!
//! The packed matrix has exactly the plain matrix's size, and its rows keep their plain offsets at
//! group boundaries: rows `16k` up to any later multiple of 16 (or the last row) are the packed
//! matrix of those rows, at the bytes the plain layout gives them. So a caller can split it across
//! threads by groups. The last `rows % 16` rows stay plain (the rows kernel runs them).
//!
//! Q4_0, Q4_1, Q5_0 and Q8_0 are packed; Q8_0's quant bytes are stored `+ 128` (their top bit
//! flipped), the unsigned operand `vpdpbusd` wants, and the kernels take `128 · Σ x` back out
//! exactly. Q5_0's fifth bits (`qh`, bit `v` for value `v`) are stored in another order, so that
//! one shift of a row's 32 bits puts the fifth bits of a quant dword's four bytes at bit 4 of
//! each (`spread_fifth_bits`). The layout is the same at every level, so a matrix packed once
//! runs at any level; levels without a packed kernel ([`has_packed_kernel`]) run the scalar twin,
//! slower than their plain kernels.

#[cfg(test)]
mod tests;

use super::bytes_for;
use super::cast::blocks;
use super::level::Level;
use super::matvec::{matmul_scratch_bytes, matvec_scratch_bytes, quantize_activations};
use super::output_columns::{check_holds, OutputColumns};
use super::table::{Kernels, PackedRowsFn};
use super::typed::{self, check_level};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

use super::activation::BlockQ8_0;
#[cfg(feature = "legacy")]
use super::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0};

/// Rows a packed group interleaves: the f32 lanes of a 512-bit vector.
pub const GROUP_ROWS: usize = 16;

/// The largest block a packed type has (Q8_0's 34 bytes).
const MAX_BLOCK: usize = 34;

/// The largest head a packed type has (Q5_0's `d` and `qh`).
const MAX_HEAD: usize = 6;

/// Where a block's bytes go in its group: a block is `head` bytes of 16-bit fields (`d`, and
/// `m` or Q5_0's `qh` as two halves), then `quants` bytes of quants, which are stored XOR `flip`;
/// with `fifth_bits`, head bytes 2..6 are Q5_0's `qh`, stored spread ([`spread_fifth_bits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    head: usize,
    quants: usize,
    flip: u8,
    fifth_bits: bool,
}

/// Where Q5_0's `qh` sits in its block.
const FIFTH_BITS: core::ops::Range<usize> = 2..6;

/// Q5_0's `qh` (bit `v` for value `v`) in the packed order: byte `b`, bit `k` holds value
/// `4k + b` for `k < 4` (the low nibbles of quant dword `k`) and `16 + 4(k - 4) + b` for `k >= 4`
/// (its high nibbles). So quant dword `j`'s fifth bits are at bit 4 of each byte after a shift
/// left by `4 - j` (low nibbles) or right by `j` (high nibbles).
pub(crate) fn spread_fifth_bits(qh: u32) -> u32 {
    // Bit `b` of a nibble to bit `8b`.
    let spread =
        |nibble: u32| (nibble & 1) | (nibble & 2) << 7 | (nibble & 4) << 14 | (nibble & 8) << 21;
    (0..4).fold(0, |out, k| {
        out | spread((qh >> (4 * k)) & 0xf) << k | spread((qh >> (16 + 4 * k)) & 0xf) << (4 + k)
    })
}

/// [`spread_fifth_bits`] undone.
fn gather_fifth_bits(stored: u32) -> u32 {
    // Bits `8b` to bit `b` of a nibble.
    let gather = |bits: u32| (bits & 1) | (bits >> 7) & 2 | (bits >> 14) & 4 | (bits >> 21) & 8;
    (0..4).fold(0, |out, k| {
        out | gather(stored >> k) << (4 * k) | gather(stored >> (4 + k)) << (16 + 4 * k)
    })
}

/// Q5_0's `qh` in `block` (a block's bytes from its start) through `f`.
fn map_fifth_bits(block: &mut [u8], f: fn(u32) -> u32) {
    if let Some(qh) = block
        .get_mut(FIFTH_BITS)
        .and_then(|qh| <&mut [u8; 4]>::try_from(qh).ok())
    {
        *qh = f(u32::from_le_bytes(*qh)).to_le_bytes();
    }
}

impl Geometry {
    const fn block_bytes(self) -> usize {
        self.head + self.quants
    }

    /// The bytes of one block of all the group's rows.
    pub(crate) const fn group_block_bytes(self) -> usize {
        GROUP_ROWS * self.block_bytes()
    }

    /// Where byte `i` of row `r`'s block goes in its group's block.
    const fn position(self, r: usize, i: usize) -> usize {
        if i < self.head {
            GROUP_ROWS * self.quants + 2 * GROUP_ROWS * (i / 2) + 2 * r + i % 2
        } else {
            let q = i - self.head;
            4 * GROUP_ROWS * (q / 4) + 4 * r + q % 4
        }
    }

    /// The XOR byte `i` of a block is stored with.
    const fn mask(self, i: usize) -> u8 {
        if i < self.head {
            0
        } else {
            self.flip
        }
    }
}

/// A block type that has a packed layout.
pub(crate) trait Packable: Kernels {
    /// Its layout.
    const GEOMETRY: Geometry;
    /// What an activation block's integer start is `-BIAS` times the sum of its quants: the
    /// stored weights are the quants `+ BIAS` (Q4_0's nibbles `+ 8`, Q8_0's bytes `+ 128`).
    const BIAS: i32;
}

#[cfg(feature = "legacy")]
impl Packable for BlockQ4_0 {
    const GEOMETRY: Geometry = Geometry {
        head: 2,
        quants: 16,
        flip: 0,
        fifth_bits: false,
    };
    const BIAS: i32 = 8;
}

#[cfg(feature = "legacy")]
impl Packable for BlockQ4_1 {
    const GEOMETRY: Geometry = Geometry {
        head: 4,
        quants: 16,
        flip: 0,
        fifth_bits: false,
    };
    const BIAS: i32 = 0;
}

#[cfg(feature = "legacy")]
impl Packable for BlockQ5_0 {
    const GEOMETRY: Geometry = Geometry {
        head: 6,
        quants: 16,
        flip: 0,
        fifth_bits: true,
    };
    const BIAS: i32 = 16;
}

impl Packable for BlockQ8_0 {
    const GEOMETRY: Geometry = Geometry {
        head: 2,
        quants: 32,
        flip: 0x80,
        fifth_bits: false,
    };
    const BIAS: i32 = 128;
}

/// `$body` with `$B` the block type of the packed type `t`, or `$other` for any other type: the
/// one place that lists the packed types.
macro_rules! with_packed_type {
    ($t:expr, $B:ident => $body:expr, else $other:expr) => {
        match $t {
            #[cfg(feature = "legacy")]
            GgmlType::Q4_0 => {
                type $B = BlockQ4_0;
                $body
            }
            #[cfg(feature = "legacy")]
            GgmlType::Q4_1 => {
                type $B = BlockQ4_1;
                $body
            }
            #[cfg(feature = "legacy")]
            GgmlType::Q5_0 => {
                type $B = BlockQ5_0;
                $body
            }
            GgmlType::Q8_0 => {
                type $B = BlockQ8_0;
                $body
            }
            _ => $other,
        }
    };
}

/// The layout of `t`, `None` if `t` is not packed (or its kernel family is not compiled in).
fn geometry(t: GgmlType) -> Option<Geometry> {
    with_packed_type!(t, B => Some(B::GEOMETRY), else None)
}

/// Whether `t` has a packed layout.
pub fn packable(t: GgmlType) -> bool {
    geometry(t).is_some()
}

/// Whether `level` (or a level of its fallback chain) has a SIMD kernel for packed `t`; without
/// one the packed product runs the scalar twin, and packing does not pay.
pub fn has_packed_kernel(level: Level, t: GgmlType) -> bool {
    with_packed_type!(t, B => B::packed_rows_kernel(level).is_some(), else false)
}

/// Whether `level` (or a level of its chain) has a SIMD kernel for several columns of packed
/// `t`; without one, [`packed_matmul_quantized`] runs the packed rows kernel column by column.
pub fn has_packed_matmul_kernel(level: Level, t: GgmlType) -> bool {
    with_packed_type!(t, B => B::packed_matmul_kernel(level).is_some(), else false)
}

/// Whether `level` runs the packed matmul of `t` on AMX tiles (the `amx` level's own kernel, as
/// against the VNNI one it falls back to for a type without one); that kernel stays ahead of the
/// plain matmul at any number of columns.
pub fn has_tile_kernel(level: Level, t: GgmlType) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
    if level == Level::Amx && level.is_available() && packable(t) {
        return super::arch::x86_64::amx_has_packed_matmul(t);
    }
    let _ = (level, t);
    false
}

fn unsupported(t: GgmlType) -> Error {
    Error::Unsupported {
        ggml_type: t,
        op: Op::Pack,
    }
}

/// The plain size of a `rows × cols` matrix of `t` (also its packed size), checked.
fn matrix_bytes(t: GgmlType, rows: usize, cols: usize, found: usize) -> Result<usize> {
    let row_bytes = bytes_for(t, cols)?;
    let bytes = row_bytes.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: found as u64,
    })?;
    super::blockwise::same_len(bytes, found)?;
    Ok(row_bytes)
}

/// Packs the row-major `rows × cols` matrix `w` of type `t` into `out` (the same length as `w`).
/// Any `out` works; one that starts on a 64-byte boundary is read faster by the packed kernels
/// (fewer of their 64-byte loads straddle two cache lines).
///
/// Errors: [`Error::Unsupported`] if `t` is not [`packable`], [`Error::PartialBlock`] if `cols`
/// is not a whole number of blocks, [`Error::LengthMismatch`] if `w` or `out` do not fit.
pub fn pack(t: GgmlType, w: &[u8], rows: usize, cols: usize, out: &mut [u8]) -> Result<()> {
    let g = geometry(t).ok_or(unsupported(t))?;
    let row_bytes = matrix_bytes(t, rows, cols, w.len())?;
    super::blockwise::same_len(w.len(), out.len())?;
    let group_bytes = GROUP_ROWS * row_bytes;
    let (bb, gbb) = (g.block_bytes(), g.group_block_bytes());
    let mut w_groups = w.chunks_exact(group_bytes.max(1));
    let mut out_groups = out.chunks_exact_mut(group_bytes.max(1));
    for (w_group, out_group) in w_groups.by_ref().zip(out_groups.by_ref()) {
        for (b, out_block) in out_group.chunks_exact_mut(gbb).enumerate() {
            let (quants, heads) = out_block.split_at_mut(GROUP_ROWS * g.quants);
            for (r, row) in w_group.chunks_exact(row_bytes).enumerate() {
                let block = row.chunks_exact(bb).nth(b).unwrap_or_default();
                let (head, block_quants) = block.split_at_checked(g.head).unwrap_or_default();
                let mut fields = [0u8; MAX_HEAD];
                if let Some(to) = fields.get_mut(..head.len()) {
                    to.copy_from_slice(head);
                }
                if g.fifth_bits {
                    map_fifth_bits(&mut fields, spread_fifth_bits);
                }
                // The 16-bit fields: field `i` of row `r` at `32 i + 2 r` after the quants.
                for (i, field) in fields
                    .get(..g.head)
                    .unwrap_or_default()
                    .chunks_exact(2)
                    .enumerate()
                {
                    let at = 2 * GROUP_ROWS * i + 2 * r;
                    if let Some(to) = heads.get_mut(at..at + 2) {
                        to.copy_from_slice(field);
                    }
                }
                // Quant dword `j` of row `r` at `64 j + 4 r`.
                for (dword, to) in block_quants
                    .chunks_exact(4)
                    .zip(quants.chunks_exact_mut(4 * GROUP_ROWS))
                {
                    if let Some(to) = to.get_mut(4 * r..4 * r + 4) {
                        for (to, &byte) in to.iter_mut().zip(dword) {
                            *to = byte ^ g.flip;
                        }
                    }
                }
            }
        }
    }
    // The last `rows % 16` rows, plain.
    let (w_tail, out_tail) = (w_groups.remainder(), out_groups.into_remainder());
    if let Some(out_tail) = out_tail.get_mut(..w_tail.len()) {
        out_tail.copy_from_slice(w_tail);
    }
    Ok(())
}

/// Row `r`'s block in a packed group's block `group_block` back in the plain layout.
fn unpack_block(g: Geometry, group_block: &[u8], r: usize) -> [u8; MAX_BLOCK] {
    let mut block = [0u8; MAX_BLOCK];
    for (i, byte) in block.iter_mut().take(g.block_bytes()).enumerate() {
        *byte = group_block.get(g.position(r, i)).copied().unwrap_or(0) ^ g.mask(i);
    }
    if g.fifth_bits {
        map_fifth_bits(&mut block, gather_fifth_bits);
    }
    block
}

/// The packed layout's scalar twin ([`PackedRowsFn`]): each row's blocks taken back out of the
/// group and dotted one at a time with the scalar vec_dot, the terms added in block order from
/// `0.0` as vec_dot adds them. (A one-block vec_dot returns `0.0 + term`, which differs from the
/// term only for `-0.0`; adding `+0.0` or `-0.0` to a sum that starts at `+0.0` gives the same
/// bits, since such a sum is never `-0.0`.)
fn scalar_twin<B: Packable>(
    packed: &[u8],
    row_blocks: usize,
    x: &[B::Activation],
    out: &mut [f32],
) {
    let g = B::GEOMETRY;
    let Some(vec_dot) = B::vec_dot_kernel(Level::Scalar) else {
        return;
    };
    let per = B::ACTIVATION_BLOCKS;
    let group_bytes = row_blocks * g.group_block_bytes();
    if group_bytes == 0 {
        out.fill(0.0);
        return;
    }
    for (group, out) in packed
        .chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(GROUP_ROWS))
    {
        for (r, y) in out.iter_mut().enumerate() {
            let mut sumf = 0.0f32;
            for (group_block, xb) in group
                .chunks_exact(g.group_block_bytes())
                .zip(x.chunks_exact(per))
            {
                let block = unpack_block(g, group_block, r);
                if let Ok(wb) = blocks::<B>(block.get(..g.block_bytes()).unwrap_or_default()) {
                    sumf += vec_dot(wb, xb);
                }
            }
            *y = sumf;
        }
    }
}

/// The packed-rows kernel of `level` for `B`, or the scalar twin.
fn kernel<B: Packable>(level: Level) -> PackedRowsFn<B::Activation> {
    B::packed_rows_kernel(level).unwrap_or(scalar_twin::<B>)
}

/// `y = W xq` for the packed `rows × cols` matrix `packed` of type `t` (made by [`pack`], or a
/// run of its groups), with `xq` from
/// [`quantize_activations`]: every output has the bits of
/// [`matvec_quantized`](super::matvec::matvec_quantized) on the plain matrix.
///
/// Errors: those of [`pack`], [`Error::LevelUnavailable`] if the CPU lacks `level`, and
/// [`Error::LengthMismatch`] if `xq` or `y` do not fit.
pub fn packed_matvec_quantized(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    xq: &[u8],
    y: &mut [f32],
) -> Result<()> {
    check_level(level)?;
    geometry(t).ok_or(unsupported(t))?;
    let row_bytes = matrix_bytes(t, rows, cols, packed.len())?;
    super::blockwise::same_len(matvec_scratch_bytes(t, cols)?, xq.len())?;
    super::blockwise::same_len(rows, y.len())?;
    let whole = rows - rows % GROUP_ROWS;
    let (groups, tail) = packed
        .split_at_checked(whole * row_bytes)
        .unwrap_or_default();
    let (y_groups, y_tail) = y.split_at_mut_checked(whole).unwrap_or_default();
    let run = Run {
        level,
        groups,
        tail,
        tail_rows: rows - whole,
        cols,
        xq,
        y_groups,
        y_tail,
    };
    with_packed_type!(t, B => run.go::<B>(), else Err(unsupported(t)))
}

/// One packed product, its lengths checked.
struct Run<'a> {
    level: Level,
    groups: &'a [u8],
    tail: &'a [u8],
    tail_rows: usize,
    cols: usize,
    xq: &'a [u8],
    y_groups: &'a mut [f32],
    y_tail: &'a mut [f32],
}

impl Run<'_> {
    fn go<B: Packable>(self) -> Result<()> {
        let x = blocks::<B::Activation>(self.xq)?;
        let row_blocks = self.cols / B::VALUES;
        kernel::<B>(self.level)(self.groups, row_blocks, x, self.y_groups);
        typed::matvec_quantized_at::<B>(
            self.level,
            self.tail,
            self.tail_rows,
            self.cols,
            self.xq,
            self.y_tail,
        )
    }
}

/// [`packed_matvec_quantized`] with `x` (`cols` values) quantized into the front of `scratch`
/// first ([`matvec_scratch_bytes`] bytes), as [`matvec_at`](super::matvec::matvec_at) does.
#[allow(clippy::too_many_arguments)]
pub fn packed_matvec_at(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    geometry(t).ok_or(unsupported(t))?;
    let xq = quantize_activations(level, t, cols, x, scratch)?;
    packed_matvec_quantized(level, t, packed, rows, cols, xq, y)
}

/// Bytes of the activations of a packed matmul of `n` columns of `cols` values: the columns
/// quantized one after another ([`matmul_scratch_bytes`]), then each of their blocks' integer
/// start (little-endian i32), which [`activation_starts`] computes.
pub fn packed_activation_bytes(t: GgmlType, cols: usize, n: usize) -> Result<usize> {
    geometry(t).ok_or(unsupported(t))?;
    let quantized = matmul_scratch_bytes(t, cols, n)?;
    let blocks = cols / (t.block_size() as usize).max(1);
    blocks
        .checked_mul(n)
        .and_then(|b| b.checked_mul(4))
        .and_then(|s| s.checked_add(quantized))
        .ok_or(Error::LengthMismatch {
            expected: u64::MAX,
            found: n as u64,
        })
}

/// The integer starts of the quantized activation blocks `xq` (whole blocks of `t`'s vec-dot
/// type) into `starts` (4 bytes a block), for callers that quantize the columns in parts.
pub fn activation_starts(t: GgmlType, xq: &[u8], starts: &mut [u8]) -> Result<()> {
    with_packed_type!(t, B => starts_of::<B>(xq, starts), else Err(unsupported(t)))
}

/// The sum of a block's 32 signed quants: SSE2 on x86_64 (about 2.5x faster than the compiler's
/// widening of each byte there), else [`block_sum_scalar`].
fn block_sum(quants: &[u8; 32]) -> i32 {
    #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
    return super::arch::x86_64::sum_signed_bytes(quants);
    #[cfg(not(all(target_arch = "x86_64", not(miniquant_disable_simd))))]
    block_sum_scalar(quants)
}

/// [`block_sum`]'s scalar twin.
#[cfg(any(test, not(all(target_arch = "x86_64", not(miniquant_disable_simd)))))]
pub(crate) fn block_sum_scalar(quants: &[u8; 32]) -> i32 {
    quants.iter().map(|&q| i32::from(q as i8)).sum()
}

fn starts_of<B: Packable>(xq: &[u8], starts: &mut [u8]) -> Result<()> {
    let x = blocks::<B::Activation>(xq)?;
    super::blockwise::same_len(4 * x.len(), starts.len())?;
    if B::BIAS == 0 {
        // Q4_1's weights are stored as they are: every start is 0, whatever the quants sum to.
        starts.fill(0);
        return Ok(());
    }
    for (xb, start) in x.iter().zip(starts.chunks_exact_mut(4)) {
        // An activation block's quants are its last 32 bytes (Q8_0: after `d`; Q8_1: after `d`,
        // `s`).
        let Some(quants) = bytemuck::bytes_of(xb).last_chunk::<32>() else {
            continue;
        };
        let sum = block_sum(quants);
        start.copy_from_slice(&(-B::BIAS * sum).to_le_bytes());
    }
    Ok(())
}

/// `Y = W X` for the packed `rows × cols` matrix `packed` of type `t` and `n` columns, `xqs` from
/// [`quantize_packed_activations`] (or quantized in parts, with [`activation_starts`]): column
/// `j` of `y` (`n × rows`) has the bits of [`packed_matvec_quantized`] of column `j`, which are
/// the plain matvec's.
#[allow(clippy::too_many_arguments)]
pub fn packed_matmul_quantized(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xqs: &[u8],
    y: &mut [f32],
) -> Result<()> {
    let mut y = OutputColumns::whole(y, rows, n)?;
    packed_matmul_quantized_into(level, t, packed, rows, cols, n, xqs, &mut y)
}

/// [`packed_matmul_quantized`] into the columns of `y`, which holds `rows` rows of each of the
/// `n` columns (a run of rows of a larger output: threads that split the rows write their pieces
/// straight into its columns).
#[allow(clippy::too_many_arguments)]
pub fn packed_matmul_quantized_into(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xqs: &[u8],
    y: &mut OutputColumns<'_, '_>,
) -> Result<()> {
    check_level(level)?;
    geometry(t).ok_or(unsupported(t))?;
    let row_bytes = matrix_bytes(t, rows, cols, packed.len())?;
    super::blockwise::same_len(packed_activation_bytes(t, cols, n)?, xqs.len())?;
    check_holds(y, rows, n)?;
    let (xq, starts) = xqs
        .split_at_checked(matmul_scratch_bytes(t, cols, n)?)
        .unwrap_or_default();
    let whole = rows - rows % GROUP_ROWS;
    let (groups, tail) = packed
        .split_at_checked(whole * row_bytes)
        .unwrap_or_default();
    let run = MatmulRun {
        level,
        groups,
        tail,
        rows,
        whole,
        cols,
        n,
        xq,
        starts,
        y,
    };
    with_packed_type!(t, B => run.go::<B>(), else Err(unsupported(t)))
}

/// One packed matmul, its lengths checked.
struct MatmulRun<'a, 'y, 'c> {
    level: Level,
    groups: &'a [u8],
    tail: &'a [u8],
    rows: usize,
    whole: usize,
    cols: usize,
    n: usize,
    xq: &'a [u8],
    starts: &'a [u8],
    y: &'a mut OutputColumns<'y, 'c>,
}

impl MatmulRun<'_, '_, '_> {
    fn go<B: Packable>(self) -> Result<()> {
        let x = blocks::<B::Activation>(self.xq)?;
        let starts: &[[u8; 4]] = bytemuck::try_cast_slice(self.starts).unwrap_or_default();
        let row_blocks = self.cols / B::VALUES;
        let column_bytes = self.xq.len() / self.n.max(1);
        if row_blocks == 0 {
            for c in 0..self.n {
                self.y.column(c).unwrap_or_default().fill(0.0);
            }
            return Ok(());
        }
        let per = row_blocks * B::ACTIVATION_BLOCKS;
        match B::packed_matmul_kernel(self.level) {
            Some(kernel) => kernel(
                self.groups,
                row_blocks,
                x,
                starts,
                self.n,
                &mut self.y.rows_at(0, self.whole),
            ),
            // The packed rows kernel (or its scalar twin) column by column.
            None => {
                let kernel = kernel::<B>(self.level);
                for c in 0..self.n {
                    let xc = x.get(c * per..(c + 1) * per).unwrap_or_default();
                    let column = self.y.run(c, 0, self.whole).unwrap_or_default();
                    kernel(self.groups, row_blocks, xc, column);
                }
            }
        }
        // The last `rows % 16` rows, plain, column by column.
        for c in 0..self.n {
            let xq = self.xq.get(c * column_bytes..(c + 1) * column_bytes);
            let tail_rows = self.rows - self.whole;
            let tail_out = self.y.run(c, self.whole, tail_rows).unwrap_or_default();
            typed::matvec_quantized_at::<B>(
                self.level,
                self.tail,
                tail_rows,
                self.cols,
                xq.unwrap_or_default(),
                tail_out,
            )?;
        }
        Ok(())
    }
}

/// Quantizes the `n` columns `x` (`n × cols` values) into the front of `scratch` with their
/// blocks' starts ([`packed_activation_bytes`] bytes) and returns those bytes.
pub fn quantize_packed_activations<'s>(
    level: Level,
    t: GgmlType,
    cols: usize,
    n: usize,
    x: &[f32],
    scratch: &'s mut [u8],
) -> Result<&'s [u8]> {
    let needed = packed_activation_bytes(t, cols, n)?;
    let quantized = matmul_scratch_bytes(t, cols, n)?;
    let available = scratch.len();
    let all = scratch.get_mut(..needed).ok_or(Error::LengthMismatch {
        expected: needed as u64,
        found: available as u64,
    })?;
    let (xq, starts) = all.split_at_mut_checked(quantized).unwrap_or_default();
    let values = cols.checked_mul(n).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: x.len() as u64,
    })?;
    let xq = quantize_activations(level, t, values, x, xq)?;
    activation_starts(t, xq, starts)?;
    Ok(all)
}

/// [`packed_matmul_quantized`] with the columns quantized into `scratch` first
/// ([`packed_activation_bytes`] bytes).
#[allow(clippy::too_many_arguments)]
pub fn packed_matmul_at(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    let xqs = quantize_packed_activations(level, t, cols, n, x, scratch)?;
    packed_matmul_quantized(level, t, packed, rows, cols, n, xqs, y)
}
