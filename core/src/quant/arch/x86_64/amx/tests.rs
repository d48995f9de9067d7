//! The AMX matmul against the scalar vec_dot, output by output, bit for bit: on the emulated
//! tiles everywhere, and on the real ones where this CPU has AMX and the OS granted it (else the
//! test says the `amx` level was not run). Shapes: every row and column count of 1..=17 (one
//! partial tile each), counts past a strip or group of 32 (33, 47), rows of 1, 8 (one chunk), 9
//! and 17 blocks (a second and third chunk); weights and activations quantized from random
//! values, of random bytes, and of extreme quants (-128 / 127, nibbles 0 / 15) with extreme finite
//! scales (f16 65504, the smallest subnormal, both signs), infinities and NaN; outputs
//! `y_stride = rows + 3` apart with the gaps checked untouched.

extern crate std;

use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::emulated::Emulated;
use super::matmul::{gemm, Kit, Q4_0, Q8_0};
use super::tiles::{Hardware, Tiles};
use crate::quant::activation::BlockQ8_0;
use crate::quant::arch::x86_64::tokens::Amx;
use crate::quant::legacy::{q4_0, q8_0, BlockQ4_0};
use crate::quant::level::{self, Level};

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Values of a random scale for quantizing.
    fn values(&mut self) -> [f32; 32] {
        let scale = (self.next() % 1000) as f32 / 50.0 + 0.01;
        core::array::from_fn(|_| ((self.next() % 2001) as f32 / 1000.0 - 1.0) * scale)
    }

    /// An f16 scale: mostly ordinary, sometimes extreme (±65504, ±smallest subnormal, ±inf, NaN).
    fn scale(&mut self, kind: usize) -> [u8; 2] {
        let bits: u16 = match (kind, self.next() % 8) {
            (0, _) | (_, 0..=3) => 0x3000 | (self.next() as u16 & 0x83ff),
            (_, 4) => [0x7bff, 0xfbff][self.next() as usize % 2],
            (_, 5) => [0x0001, 0x8001][self.next() as usize % 2],
            (_, 6) => 0x5bff ^ (self.next() as u16 & 0x8000),
            _ => [0x7c00, 0xfc00, 0x7e00][self.next() as usize % 3],
        };
        bits.to_le_bytes()
    }
}

/// A Q8_0 block of kind `kind`: quantized values, random quants, or all -128 / all 127 /
/// alternating, with an ordinary or extreme scale.
fn q8_0_block(rng: &mut Rng, kind: usize) -> BlockQ8_0 {
    if kind == 0 {
        return q8_0::quantize_block(&rng.values());
    }
    let qs = core::array::from_fn(|i| match kind % 4 {
        1 => rng.next() as i8,
        2 => -128,
        3 => 127,
        _ => [-128, 127][i % 2],
    });
    BlockQ8_0 {
        d: rng.scale(kind % 3),
        qs,
    }
}

/// A Q4_0 block of kind `kind`: quantized values, random nibbles, all 0 / all 15 / alternating.
fn q4_0_block(rng: &mut Rng, kind: usize) -> BlockQ4_0 {
    if kind == 0 {
        return q4_0::quantize_block(&rng.values());
    }
    let qs = core::array::from_fn(|i| match kind % 4 {
        1 => rng.next() as u8,
        2 => 0x00,
        3 => 0xff,
        _ => [0x0f, 0xf0][i % 2],
    });
    BlockQ4_0 {
        d: rng.scale(kind % 3),
        qs,
    }
}

/// A matmul as the kernel table's `MatmulFn` takes its arguments.
type Matmul<'a, W> = dyn FnMut(&[W], usize, &[BlockQ8_0], usize, &mut [f32], usize) + 'a;

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Runs `run` (a matmul on some tiles) on every shape against `scalar`; returns the failures.
fn check<W: Copy>(
    name: &str,
    block: impl Fn(&mut Rng, usize) -> W,
    scalar: impl Fn(&[W], &[BlockQ8_0]) -> f32,
    run: &mut Matmul<W>,
) -> Vec<String> {
    const UNTOUCHED: f32 = -7.25;
    let mut failures = Vec::new();
    let mut rng = Rng(0x616d_7800 + name.len() as u64);
    let mut shapes = Vec::new();
    for rows in 1..=17 {
        for n in 1..=17 {
            shapes.push((rows, n, [1, 9][(rows + n) % 2]));
        }
    }
    for (rows, n) in [(33, 5), (5, 33), (47, 35), (32, 32), (16, 48)] {
        for row_blocks in [1, 8, 17] {
            shapes.push((rows, n, row_blocks));
        }
    }
    for (s, &(rows, n, row_blocks)) in shapes.iter().enumerate() {
        // Every third shape draws extreme blocks; the others mostly quantized or random ones.
        let kind = |rng: &mut Rng| {
            if s % 3 == 2 {
                1 + rng.next() as usize % 5
            } else {
                rng.next() as usize % 2
            }
        };
        let w: Vec<W> = (0..rows * row_blocks)
            .map(|_| {
                let k = kind(&mut rng);
                block(&mut rng, k)
            })
            .collect();
        let x: Vec<BlockQ8_0> = (0..n * row_blocks)
            .map(|_| {
                let k = kind(&mut rng);
                q8_0_block(&mut rng, k)
            })
            .collect();
        let stride = rows + 3;
        let mut y = vec![UNTOUCHED; n * stride];
        run(&w, row_blocks, &x, n, &mut y, stride);
        let mut wrong = 0;
        for (c, column) in x.chunks_exact(row_blocks).enumerate() {
            for (r, row) in w.chunks_exact(row_blocks).enumerate() {
                if !same(y[c * stride + r], scalar(row, column)) {
                    wrong += 1;
                }
            }
            if y[c * stride + rows..(c + 1) * stride]
                .iter()
                .any(|v| v.to_bits() != UNTOUCHED.to_bits())
            {
                wrong += 1;
            }
        }
        if wrong > 0 {
            failures.push(format!(
                "{name}: {rows} rows of {row_blocks} blocks, {n} columns: {wrong} wrong"
            ));
        }
    }
    failures
}

/// The matmul of `kit` on `tiles`, as a closure for [`check`].
fn on<'k, T: Tiles, W>(
    tiles: &'k mut T,
    kit: &'k Kit<W, BlockQ8_0>,
) -> impl FnMut(&[W], usize, &[BlockQ8_0], usize, &mut [f32], usize) + 'k {
    move |w, row_blocks, x, n, y, stride| gemm(tiles, w, row_blocks, x, n, y, stride, kit)
}

/// Every type's matmul on `tiles`; returns the failures.
fn check_all(tiles: &mut impl Tiles) -> Vec<String> {
    let mut failures = check("Q8_0", q8_0_block, q8_0::vec_dot, &mut on(tiles, &Q8_0));
    failures.extend(check(
        "Q4_0",
        q4_0_block,
        q4_0::vec_dot,
        &mut on(tiles, &Q4_0),
    ));
    failures
}

#[test]
#[cfg_attr(miri, ignore)]
fn emulated_tiles_give_the_scalar_bits() {
    let failures = check_all(&mut Emulated::new());
    assert!(
        failures.is_empty(),
        "{} mismatches: {failures:#?}",
        failures.len()
    );
}

/// The same shapes on the real tiles and through the kernel table, where this CPU has AMX and
/// the OS granted it; elsewhere the `amx` level is reported as not run.
#[test]
#[cfg_attr(miri, ignore)]
fn real_tiles_give_the_scalar_bits_where_present() {
    let Some(token) = Amx::try_new() else {
        std::eprintln!(
            "amx level NOT RUN: this CPU {} (its kernels were checked on emulated tiles only)",
            if level::amx_supported() {
                "has AMX but the OS refused the tile permission"
            } else {
                "has no AMX"
            }
        );
        assert!(!Level::Amx.is_available());
        return;
    };
    let mut failures = check_all(&mut Hardware::new(token));
    // Through the table as `typed` calls it (few columns take the VNNI matmul).
    use crate::quant::table::Kernels;
    let (Some(q8_0_amx), Some(q4_0_amx)) = (
        BlockQ8_0::matmul_kernel(Level::Amx),
        BlockQ4_0::matmul_kernel(Level::Amx),
    ) else {
        panic!("the amx level has no Q8_0 or Q4_0 matmul");
    };
    failures.extend(check(
        "Q8_0 table",
        q8_0_block,
        q8_0::vec_dot,
        &mut |w, rb, x, n, y, s| q8_0_amx(w, rb, x, n, y, s),
    ));
    failures.extend(check(
        "Q4_0 table",
        q4_0_block,
        q4_0::vec_dot,
        &mut |w, rb, x, n, y, s| q4_0_amx(w, rb, x, n, y, s),
    ));
    std::eprintln!(
        "amx level run on the real tiles: {} mismatches",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches: {failures:#?}",
        failures.len()
    );
}
