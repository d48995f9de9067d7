//! What a repacked weight layout would give our one-column matvec: Q4_0 and Q4_1 rows
//! interleaved by 16 (per block, the rows' quant dwords side by side, then their f16 scales and
//! minimums: the plain layout's bytes, reordered), so that an AVX-512 VNNI kernel keeps 16 outputs
//! in the lanes of one vector: per block eight `vpdpbusd` (nibbles as unsigned bytes against the
//! broadcast activation dwords; Q4_0 adds `-8 · Σx` back: the exact integer sum) and the scalar
//! twin's float step lane by lane (Q4_0 `sumi · d_w · d_x`, Q4_1 `(d_w · d_x) · sumi + m_w · s_x`,
//! then `sumf +`, unfused), so every output keeps `matvec`'s bits. That is the layout of ggml's
//! AMX buffer type, whose one-column path (AVX-512 VNNI over such rows) ran 1.3-2.2x our Q4_0 and
//! Q4_1 matvec on an Intel Xeon with AMX (BENCHMARKS.md, "ggml's AMX buffer type").
//!
//! A measurement, not a library kernel: the bench packs the rows, checks every output's bits
//! against `matvec` and times both (activations quantized inside each timed call), alternated in
//! rounds, best call of each; with `--ggml` also ggml's AMX buffer on the same shapes
//! (`scripts/ggml-repack-gemm.sh` with `GGML_EXTRA_BUFFER=AMX`, a CPU with AMX).
//!
//! Also at AVX2: the same packed bytes, 8 rows a half-vector (`maddubs`, then one `madd` a block).
//! And Q8_0 at AVX-512 (its own packing: the activations go in as `x + 128`, each row's
//! `-128 · Σ q` packed beside its scale takes that back out).
//!
//! Run: `RUSTFLAGS="-C target-cpu=native" cargo bench -p miniquant-tests --bench interleaved`.

use miniquant::quant::{self, level, Level};
use miniquant::GgmlType;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rows a packed group interleaves: the f32 lanes of one 512-bit vector.
const GROUP: usize = 16;

/// A type's block layouts: Q4_0 (f16 `d`, 16 bytes of nibbles: element `i` low, `i + 16` high)
/// against Q8_0 activations (f16 `d`, 32 i8), or Q4_1 (f16 `d`, f16 `m`, the nibbles) against Q8_1
/// (f16 `d`, f16 `s`, 32 i8).
#[derive(Clone, Copy)]
struct Layout {
    t: GgmlType,
    /// Whether blocks carry a minimum (`m`; the activations then carry `s`).
    min: bool,
}

impl Layout {
    /// Where a weight block's nibbles start (after `d`, and `m` if any).
    fn quants_at(self) -> usize {
        if self.min {
            4
        } else {
            2
        }
    }
    fn block_bytes(self) -> usize {
        self.quants_at() + 16
    }
    /// A packed group's block: four 64-byte vectors of quant dwords, then the 16 rows' f16 `d`
    /// (and `m`).
    fn packed_block(self) -> usize {
        4 * 64 + 16 * self.quants_at()
    }
    fn x_block(self) -> usize {
        self.quants_at() + 32
    }
}

const Q4_0: Layout = Layout {
    t: GgmlType::Q4_0,
    min: false,
};
const Q4_1: Layout = Layout {
    t: GgmlType::Q4_1,
    min: true,
};
/// Q8_0's activations have Q4_0's layout; its weights are packed by [`pack_q8_0`].
const Q8_0: Layout = Layout {
    t: GgmlType::Q8_0,
    min: false,
};

/// Q8_0 (f16 `d`, 32 i8) against Q8_0 activations: packed per group and block as eight 64-byte
/// vectors of quant dwords (vector `j`: dword `j` of each of the 16 rows), the rows' f16 `d`, and
/// each row's `-128 · Σ q` as i32. `vpdpbusd` wants one unsigned side: the activations go in as
/// `x + 128` (their bytes with the top bit flipped), and the correction takes `128 · Σ q` back
/// out, so each lane's sum is the exact `Σ q · x`.
const Q8_0_PACKED: usize = 8 * 64 + 2 * GROUP + 4 * GROUP;

/// The whole groups of 16 Q8_0 rows of `w` in that layout.
fn pack_q8_0(w: &[u8], rows: usize, blocks: usize) -> Vec<u8> {
    let groups = rows / GROUP;
    let mut packed = vec![0u8; groups * blocks * Q8_0_PACKED];
    for g in 0..groups {
        for b in 0..blocks {
            let out = &mut packed[(g * blocks + b) * Q8_0_PACKED..][..Q8_0_PACKED];
            for r in 0..GROUP {
                let block = &w[((g * GROUP + r) * blocks + b) * 34..][..34];
                for j in 0..8 {
                    out[64 * j + 4 * r..][..4].copy_from_slice(&block[2 + 4 * j..][..4]);
                }
                out[512 + 2 * r..][..2].copy_from_slice(&block[..2]);
                let sum: i32 = block[2..].iter().map(|&q| i32::from(q as i8)).sum();
                out[544 + 4 * r..][..4].copy_from_slice(&(-128 * sum).to_le_bytes());
            }
        }
    }
    packed
}

/// Shapes (rows × cols): 2048², SmolLM2-135M's and Gemma 3 270M's.
const SHAPES: [(usize, usize); 6] = [
    (2048, 2048),
    (576, 576),
    (1536, 576),
    (576, 1536),
    (2048, 640),
    (640, 2048),
];

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// The whole groups of 16 rows of `w` (row-major, `blocks` blocks a row) in packed layout:
/// group `g`, block `b` at `(g · blocks + b) · packed_block`: vector `j` (0..4) holds dword `j`
/// of each row's nibbles (row `r` at byte `4r`: elements `4j..4j + 4` low, `16 + 4j..` high),
/// then the rows' `d` and, for Q4_1, their `m` (f16, as they are).
fn pack(layout: Layout, w: &[u8], rows: usize, blocks: usize) -> Vec<u8> {
    let (block_bytes, packed_block, at) = (
        layout.block_bytes(),
        layout.packed_block(),
        layout.quants_at(),
    );
    let groups = rows / GROUP;
    let mut packed = vec![0u8; groups * blocks * packed_block];
    for g in 0..groups {
        for b in 0..blocks {
            let out = &mut packed[(g * blocks + b) * packed_block..][..packed_block];
            for r in 0..GROUP {
                let block = &w[((g * GROUP + r) * blocks + b) * block_bytes..][..block_bytes];
                for j in 0..4 {
                    out[64 * j + 4 * r..][..4].copy_from_slice(&block[at + 4 * j..][..4]);
                }
                out[256 + 2 * r..][..2].copy_from_slice(&block[..2]);
                if layout.min {
                    out[288 + 2 * r..][..2].copy_from_slice(&block[2..4]);
                }
            }
        }
    }
    packed
}

/// Per activation block: `d` as f32, the integer sum's starting value (Q4_0: `-8 · Σ q`, which
/// turns the unsigned nibbles' dot into the signed quants' one; Q4_1: 0) and `s` as f32 (Q4_1).
fn block_terms(layout: Layout, xq: &[u8], blocks: usize, terms: &mut Vec<(f32, i32, f32)>) {
    terms.clear();
    let (x_block, at) = (layout.x_block(), layout.quants_at());
    terms.extend((0..blocks).map(|b| {
        let block = &xq[b * x_block..][..x_block];
        if layout.min {
            return (f16_at(block, 0), 0, f16_at(block, 2));
        }
        let sum: i32 = block[at..].iter().map(|&q| i32::from(q as i8)).sum();
        (f16_at(block, 0), -8 * sum, 0.0)
    }));
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni")
    }

    /// The packed groups against the activations `xq` with their `terms`: group `g`'s 16
    /// outputs to `y[16g..16g + 16]`.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI and F16C ([`available`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    pub unsafe fn matvec(
        layout: Layout,
        packed: &[u8],
        blocks: usize,
        xq: &[u8],
        terms: &[(f32, i32, f32)],
        y: &mut [f32],
    ) {
        let groups = packed.len() / (blocks * layout.packed_block()).max(1);
        assert!(xq.len() >= blocks * layout.x_block());
        assert!(terms.len() >= blocks && y.len() >= groups * GROUP);
        let mut g = 0;
        // Four groups at a time (64 rows: four independent chains, each activation dword
        // broadcast once for them), then one.
        while g + 4 <= groups {
            // SAFETY: the caller's features; `g + 4 <= groups` groups are in `packed` and `y`.
            unsafe {
                if layout.min {
                    groups_at::<4, true>(packed, blocks, xq, terms, g, y)
                } else {
                    groups_at::<4, false>(packed, blocks, xq, terms, g, y)
                }
            };
            g += 4;
        }
        while g < groups {
            // SAFETY: as above, one group.
            unsafe {
                if layout.min {
                    groups_at::<1, true>(packed, blocks, xq, terms, g, y)
                } else {
                    groups_at::<1, false>(packed, blocks, xq, terms, g, y)
                }
            };
            g += 1;
        }
    }

    /// Q8_0's packed groups (`pack_q8_0`) against the activations `xq` with their `terms` (only
    /// `d` is used), four groups at a time, then one.
    ///
    /// # Safety
    /// As [`matvec`]'s.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    pub unsafe fn matvec_q8_0(
        packed: &[u8],
        blocks: usize,
        xq: &[u8],
        terms: &[(f32, i32, f32)],
        y: &mut [f32],
    ) {
        let groups = packed.len() / (blocks * Q8_0_PACKED).max(1);
        assert!(xq.len() >= blocks * 34 && terms.len() >= blocks && y.len() >= groups * GROUP);
        let mut g = 0;
        while g + 4 <= groups {
            // SAFETY: the caller's features; four groups are in `packed` and `y`.
            unsafe { q8_0_groups_at::<4>(packed, blocks, xq, terms, g, y) };
            g += 4;
        }
        while g < groups {
            // SAFETY: as above, one group.
            unsafe { q8_0_groups_at::<1>(packed, blocks, xq, terms, g, y) };
            g += 1;
        }
    }

    /// Groups `first..first + G` of [`matvec_q8_0`].
    ///
    /// # Safety
    /// As [`matvec`]'s.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    unsafe fn q8_0_groups_at<const G: usize>(
        packed: &[u8],
        blocks: usize,
        xq: &[u8],
        terms: &[(f32, i32, f32)],
        first: usize,
        y: &mut [f32],
    ) {
        let mut sumf = [_mm512_setzero_ps(); G];
        for b in 0..blocks {
            let quants = &xq[b * 34 + 2..][..32];
            // The activation dwords as unsigned bytes: `x + 128`.
            let x: [__m512i; 8] = core::array::from_fn(|k| {
                let dword = u32::from_le_bytes([
                    quants[4 * k],
                    quants[4 * k + 1],
                    quants[4 * k + 2],
                    quants[4 * k + 3],
                ]);
                _mm512_set1_epi32((dword ^ 0x8080_8080) as i32)
            });
            let dx = terms[b].0;
            for (k, sumf) in sumf.iter_mut().enumerate() {
                let bytes = &packed[((first + k) * blocks + b) * Q8_0_PACKED..][..Q8_0_PACKED];
                // SAFETY: 64 of `bytes`' bytes from 544 (16 i32).
                let mut even = unsafe { _mm512_loadu_si512(bytes[544..].as_ptr().cast()) };
                let mut odd = _mm512_setzero_si512();
                for j in 0..4 {
                    // SAFETY: 64 of `bytes`' bytes from `128 j` and `128 j + 64`.
                    let (v0, v1) = unsafe {
                        (
                            _mm512_loadu_si512(bytes[128 * j..].as_ptr().cast()),
                            _mm512_loadu_si512(bytes[128 * j + 64..].as_ptr().cast()),
                        )
                    };
                    even = _mm512_dpbusd_epi32(even, x[2 * j], v0);
                    odd = _mm512_dpbusd_epi32(odd, x[2 * j + 1], v1);
                }
                let sumi = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
                // SAFETY: 32 of `bytes`' bytes from 512 (16 f16); f16 to f32 is exact.
                let dw =
                    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(bytes[512..].as_ptr().cast()) });
                // The scalar twin's `sumi as f32 * (d_w * d_x)`, then `sumf +`.
                let term = _mm512_mul_ps(sumi, _mm512_mul_ps(dw, _mm512_set1_ps(dx)));
                *sumf = _mm512_add_ps(*sumf, term);
            }
        }
        for (k, sumf) in sumf.into_iter().enumerate() {
            let out = &mut y[(first + k) * GROUP..][..GROUP];
            // SAFETY: `out` is 16 f32; an unaligned store.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }

    /// Groups `first..first + G` of [`matvec`]; `MIN`: Q4_1, else Q4_0.
    ///
    /// # Safety
    /// As [`matvec`]'s.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,f16c")]
    unsafe fn groups_at<const G: usize, const MIN: bool>(
        packed: &[u8],
        blocks: usize,
        xq: &[u8],
        terms: &[(f32, i32, f32)],
        first: usize,
        y: &mut [f32],
    ) {
        let layout = if MIN { Q4_1 } else { Q4_0 };
        let (packed_block, x_block, at) =
            (layout.packed_block(), layout.x_block(), layout.quants_at());
        let nibble = _mm512_set1_epi8(0x0f);
        let mut sumf = [_mm512_setzero_ps(); G];
        for b in 0..blocks {
            let quants = &xq[b * x_block + at..][..32];
            let dword = |k: usize| {
                _mm512_set1_epi32(i32::from_le_bytes([
                    quants[4 * k],
                    quants[4 * k + 1],
                    quants[4 * k + 2],
                    quants[4 * k + 3],
                ]))
            };
            let x: [__m512i; 8] = core::array::from_fn(dword);
            let (dx, start, sx) = terms[b];
            for (k, sumf) in sumf.iter_mut().enumerate() {
                let bytes = &packed[((first + k) * blocks + b) * packed_block..][..packed_block];
                // Two chains of four (integer sums: any split is exact), joined after.
                let mut low_sum = _mm512_set1_epi32(start);
                let mut high_sum = _mm512_setzero_si512();
                for j in 0..4 {
                    // SAFETY: 64 of `bytes`' bytes from `64 j`; an unaligned load.
                    let v = unsafe { _mm512_loadu_si512(bytes[64 * j..].as_ptr().cast()) };
                    let low = _mm512_and_si512(v, nibble);
                    let high = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
                    low_sum = _mm512_dpbusd_epi32(low_sum, low, x[j]);
                    high_sum = _mm512_dpbusd_epi32(high_sum, high, x[4 + j]);
                }
                let sumi = _mm512_cvtepi32_ps(_mm512_add_epi32(low_sum, high_sum));
                // SAFETY: 32 of `bytes`' bytes from 256 (16 f16); f16 to f32 is exact.
                let dw =
                    _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(bytes[256..].as_ptr().cast()) });
                // The scalar twin's float step, each output a lane.
                let term = if MIN {
                    // SAFETY: 32 of `bytes`' bytes from 288 (16 f16).
                    let mw = _mm512_cvtph_ps(unsafe {
                        _mm256_loadu_si256(bytes[288..].as_ptr().cast())
                    });
                    // `(d_w · d_x) · sumi + m_w · s_x`
                    _mm512_add_ps(
                        _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(dx)), sumi),
                        _mm512_mul_ps(mw, _mm512_set1_ps(sx)),
                    )
                } else {
                    // `sumi · d_w · d_x`
                    _mm512_mul_ps(_mm512_mul_ps(sumi, dw), _mm512_set1_ps(dx))
                };
                *sumf = _mm512_add_ps(*sumf, term);
            }
        }
        for (k, sumf) in sumf.into_iter().enumerate() {
            let out = &mut y[(first + k) * GROUP..][..GROUP];
            // SAFETY: `out` is 16 f32; an unaligned store.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }
}

/// The same layout at AVX2 (the Zen 3 machines' level): each 64-byte vector of a group's block
/// as two halves of 8 rows, `maddubs` of the nibbles and the broadcast activation dwords (each
/// product pair at most 2 · 15 · 128 in magnitude, so the eight of a block add up in i16 without
/// saturating), one `madd` by ones into each row's i32 lane, then the same float step, 8 lanes at
/// a time.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
    }

    /// As [`super::avx512::matvec`], at AVX2.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C ([`available`]).
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn matvec(
        layout: Layout,
        packed: &[u8],
        blocks: usize,
        xq: &[u8],
        terms: &[(f32, i32, f32)],
        y: &mut [f32],
    ) {
        let (packed_block, x_block, at) =
            (layout.packed_block(), layout.x_block(), layout.quants_at());
        let groups = packed.len() / (blocks * packed_block).max(1);
        assert!(xq.len() >= blocks * x_block);
        assert!(terms.len() >= blocks && y.len() >= groups * GROUP);
        let nibble = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        for g in 0..groups {
            // Lanes of rows 0..8 and 8..16 of the group.
            let mut sumf = [_mm256_setzero_ps(); 2];
            for b in 0..blocks {
                let quants = &xq[b * x_block + at..][..32];
                let x: [__m256i; 8] = core::array::from_fn(|k| {
                    _mm256_set1_epi32(i32::from_le_bytes([
                        quants[4 * k],
                        quants[4 * k + 1],
                        quants[4 * k + 2],
                        quants[4 * k + 3],
                    ]))
                });
                let (dx, start, sx) = terms[b];
                let bytes = &packed[(g * blocks + b) * packed_block..][..packed_block];
                for (half, sumf) in sumf.iter_mut().enumerate() {
                    let mut pairs = _mm256_setzero_si256();
                    for j in 0..4 {
                        let from = &bytes[64 * j + 32 * half..][..32];
                        // SAFETY: `from` is 32 bytes; an unaligned load.
                        let v = unsafe { _mm256_loadu_si256(from.as_ptr().cast()) };
                        let low = _mm256_and_si256(v, nibble);
                        let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
                        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(low, x[j]));
                        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(high, x[4 + j]));
                    }
                    let sumi =
                        _mm256_add_epi32(_mm256_madd_epi16(pairs, ones), _mm256_set1_epi32(start));
                    let sumi = _mm256_cvtepi32_ps(sumi);
                    let scales = &bytes[256 + 16 * half..][..16];
                    // SAFETY: `scales` is 16 bytes (8 f16); f16 to f32 is exact.
                    let dw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(scales.as_ptr().cast()) });
                    let term = if layout.min {
                        let mins = &bytes[288 + 16 * half..][..16];
                        // SAFETY: `mins` is 16 bytes (8 f16).
                        let mw = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(mins.as_ptr().cast()) });
                        _mm256_add_ps(
                            _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx)), sumi),
                            _mm256_mul_ps(mw, _mm256_set1_ps(sx)),
                        )
                    } else {
                        _mm256_mul_ps(_mm256_mul_ps(sumi, dw), _mm256_set1_ps(dx))
                    };
                    *sumf = _mm256_add_ps(*sumf, term);
                }
            }
            for (half, sumf) in sumf.into_iter().enumerate() {
                let out = &mut y[g * GROUP + 8 * half..][..8];
                // SAFETY: `out` is 8 f32; an unaligned store.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sumf) };
            }
        }
    }
}

/// Best call of `f` over `rounds` rounds of ~50 ms each, alternated with the other sides by the
/// caller.
fn best_call(f: &mut dyn FnMut(), best: &mut Duration) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(50) {
        let t = Instant::now();
        f();
        *best = (*best).min(t.elapsed());
    }
}

/// ggml's best seconds per call with the weights in its AMX buffer, one thread, per shape (`None`
/// where it has no kernel or the harness cannot run).
fn ggml_amx(t: GgmlType, shapes: &[(usize, usize)]) -> Vec<Option<f64>> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ggml-repack-gemm.sh");
    let name = t.name().to_lowercase();
    let cases: Vec<String> = shapes
        .iter()
        .map(|(r, c)| format!("{name}:{r}x{c}:1"))
        .collect();
    let output = std::process::Command::new(script)
        .args(["perf", "1", "3"])
        .args(&cases)
        .env("GGML_EXTRA_BUFFER", "AMX")
        .output();
    let Ok(output) = output else {
        return vec![None; shapes.len()];
    };
    let text = String::from_utf8_lossy(&output.stdout);
    shapes
        .iter()
        .map(|(r, c)| {
            let head = format!("GGML_BUF {name} {r} {c} 1 1 amx ");
            text.lines()
                .find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())
        })
        .collect()
}

fn main() {
    #[cfg(not(target_arch = "x86_64"))]
    println!("interleaved: x86_64 only");
    #[cfg(target_arch = "x86_64")]
    run();
}

/// One side of a case: its level, whether it runs the interleaved kernel, and its buffers.
#[cfg(target_arch = "x86_64")]
struct Side {
    level: Level,
    packed: bool,
    scratch: Vec<u8>,
    y: Vec<f32>,
    terms: Vec<(f32, i32, f32)>,
}

#[cfg(target_arch = "x86_64")]
fn run() {
    // The AVX-512 kernel where the CPU has it, the AVX2 one where the `avx2` level runs.
    let wide = avx512::available() && level::current() == Level::Avx512Vnni;
    let at_avx2 = Level::Avx2.is_available() && avx2::available();
    if !wide && !at_avx2 {
        println!("interleaved: not run (this CPU has neither AVX-512 VNNI nor AVX2)");
        return;
    }
    let with_ggml = std::env::args().any(|a| a == "--ggml");
    let lvl = level::current();
    println!(
        "one thread, one column, GFLOP/s = 2 · rows · cols / best call; ours matvec = \
         quant::matvec::matvec_at({lvl}) and at avx2; interleaved = the rows interleaved by 16 \
         (this bench's kernels: AVX-512 VNNI, and AVX2); every side quantizes the activations \
         inside the call; bits: outputs whose bits differ from matvec's; ggml amx buffer = \
         scripts/ggml-repack-gemm.sh, GGML_EXTRA_BUFFER=AMX (--ggml)"
    );
    println!(
        "| type | rows × cols | ours matvec | interleaved | interleaved / matvec | bits | @avx2 matvec | interleaved avx2 | interleaved / matvec, avx2 | bits, avx2 | ggml amx buffer | interleaved / ggml amx |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut gaussian = move || {
        // Two uniforms by xorshift, then Box-Muller.
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (u, v) = (next(), next());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    };
    for layout in [Q4_0, Q4_1, Q8_0] {
        // (Q8_0: the AVX-512 kernel only.)
        let q8 = layout.t == GgmlType::Q8_0;
        let t = layout.t;
        let ggml = if with_ggml {
            ggml_amx(t, &SHAPES)
        } else {
            vec![None; SHAPES.len()]
        };
        for (&(rows, cols), ggml) in SHAPES.iter().zip(ggml) {
            let blocks = cols / 32;
            let values: Vec<f32> = (0..rows * cols).map(|_| gaussian()).collect();
            let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
            quant::quantize(t, &values, &mut w).unwrap();
            let x: Vec<f32> = (0..cols).map(|_| gaussian()).collect();
            let packed = if q8 {
                pack_q8_0(&w, rows, blocks)
            } else {
                pack(layout, &w, rows, blocks)
            };
            let scratch_bytes = quant::matvec::matvec_scratch_bytes(t, cols).unwrap();
            let mut sides: Vec<Side> = [
                (lvl, false),
                (lvl, true),
                (Level::Avx2, false),
                (Level::Avx2, true),
            ]
            .into_iter()
            .filter(|&(l, packed)| {
                if l == Level::Avx2 {
                    at_avx2 && !(q8 && packed)
                } else {
                    wide || !packed
                }
            })
            .map(|(level, packed)| Side {
                level,
                packed,
                scratch: vec![0u8; scratch_bytes],
                y: vec![f32::NAN; rows],
                terms: Vec::new(),
            })
            .collect();
            let mut best = vec![Duration::MAX; sides.len()];
            for round in 0..6 {
                for (side, best) in sides.iter_mut().zip(best.iter_mut()) {
                    let Side {
                        level: l,
                        packed: packed_side,
                        scratch,
                        y,
                        terms,
                    } = side;
                    let mut call = || {
                        if !*packed_side {
                            quant::matvec::matvec_at(
                                *l,
                                t,
                                &w,
                                rows,
                                cols,
                                black_box(&x),
                                scratch,
                                y,
                            )
                            .unwrap();
                            return;
                        }
                        let xq = quant::matvec::quantize_activations(
                            *l,
                            t,
                            cols,
                            black_box(&x),
                            scratch,
                        )
                        .unwrap();
                        block_terms(layout, xq, blocks, terms);
                        // SAFETY: both kernels' features were checked above.
                        unsafe {
                            if q8 {
                                avx512::matvec_q8_0(&packed, blocks, xq, terms, y)
                            } else if *l == Level::Avx2 {
                                avx2::matvec(layout, &packed, blocks, xq, terms, y)
                            } else {
                                avx512::matvec(layout, &packed, blocks, xq, terms, y)
                            }
                        };
                    };
                    if round == 0 {
                        // A first call outside the timing.
                        call();
                    } else {
                        best_call(&mut call, best);
                    }
                }
            }
            let want = &sides[0].y;
            let bits = |y: &[f32]| {
                want.iter()
                    .zip(y)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count()
            };
            let gflops = |d: Duration| 2.0 * (rows * cols) as f64 / d.as_secs_f64() / 1e9;
            // A side's GFLOP/s and bits, if it ran.
            let side = |level: Level, packed: bool| {
                let i = sides
                    .iter()
                    .position(|s| s.level == level && s.packed == packed)?;
                Some((gflops(best[i]), bits(&sides[i].y)))
            };
            let cells = |level: Level| match (side(level, false), side(level, true)) {
                (Some((p, _)), Some((q, differ))) => {
                    format!("{p:.1} | {q:.1} | {:.2} | {differ} of {rows}", q / p)
                }
                _ => "– | – | – | –".to_string(),
            };
            if let Some((_, differ)) = side(Level::Avx2, false) {
                assert_eq!(differ, 0, "matvec at avx2 and at {lvl} differ");
            }
            let ggml = match (ggml, side(Level::Avx512Vnni, true)) {
                (Some(s), Some((q, _))) => {
                    let g = 2.0 * (rows * cols) as f64 / s / 1e9;
                    format!("{g:.1} | {:.2}", q / g)
                }
                _ => "– | –".to_string(),
            };
            println!(
                "| {} | {rows} × {cols} | {} | {} | {ggml} |",
                t.name(),
                if wide {
                    cells(Level::Avx512Vnni)
                } else {
                    "– | – | – | –".to_string()
                },
                cells(Level::Avx2),
            );
        }
    }
}
