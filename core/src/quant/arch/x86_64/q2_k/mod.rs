//! Q2_K: vec_dot, multi-row, dequantize and quantize, at AVX2 (the VNNI level uses these); its
//! VNNI matmul in [`matmul`].
//!
//! The dot takes one exact integer total per block (each sub-block's sum times its 4-bit scale),
//! then the scalar twin's float steps; its float steps are one term per super-block, like a
//! legacy block's, so the multi-row kernel runs eight rows in the lanes (`legacy_rows`).
//! The dequantizer: a sub-block has four values `dl·q − ml`, an eight-entry table formed with the
//! twin's float steps and looked up by `vpermps`. The quantizer runs the sixteen
//! `make_qkx2_quants` searches (sub-blocks of 16, levels to 3, weights `|x|`) eight side by side
//! by the lane search of `qkx2_lanes.rs`, the two halves of a super-block interleaved; the rest
//! is the scalar twin's `q2_k::block_from_fits` (same bytes as `q2_k::quantize_block`).

use core::arch::x86_64::*;

mod matmul;

pub(super) use matmul::matmul_vnni;

use super::drivers::{legacy_rows, row_scales, Summary, LANES as ROWS};
use super::qkx2_lanes::{
    abs, add, all, and, any, div, eq, ge, gt, lane_ints, level_int, load_lanes, lt, max, min, mul,
    neg, or, qkx2_lane_search, round, select, splat, sub, to_float, unordered, zero_where, Mask, F,
    I,
};
use super::tokens::{kernel, Avx2, Avx512Vnni};
use super::vector::{
    f16_le, hsum_i32, load16, load32, opaque, part, scale_of, scaled8, store_at, transpose_sums,
    widen8,
};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::common::Qkx2Search;
use crate::quant::k_quants::q2_k::{self, BlockQ2K, Q2K_SEARCH};
use bytemuck::Zeroable;

/// A Q2_K block's `Σ bsums·mins` against its activation block, as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
fn q2_k_mins_products(wb: &BlockQ2K, xb: &BlockQ8K) -> __m256i {
    let high = _mm_and_si128(_mm_srli_epi16::<4>(load16(&wb.scales)), _mm_set1_epi8(0x0f));
    let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
    _mm256_madd_epi16(load32(bsums), _mm256_cvtepu8_epi16(high))
}

/// Group g of half h covers sub-blocks `s = 8h + 2g` (low 128 bits) and `s + 1` (high): the
/// shuffle that puts their scale bytes into the low byte of every i16 of their half (0x80 zeroes
/// the high byte).
#[inline]
#[target_feature(enable = "avx2")]
fn q2_k_scale_pick(s: i8) -> __m256i {
    let (a, b, z) = (s, s + 1, -128);
    _mm256_setr_epi8(
        a, z, a, z, a, z, a, z, a, z, a, z, a, z, a, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z,
        b, z,
    )
}

/// A Q2_K block's `Σ scale·Σ q·x` over its sixteen sub-blocks, as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
fn q2_k_scaled_sums(wb: &BlockQ2K, xb: &BlockQ8K) -> __m256i {
    let low2 = _mm256_set1_epi8(3);
    let packed = _mm256_broadcastsi128_si256(load16(&wb.scales));
    // Opaque: its halves are equal, and LLVM would narrow the scale shuffles.
    let scales = opaque(_mm256_and_si256(packed, _mm256_set1_epi8(0x0f)));
    let mut acc = _mm256_setzero_si256();
    let halves = wb.qs.chunks_exact(32).zip(xb.qs.chunks_exact(128));
    for ((qs, xq), h) in halves.zip(0..) {
        let q = load32(part(qs, 0));
        let groups = [
            q,
            _mm256_srli_epi16::<2>(q),
            _mm256_srli_epi16::<4>(q),
            _mm256_srli_epi16::<6>(q),
        ];
        for (g, shifted) in groups.into_iter().enumerate() {
            let qg = _mm256_and_si256(shifted, low2);
            // maddubs of 2-bit quants: pairs below 2·3·128, exact; pairs stay in a sub-block.
            let products = _mm256_maddubs_epi16(qg, load32(part(xq, 32 * g)));
            let scale = _mm256_shuffle_epi8(scales, q2_k_scale_pick(8 * h + 2 * g as i8));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(products, scale));
        }
    }
    acc
}

kernel! {
    /// `ggml_vec_dot_q2_K_q8_K_generic`: one exact integer total per block (each sub-block's sum times
    /// its 4-bit scale), then `sumf += dall * isum - dmin * summs`. Those float steps, and the two
    /// horizontal sums before them, run one block late (as the other K-quant kernels' do), so that the
    /// block's long tail does not hold the scheduler while the next block's loads wait.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot(_t: Avx2, w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        // The previous block's integer sums (as vectors) and its `dall`, `dmin`; zeros at first,
        // which add `+0·0 − 0·0` to `+0`: the same bits.
        let mut pending = (
            _mm256_setzero_si256(),
            _mm256_setzero_si256(),
            0.0f32,
            0.0f32,
        );
        for (wb, xb) in w.iter().zip(x) {
            let (acc, mins_products) = (q2_k_scaled_sums(wb, xb), q2_k_mins_products(wb, xb));
            let (acc_before, mins_before, dall, dmin) = pending;
            sumf += dall * hsum_i32(acc_before) as f32 - dmin * hsum_i32(mins_before) as f32;
            pending = (
                acc,
                mins_products,
                xb.scale() * f16_le(wb.d),
                xb.scale() * f16_le(wb.dmin),
            );
        }
        let (acc, mins_products, dall, dmin) = pending;
        sumf + (dall * hsum_i32(acc) as f32 - dmin * hsum_i32(mins_products) as f32)
    }
}

/// Activation blocks (rows of up to 2048 values) the rows kernel reads from a copy in its own
/// frame (2336 bytes; in the build measured, the copy and the spill slots do not overlap mod
/// 4 KiB: `objdump -d` of `q2_k::rows*::body`, see docs/kernel-experiments.md).
const LOCAL_BLOCKS: usize = 8;

/// A value at the start of a 4 KiB page: the activations' copy, so that the kernel's whole frame
/// (the copy, the summaries and the spill slots at fixed distances from it) sits at the same
/// place within its pages on every call, wherever the stack pointer is. Without it, processes
/// whose stack started at certain offsets within a page ran this kernel far slower
/// (docs/kernel-experiments.md, "Q2_K at n = 1, again").
#[repr(C, align(4096))]
struct PageAligned<T>(T);

/// The Q2_K rows kernel's body, inlined into each level's entry: eight rows in the lanes share
/// one transpose of their integer sums and one set of float steps.
///
/// # Safety
/// The CPU must have AVX2 and F16C (the callers are `kernel!` entries whose tokens prove them).
#[inline(always)]
unsafe fn q2_k_rows(
    w: &[BlockQ2K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: impl Fn(&[BlockQ2K], &[BlockQ8K]) -> f32,
) {
    // A row of up to `LOCAL_BLOCKS` activation blocks is read from a copy in this frame: the
    // activations are read again for every group of eight rows, and where they lay 4 KiB-aliased
    // against the kernel's spill slots (a matter of the heap's and the stack's addresses, so of
    // the process, the thread and the call path) the loads waited on the spill stores: the
    // pool's worker took 52.5-53.2 instead of 43.2-44.1 us for 1024 rows of 2048
    // (docs/kernel-experiments.md, "Q2_K at n = 1"). Inside one frame the distances are fixed
    // when the kernel is built, not by where the heap and the stack put things. `black_box` keeps
    // LLVM from reading the caller's copy in place of this one.
    let mut local = PageAligned([BlockQ8K::zeroed(); LOCAL_BLOCKS]);
    let x = match local.0.get_mut(..x.len()) {
        Some(copy) => {
            copy.copy_from_slice(x);
            core::hint::black_box(&*copy)
        }
        None => x,
    };
    // SAFETY: AVX2 and F16C, the features of the functions called here, are this function's
    // precondition.
    unsafe {
        // Q2_K's float steps are per super-block, as the legacy types' are per block: eight rows
        // in the lanes share one transpose of their integer sums and one set of float steps.
        legacy_rows(
            w,
            row_blocks,
            x,
            out,
            |xb| Summary {
                d: xb.scale(),
                s: 0.0,
                bias_sum: 0,
            },
            // Loops, not `bs.map`: through `map`'s closure LLVM did not inline the block sums.
            |bs, xb, _| {
                let mut sums = [_mm256_setzero_si256(); ROWS];
                for (sum, wb) in sums.iter_mut().zip(bs) {
                    *sum = q2_k_scaled_sums(wb, xb);
                }
                transpose_sums(&sums)
            },
            // `dall * isum - dmin * summs`, `dall = dx * d`, `dmin = dx * dmin`: the scalar
            // order.
            |isum, bs, xb, a| {
                let mut products = [_mm256_setzero_si256(); ROWS];
                for (p, wb) in products.iter_mut().zip(bs) {
                    *p = q2_k_mins_products(wb, xb);
                }
                let summs = transpose_sums(&products);
                let dx = _mm256_set1_ps(a.d);
                let dall = _mm256_mul_ps(dx, row_scales(bs, |b| b.d));
                let dmin = _mm256_mul_ps(dx, row_scales(bs, |b| b.dmin));
                _mm256_sub_ps(
                    _mm256_mul_ps(dall, isum),
                    _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summs)),
                )
            },
            single,
        )
    }
}

kernel! {
    /// Q2_K rows, AVX2: eight rows in the lanes share one transpose of their integer sums and one
    /// set of float steps.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn rows(
        t: Avx2,
        w: &[BlockQ2K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ) {
        // SAFETY: the token `t` proves AVX2 and F16C.
        unsafe { q2_k_rows(w, row_blocks, x, out, |w, x| vec_dot(t, w, x)) }
    }
}

kernel! {
    /// Q2_K rows at the VNNI level: the AVX2 kernel's instructions and order (the same bits),
    /// compiled with AVX-512 VL so that LLVM has 32 vector registers.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn rows_vnni(
        t: Avx512Vnni,
        w: &[BlockQ2K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ) {
        // SAFETY: the token `t` proves AVX-512 VNNI, so AVX2 and F16C.
        unsafe { q2_k_rows(w, row_blocks, x, out, |w, x| vec_dot(t.avx2(), w, x)) }
    }
}

/// Q2_K's sixteen `dl = d·(sc & 15)` and `ml = dmin·(sc >> 4)`, the scalar twin's products.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q2_k_scales(block: &BlockQ2K) -> ([f32; 16], [f32; 16]) {
    let d = _mm256_set1_ps(f16_le(block.d));
    let min = _mm256_set1_ps(f16_le(block.dmin));
    let mut low = [0u8; 16];
    let mut high = [0u8; 16];
    for ((l, h), &sc) in low.iter_mut().zip(&mut high).zip(&block.scales) {
        (*l, *h) = (sc & 0x0f, sc >> 4);
    }
    let mut dl = [0.0f32; 16];
    let mut ml = [0.0f32; 16];
    store_at(&mut dl, 0, scaled8(part(&low, 0), false, d));
    store_at(&mut dl, 8, scaled8(part(&low, 8), false, d));
    store_at(&mut ml, 0, scaled8(part(&high, 0), false, min));
    store_at(&mut ml, 8, scaled8(part(&high, 8), false, min));
    (dl, ml)
}

/// `dequantize_row_q2_K` for one block. Sub-block `k` (16 values) is the table `dl·q − ml`,
/// `q = 0, 1, 2, 3` (repeated in lanes 4..8, so that an index's third bit, which belongs to the
/// next quant, picks the same entry). Half `h` of the block reads the 32 `qs` bytes at `32h`; its
/// 32-value chunk `c` takes bits `2c..2c+2` of them, bytes `0..16` in sub-block `8h + 2c`,
/// `16..32` in the next.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q2_k_block(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    let levels = _mm256_setr_ps(0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0);
    let (dl, ml) = q2_k_scales(block);
    let table = |k: usize| {
        let scaled = _mm256_mul_ps(_mm256_set1_ps(scale_of(&dl, k)), levels);
        _mm256_sub_ps(scaled, _mm256_set1_ps(scale_of(&ml, k)))
    };
    for half in 0..2 {
        let qs: &[u8; 32] = part(&block.qs, 32 * half);
        // Lane i of word g: byte 8g + i, shifted right by 2c for chunk c.
        let mut w0 = widen8(part(qs, 0));
        let mut w1 = widen8(part(qs, 8));
        let mut w2 = widen8(part(qs, 16));
        let mut w3 = widen8(part(qs, 24));
        for chunk in 0..4 {
            let (first, second) = (table(8 * half + 2 * chunk), table(8 * half + 2 * chunk + 1));
            let at = 128 * half + 32 * chunk;
            store_at(out, at, _mm256_permutevar8x32_ps(first, w0));
            store_at(out, at + 8, _mm256_permutevar8x32_ps(first, w1));
            store_at(out, at + 16, _mm256_permutevar8x32_ps(second, w2));
            store_at(out, at + 24, _mm256_permutevar8x32_ps(second, w3));
            w0 = _mm256_srli_epi32::<2>(w0);
            w1 = _mm256_srli_epi32::<2>(w1);
            w2 = _mm256_srli_epi32::<2>(w2);
            w3 = _mm256_srli_epi32::<2>(w3);
        }
    }
}

kernel! {
    /// `dequantize_row_q2_K` at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize(_t: Avx2, blocks: &[BlockQ2K], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
            dequantize_q2_k_block(block, values);
        }
    }
}

/// Sub-blocks in half a super-block, one per lane of the search.
const LANES: usize = 8;

/// Q2_K's weights: `|x|`.
#[inline]
#[target_feature(enable = "avx2")]
fn abs_weights(x: &Columns) -> Columns {
    let mut w = *x;
    for v in &mut w {
        *v = abs(*v);
    }
    w
}

qkx2_lane_search!("avx2", 16, abs_weights);

/// One super-block: both halves' searches interleaved, then the scalar twin's assembly.
#[inline]
#[target_feature(enable = "avx2")]
fn quantize_block(x: &[f32; QK_K]) -> BlockQ2K {
    let search = Q2K_SEARCH;
    let (first, second) = x.split_at(QK_K / 2);
    let mut lanes = [
        start(search, columns(first)),
        start(search, columns(second)),
    ];
    if search.nstep >= 1 {
        for is in 0..=search.nstep {
            trial(search, is, &mut lanes);
        }
    }
    let mut scales = [0.0f32; QK_K / 16];
    let mut mins = [0.0f32; QK_K / 16];
    let mut levels = [0u8; QK_K];
    let halves = lanes
        .iter()
        .zip(scales.chunks_exact_mut(LANES))
        .zip(mins.chunks_exact_mut(LANES))
        .zip(levels.chunks_exact_mut(QK_K / 2));
    for (((s, scales), mins), levels) in halves {
        let (scale, neg_min, columns) = finish(search, s);
        // SAFETY: `scales` and `mins` hold eight f32 (`chunks_exact_mut`); `storeu` has no
        // alignment requirement.
        unsafe {
            _mm256_storeu_ps(scales.as_mut_ptr(), scale);
            _mm256_storeu_ps(mins.as_mut_ptr(), neg_min);
        }
        scatter_levels(&columns, levels);
    }
    q2_k::block_from_fits(x, &scales, &mins, levels)
}

kernel! {
    /// `quantize_row_q2_K_ref` at AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_q2_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ2K]) {
        for (x, out) in values.chunks_exact(QK_K).zip(blocks) {
            if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
                *out = quantize_block(x);
            }
        }
    }
}
