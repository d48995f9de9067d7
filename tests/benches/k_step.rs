//! The integer step under the Q4_K/Q5_K matmul tiles, ours against ggml's tiled kernel's, alone in
//! registers and L1: the bound each puts on its kernel, in products of a quant and an activation
//! per nanosecond, and their ratio.
//!
//! Ours (`k_matmul_busd.rs`) keeps the scalar reference's eight lane sums of a super-block exact,
//! which a column's bits need: one `vpdpbusd` of a row against each of two columns (from zero),
//! the two results packed to words, one `vpdpwssd` by the row's pair of sub-block scales; 128
//! products of two outputs per step, here as in the tile (eight rows, four columns, the
//! activations put in dword order by `vpermb`, the rows' quants and scales loaded from memory).
//! ggml's (`tiled_run_micro_vnni_8x16` in ggml's `tiled-kernel.cpp`, 0.3.36 sdist) sums each
//! output's 32 products of a sub-block into one integer: eight rows, sixteen columns, eight
//! `vpdpbusd` of a broadcast weight dword per row and sub-block, then one `vpmulld` by its scale
//! and one `vpaddd`. The instructions are the same kinds on the same two vector pipes; the lane
//! sums are what makes ours need more of them per product. (The float steps, the mins and the
//! unpacking around each step are left out on both sides.)
//!
//! Run: `cargo bench -p miniquant-tests --bench k_step` (x86_64 with AVX-512 VNNI and VBMI; other
//! CPUs print that nothing ran).

#[cfg(target_arch = "x86_64")]
mod steps {
    use std::arch::x86_64::*;
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    /// Row blocks the loops cycle through (so that no load is loop-invariant).
    const SETS: usize = 4;

    /// Inputs of both loops: bytes and scales as a tile would load them.
    pub struct Inputs {
        /// Ours: per set, eight rows' 64 quant bytes (a pair of sub-blocks in dword order).
        rows: [[[u8; 64]; 8]; SETS],
        /// Ours: per set, four columns' 64 activation bytes (in source order).
        columns: [[[u8; 64]; 4]; SETS],
        /// ggml's: per set, eight rows' eight weight dwords of a sub-block.
        row_dwords: [[[u32; 8]; 8]; SETS],
        /// ggml's: per set, eight 64-byte vectors of sixteen columns' code dwords.
        codes: [[[u8; 64]; 8]; SETS],
        /// Both: per set, eight rows' scales (ours: a pair of 16-bit scales per dword).
        scales: [[i32; 8]; SETS],
        /// Ours: the `vpermb` indices that put activations in dword order.
        order: [u8; 64],
    }

    impl Inputs {
        pub fn new() -> Self {
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut byte = move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            };
            let mut inputs = Inputs {
                rows: [[[0; 64]; 8]; SETS],
                columns: [[[0; 64]; 4]; SETS],
                row_dwords: [[[0; 8]; 8]; SETS],
                codes: [[[0; 64]; 8]; SETS],
                scales: [[0; 8]; SETS],
                order: [0; 64],
            };
            for set in 0..SETS {
                inputs.rows[set]
                    .iter_mut()
                    .flatten()
                    .for_each(|b| *b = byte() & 15);
                inputs.columns[set]
                    .iter_mut()
                    .flatten()
                    .for_each(|b| *b = byte());
                inputs.codes[set]
                    .iter_mut()
                    .flatten()
                    .for_each(|b| *b = byte());
                for dwords in &mut inputs.row_dwords[set] {
                    dwords
                        .iter_mut()
                        .for_each(|d| *d = u32::from_le_bytes([byte() & 15; 4]));
                }
                for s in &mut inputs.scales[set] {
                    *s = i32::from(byte() & 63) | i32::from(byte() & 63) << 16;
                }
            }
            for (i, o) in inputs.order.iter_mut().enumerate() {
                *o = ((i * 17) % 64) as u8;
            }
            inputs
        }
    }

    /// `acc + (s_A, s_B)·packs(w·x1, w·x2)`, as `k_matmul_busd::pair_step` (one `asm!` block, so
    /// that LLVM keeps `vpdpwssd` whole).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
    fn pair_step(acc: __m512i, w: __m512i, x1: __m512i, x2: __m512i, s: __m512i) -> __m512i {
        let mut acc = acc;
        let _p1: __m512i;
        let _p2: __m512i;
        // SAFETY: register-only instructions of enabled features (AVX-512 F/BW/VNNI); they touch
        // no memory, stack or flags. `p1` and `p2` are scratch outputs distinct from every input.
        unsafe {
            std::arch::asm!(
                "vpxord {p1}, {p1}, {p1}",
                "vpxord {p2}, {p2}, {p2}",
                "vpdpbusd {p1}, {w}, {x1}",
                "vpdpbusd {p2}, {w}, {x2}",
                "vpackssdw {p1}, {p1}, {p2}",
                "vpdpwssd {acc}, {p1}, {s}",
                acc = inout(zmm_reg) acc,
                w = in(zmm_reg) w,
                x1 = in(zmm_reg) x1,
                x2 = in(zmm_reg) x2,
                s = in(zmm_reg) s,
                p1 = out(zmm_reg) _p1,
                p2 = out(zmm_reg) _p2,
                options(pure, nomem, nostack, preserves_flags),
            )
        };
        acc
    }

    /// 64 bytes as a vector.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(bytes: &[u8; 64]) -> __m512i {
        // SAFETY: 64 bytes; `loadu` has no alignment requirement.
        unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
    }

    /// Our step, `iters` times eight rows × four columns × one pair of sub-blocks (2048 products).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx512vbmi")]
    fn ours(inputs: &Inputs, iters: usize) -> __m512i {
        let order = load(&inputs.order);
        let mut acc = [_mm512_setzero_si512(); 16];
        for i in 0..iters {
            let set = i % SETS;
            let x: [__m512i; 4] = core::array::from_fn(|c| {
                _mm512_permutexvar_epi8(order, load(&inputs.columns[set][c]))
            });
            for r in 0..8 {
                let w = load(&inputs.rows[set][r]);
                let s = _mm512_set1_epi32(inputs.scales[set][r]);
                acc[2 * r] = pair_step(acc[2 * r], w, x[0], x[1], s);
                acc[2 * r + 1] = pair_step(acc[2 * r + 1], w, x[2], x[3], s);
            }
        }
        acc.iter()
            .fold(_mm512_setzero_si512(), |a, &b| _mm512_xor_si512(a, b))
    }

    /// One sub-block's eight weight dwords of eight rows against one code vector `g` (as ggml's
    /// loop over rows inside its loop over `g`): a broadcast from memory and a `vpdpbusd` per row,
    /// in one `asm!` block, so that the compiler neither hoists the 64 broadcasts of a sub-block
    /// (which spilled the accumulators) nor reorders them.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn rows_step(acc: &mut [__m512i; 8], row_dwords: &[[u32; 8]; 8], g: usize, codes: __m512i) {
        let [a0, a1, a2, a3, a4, a5, a6, a7] = acc;
        let w = row_dwords.as_ptr().cast::<u32>().wrapping_add(g);
        let (_t0, _t1): (__m512i, __m512i);
        // SAFETY: the eight loads are `w + 8·t` for rows `t` < 8 of `row_dwords`, and `g` < 8
        // (the caller's loop), so every dword read is inside it; the other instructions touch
        // registers only (AVX-512 F/VNNI, enabled).
        unsafe {
            std::arch::asm!(
                "vpbroadcastd {t0}, dword ptr [{w}]",
                "vpdpbusd {a0}, {t0}, {codes}",
                "vpbroadcastd {t1}, dword ptr [{w} + 32]",
                "vpdpbusd {a1}, {t1}, {codes}",
                "vpbroadcastd {t0}, dword ptr [{w} + 64]",
                "vpdpbusd {a2}, {t0}, {codes}",
                "vpbroadcastd {t1}, dword ptr [{w} + 96]",
                "vpdpbusd {a3}, {t1}, {codes}",
                "vpbroadcastd {t0}, dword ptr [{w} + 128]",
                "vpdpbusd {a4}, {t0}, {codes}",
                "vpbroadcastd {t1}, dword ptr [{w} + 160]",
                "vpdpbusd {a5}, {t1}, {codes}",
                "vpbroadcastd {t0}, dword ptr [{w} + 192]",
                "vpdpbusd {a6}, {t0}, {codes}",
                "vpbroadcastd {t1}, dword ptr [{w} + 224]",
                "vpdpbusd {a7}, {t1}, {codes}",
                w = in(reg) w,
                codes = in(zmm_reg) codes,
                a0 = inout(zmm_reg) *a0,
                a1 = inout(zmm_reg) *a1,
                a2 = inout(zmm_reg) *a2,
                a3 = inout(zmm_reg) *a3,
                a4 = inout(zmm_reg) *a4,
                a5 = inout(zmm_reg) *a5,
                a6 = inout(zmm_reg) *a6,
                a7 = inout(zmm_reg) *a7,
                t0 = out(zmm_reg) _t0,
                t1 = out(zmm_reg) _t1,
                options(pure, readonly, nostack, preserves_flags),
            )
        };
    }

    /// ggml's step, `iters` times eight rows × sixteen columns × one sub-block (4096 products).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn ggml(inputs: &Inputs, iters: usize) -> __m512i {
        let mut s1 = [_mm512_setzero_si512(); 8];
        for i in 0..iters {
            let set = i % SETS;
            let mut acc16 = [_mm512_setzero_si512(); 8];
            for g in 0..8 {
                rows_step(
                    &mut acc16,
                    &inputs.row_dwords[set],
                    g,
                    load(&inputs.codes[set][g]),
                );
            }
            for (t, (s1, acc)) in s1.iter_mut().zip(acc16).enumerate() {
                let scale = _mm512_set1_epi32(inputs.scales[set][t] & 63);
                *s1 = _mm512_add_epi32(*s1, _mm512_mullo_epi32(acc, scale));
            }
        }
        s1.iter()
            .fold(_mm512_setzero_si512(), |a, &b| _mm512_xor_si512(a, b))
    }

    /// Best time of `rounds` runs of `f`.
    fn best(rounds: usize, mut f: impl FnMut()) -> Duration {
        (0..rounds)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .min()
            .unwrap_or(Duration::MAX)
    }

    pub fn run() {
        let present = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("avx512vbmi");
        if !present {
            println!("not run: this CPU lacks AVX-512 F/BW/VNNI/VBMI");
            return;
        }
        let inputs = Inputs::new();
        let iters = 1 << 20;
        let (mut t_ours, mut t_ggml) = (Duration::MAX, Duration::MAX);
        // Alternated rounds, best of each: both sides see the same phases of a shared machine.
        for _ in 0..7 {
            t_ours = t_ours.min(best(3, || {
                // SAFETY: every feature `ours` enables was detected above.
                black_box(unsafe { ours(black_box(&inputs), iters) });
            }));
            t_ggml = t_ggml.min(best(3, || {
                // SAFETY: every feature `ggml` enables was detected above.
                black_box(unsafe { ggml(black_box(&inputs), iters) });
            }));
        }
        let rate =
            |products: usize, t: Duration| products as f64 * iters as f64 / t.as_nanos() as f64;
        let (ours, ggml) = (rate(2048, t_ours), rate(4096, t_ggml));
        println!(
            "integer step of the Q4_K/Q5_K tiles, products per ns (best of 7 alternated rounds):"
        );
        println!("  ours (eight lane sums exact, matvec's bits): {ours:7.1}");
        println!("  ggml's tiled (one sum per sub-block):        {ggml:7.1}");
        println!("  ours / ggml's: {:.2}", ours / ggml);
        println!(
            "  as GFLOP/s bounds (2 per product): ours {:.0}, ggml's {:.0}",
            2.0 * ours,
            2.0 * ggml
        );
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    steps::run();
    #[cfg(not(target_arch = "x86_64"))]
    println!("not run: x86_64 only");
}
