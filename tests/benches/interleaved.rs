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
//! Run: `RUSTFLAGS="-C target-cpu=native" cargo bench -p miniquant-tests --bench interleaved`.

use miniquant::quant::{self, level};
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

#[cfg(target_arch = "x86_64")]
fn run() {
    if !avx512::available() {
        println!("interleaved: not run (this CPU lacks AVX-512 VNNI)");
        return;
    }
    let with_ggml = std::env::args().any(|a| a == "--ggml");
    let lvl = level::current();
    println!(
        "one thread, one column; ours plain = quant::matvec::matvec_at({lvl}); ours packed = the \
         rows interleaved by 16 (this bench's AVX-512 VNNI kernel); both quantize the activations \
         inside the call; ggml amx buffer = scripts/ggml-repack-gemm.sh, GGML_EXTRA_BUFFER=AMX \
         (--ggml); GFLOP/s = 2 · rows · cols / best call"
    );
    println!(
        "| type | rows × cols | ours plain | ours packed | packed / plain | outputs with other bits | ggml amx buffer | packed / ggml amx |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|");
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
    for layout in [Q4_0, Q4_1] {
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
            let packed = pack(layout, &w, rows, blocks);
            let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
            let mut scratch2 = scratch.clone();
            let mut want = vec![0f32; rows];
            let mut got = vec![f32::NAN; rows];
            let mut terms = Vec::new();
            let mut plain = || {
                quant::matvec::matvec_at(
                    lvl,
                    t,
                    &w,
                    rows,
                    cols,
                    black_box(&x),
                    &mut scratch,
                    &mut want,
                )
                .unwrap();
            };
            plain();
            let mut interleaved = || {
                let xq =
                    quant::matvec::quantize_activations(lvl, t, cols, black_box(&x), &mut scratch2)
                        .unwrap();
                block_terms(layout, xq, blocks, &mut terms);
                // SAFETY: `avx512::available()` held above.
                unsafe { avx512::matvec(layout, &packed, blocks, xq, &terms, &mut got) };
            };
            interleaved();
            let (mut best_plain, mut best_packed) = (Duration::MAX, Duration::MAX);
            for _ in 0..5 {
                best_call(&mut plain, &mut best_plain);
                best_call(&mut interleaved, &mut best_packed);
            }
            let differ = want
                .iter()
                .zip(&got)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            let gflops = |s: f64| 2.0 * (rows * cols) as f64 / s / 1e9;
            let (p, q) = (
                gflops(best_plain.as_secs_f64()),
                gflops(best_packed.as_secs_f64()),
            );
            let g = ggml.map(gflops);
            println!(
                "| {} | {rows} × {cols} | {p:.1} | {q:.1} | {:.2} | {differ} of {rows} | {} | {} |",
                t.name(),
                q / p,
                g.map_or("–".into(), |g| format!("{g:.1}")),
                g.map_or("–".into(), |g| format!("{:.2}", q / g)),
            );
        }
    }
}
