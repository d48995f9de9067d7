//! The AMX packed matmul against the scalar vec_dot over the plain blocks, output by output, bit
//! for bit: on the emulated tiles everywhere, and on the real ones (directly and through the
//! kernel table) where this CPU has AMX and the OS granted it (else the test says so). Shapes: one
//! to five groups of 16 rows (an odd count leaves a strip of one group), columns around the
//! 16-column tiles, the 32-column groups and the 64 columns whose scales are converted at once
//! (1-131), rows of 1-33 blocks (around the chunks of 4 and spans of 8); weights and activations
//! quantized from random values, of random bytes, and of extreme quants (-128 / 127, nibbles
//! 0 / 15) with extreme finite scales (f16 65504, the smallest subnormal, both signs),
//! infinities and NaN; outputs `rows + 3` apart with the gaps checked untouched.

extern crate std;

use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::emulated::Emulated;
use super::packed::packed_gemm;
use super::tiles::{Hardware, Tiles};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::legacy::packed as p;
use crate::quant::arch::x86_64::tokens::{Amx, Avx512Vnni};
use crate::quant::legacy::{q4_0, q4_1, q8_0, q8_1};
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1};
use crate::quant::level::Level;
use crate::quant::table::Kernels;
use crate::quant::OutputColumns;

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

/// A Q8_1 block: as [`q8_0_block`], with an `s` of its own (the kernels take it as it is).
fn q8_1_block(rng: &mut Rng, kind: usize) -> BlockQ8_1 {
    if kind == 0 {
        return q8_1::quantize_block(&rng.values());
    }
    let b = q8_0_block(rng, kind);
    BlockQ8_1 {
        d: b.d,
        s: rng.scale(kind % 3),
        qs: b.qs,
    }
}

/// Sixteen bytes of two nibbles of kind `kind`: random, all 0, all 15, alternating.
fn nibble_bytes(rng: &mut Rng, kind: usize) -> [u8; 16] {
    core::array::from_fn(|i| match kind % 4 {
        1 => rng.next() as u8,
        2 => 0x00,
        3 => 0xff,
        _ => [0x0f, 0xf0][i % 2],
    })
}

/// Weight blocks of kind `kind`: quantized values (kind 0) or extreme nibbles and scales.
fn q4_0_block(rng: &mut Rng, kind: usize) -> BlockQ4_0 {
    if kind == 0 {
        return q4_0::quantize_block(&rng.values());
    }
    BlockQ4_0 {
        d: rng.scale(kind % 3),
        qs: nibble_bytes(rng, kind),
    }
}

fn q4_1_block(rng: &mut Rng, kind: usize) -> BlockQ4_1 {
    if kind == 0 {
        return q4_1::quantize_block(&rng.values());
    }
    BlockQ4_1 {
        d: rng.scale(kind % 3),
        m: rng.scale(kind % 3),
        qs: nibble_bytes(rng, kind),
    }
}

/// A maker of blocks of a kind (see [`q8_0_block`]).
type Maker<B> = fn(&mut Rng, usize) -> B;

/// A matmul as the kernel table's `MatmulFn` takes its arguments.
type Matmul<'a, W, X> = dyn FnMut(&[W], usize, &[X], usize, &mut OutputColumns<'_, '_>) + 'a;

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Runs `run` on each `(rows, columns, blocks a row)` of `shapes` against `scalar`, output by
/// output, with the outputs `rows + 3` apart and the gaps checked untouched; returns the
/// failures.
fn check_shapes<W: Copy, X: Copy>(
    name: &str,
    mut rng: Rng,
    shapes: &[(usize, usize, usize)],
    (block, x_block): (Maker<W>, Maker<X>),
    scalar: fn(&[W], &[X]) -> f32,
    run: &mut Matmul<W, X>,
) -> Vec<String> {
    const UNTOUCHED: f32 = -7.25;
    let mut failures = Vec::new();
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
        let x: Vec<X> = (0..n * row_blocks)
            .map(|_| {
                let k = kind(&mut rng);
                x_block(&mut rng, k)
            })
            .collect();
        let stride = rows + 3;
        let mut y = vec![UNTOUCHED; n * stride];
        run(
            &w,
            row_blocks,
            &x,
            n,
            &mut OutputColumns::strided(&mut y, stride, rows),
        );
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

/// A packed matmul on some tiles: `(packed, row_blocks, x, n, y)`.
type PackedMatmul<'a, X> = dyn FnMut(&[u8], usize, &[X], usize, &mut OutputColumns<'_, '_>) + 'a;

/// Runs `run` (the packed matmul of type `t` on some tiles, whole groups of 16 rows) on every
/// shape against `scalar` over the plain blocks; returns the failures. Shapes: one to five
/// groups (an odd one leaves a strip of one group), columns around the 16-column tiles, the
/// 32-column groups and the 64 columns whose scales are converted at once, blocks around the
/// chunks of 4 and spans of 8.
fn check_packed<W: bytemuck::Pod, X: Copy>(
    name: &str,
    t: crate::GgmlType,
    makers: (Maker<W>, Maker<X>),
    scalar: fn(&[W], &[X]) -> f32,
    run: &mut PackedMatmul<X>,
) -> Vec<String> {
    let mut shapes = Vec::new();
    for (groups, n) in [
        (1, 16),
        (2, 17),
        (3, 31),
        (1, 33),
        (2, 47),
        (5, 64),
        (3, 65),
        (2, 100),
    ] {
        for row_blocks in [1, 3, 4, 5, 9, 17] {
            shapes.push((16 * groups, n, row_blocks));
        }
    }
    shapes.extend([(32, 131, 2), (48, 20, 33), (16, 1, 2), (32, 5, 8)]);
    let name = format!("packed {name}");
    let rng = Rng(0x7061_636b + name.len() as u64);
    check_shapes(
        &name,
        rng,
        &shapes,
        makers,
        scalar,
        &mut |w, row_blocks, x, n, y| {
            let plain: &[u8] = bytemuck::cast_slice(w);
            let rows = w.len() / row_blocks.max(1);
            let mut packed = vec![0u8; plain.len()];
            crate::quant::packed::pack(t, plain, rows, row_blocks * 32, &mut packed).unwrap();
            run(&packed, row_blocks, x, n, y)
        },
    )
}

/// `$f!(name, type, weight block, (makers), scalar vec_dot, activation block, kind, group
/// block bytes)` for every type with an AMX packed matmul, the failures collected.
macro_rules! for_every_packed_type {
    ($f:ident) => {{
        let mut failures = Vec::new();
        failures.extend($f!(
            "Q8_0",
            crate::GgmlType::Q8_0,
            (q8_0_block, q8_0_block),
            q8_0::vec_dot,
            BlockQ8_0,
            p::Q8_0,
            p::Q8_0_GROUP_BLOCK
        ));
        failures.extend($f!(
            "Q4_0",
            crate::GgmlType::Q4_0,
            (q4_0_block, q8_0_block),
            q4_0::vec_dot,
            BlockQ8_0,
            p::Q4_0,
            p::Q4_0_GROUP_BLOCK
        ));
        failures.extend($f!(
            "Q4_1",
            crate::GgmlType::Q4_1,
            (q4_1_block, q8_1_block),
            q4_1::vec_dot,
            BlockQ8_1,
            p::Q4_1,
            p::Q4_1_GROUP_BLOCK
        ));
        failures
    }};
}

/// Every packed type's AMX matmul on `tiles` (the caller holds the AVX-512 VNNI token).
fn check_packed_all(tiles: &mut impl Tiles, _token: Avx512Vnni) -> Vec<String> {
    macro_rules! on_tiles {
        ($name:expr, $t:expr, $makers:expr, $scalar:expr, $X:ty, $kind:expr, $gbb:expr) => {
            check_packed($name, $t, $makers, $scalar, &mut |p, rb, x: &[$X], n, y| {
                // SAFETY: the token proves every feature `packed_gemm` enables.
                unsafe { packed_gemm::<_, $X, { $kind }, { $gbb }>(tiles, p, rb, x, n, y) }
            })
        };
    }
    for_every_packed_type!(on_tiles)
}

/// Every packed type's matmul through the kernel table at the `amx` level (as
/// `quant::packed` calls it: fewer than 16 columns run the VNNI packed matmul).
fn check_packed_table() -> Vec<String> {
    macro_rules! through_table {
        ($name:expr, $t:expr, $makers:expr, $scalar:expr, $X:ty, $kind:expr, $gbb:expr) => {
            match <$X as ActivationOf>::kernel($t) {
                Some(kernel) => {
                    check_packed($name, $t, $makers, $scalar, &mut |p, rb, x, n, y| {
                        // The starts the VNNI packed matmul (fewer than 16 columns) takes.
                        let bytes: &[u8] = bytemuck::cast_slice(x);
                        let mut starts = vec![[0u8; 4]; x.len()];
                        crate::quant::packed::activation_starts(
                            $t,
                            bytes,
                            bytemuck::cast_slice_mut(&mut starts),
                        )
                        .unwrap();
                        kernel(p, rb, x, &starts, n, y)
                    })
                }
                None => vec![format!("{}: no packed matmul at the amx level", $name)],
            }
        };
    }
    for_every_packed_type!(through_table)
}

/// The table's packed matmul at the `amx` level for a weight type, by its activation type.
trait ActivationOf: Sized {
    fn kernel(t: crate::GgmlType) -> Option<crate::quant::table::PackedMatmulFn<Self>>;
}

impl ActivationOf for BlockQ8_0 {
    fn kernel(t: crate::GgmlType) -> Option<crate::quant::table::PackedMatmulFn<Self>> {
        match t {
            crate::GgmlType::Q8_0 => BlockQ8_0::packed_matmul_kernel(Level::Amx),
            _ => BlockQ4_0::packed_matmul_kernel(Level::Amx),
        }
    }
}

impl ActivationOf for BlockQ8_1 {
    fn kernel(_: crate::GgmlType) -> Option<crate::quant::table::PackedMatmulFn<Self>> {
        BlockQ4_1::packed_matmul_kernel(Level::Amx)
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn packed_on_emulated_tiles_gives_the_scalar_bits() {
    let Some(token) = Avx512Vnni::try_new() else {
        std::eprintln!("amx packed matmul NOT RUN on emulated tiles: its float steps need AVX-512");
        return;
    };
    let failures = check_packed_all(&mut Emulated::new(), token);
    assert!(
        failures.is_empty(),
        "{} mismatches: {failures:#?}",
        failures.len()
    );
}

#[test]
#[cfg_attr(miri, ignore)]
fn packed_on_real_tiles_gives_the_scalar_bits_where_present() {
    let Some(token) = Amx::try_new() else {
        std::eprintln!("amx packed matmul NOT RUN on real tiles: no AMX, or not granted");
        assert!(!Level::Amx.is_available());
        return;
    };
    let mut failures = check_packed_all(&mut Hardware::new(token), token.vnni());
    failures.extend(check_packed_table());
    std::eprintln!(
        "amx packed matmul run on the real tiles: {} mismatches",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches: {failures:#?}",
        failures.len()
    );
}
