//! Deterministic test data shared by the oracle tests: a small seeded generator, Gaussian rows with
//! per-row scales and sparse outliers, hand-made edge blocks, raw blocks with chosen scale fields,
//! and ggml's `test-quantize-fns` cosine data.
//!
//! Everything here is a pure function of its seed, so a failure reproduces from its printed seed.

use miniquant::GgmlType;

/// Elements of every edge block: a multiple of every ggml block size (32, 64, 128, 256).
pub const EDGE_BLOCK_LEN: usize = 256;

/// SplitMix64: tiny, fast and good enough to spread test values; no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A standard normal sample (Box–Muller).
    pub fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln stays finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Fills `bytes` with random bytes.
    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// `rows × cols` values, row-major: Gaussian, each row with its own scale (10^-3 .. 10^1), and
/// about one value in 300 an outlier 8..40 times larger.
pub fn gaussian_rows(seed: u64, rows: usize, cols: usize) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(rows * cols);
    for _ in 0..rows {
        let scale = 10f64.powf(rng.uniform(-3.0, 1.0));
        for _ in 0..cols {
            let mut v = rng.gaussian() * scale;
            if rng.below(300) == 0 {
                v *= rng.uniform(8.0, 40.0);
            }
            out.push(v as f32);
        }
    }
    out
}

/// ggml `test-quantize-fns` data: `0.1 + 2 cos(i + offset)`.
pub fn cosine_data(n: usize, offset: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
        .collect()
}

/// A named edge block of [`EDGE_BLOCK_LEN`] values.
#[derive(Debug, Clone)]
pub struct EdgeBlock {
    /// What the block exercises.
    pub name: &'static str,
    /// The values.
    pub values: Vec<f32>,
}

/// Hand-made blocks that hit the quantizers' special cases: zeros, tiny and huge magnitudes, inf,
/// NaN, half-way values, exact rounding ties for the common scale formulas, constant blocks, +a/-a
/// amax ties in both orders, an outlier that rounds the other sub-block scales to zero, and values
/// that quantize to the i8 extreme.
pub fn edge_blocks(seed: u64) -> Vec<EdgeBlock> {
    const N: usize = EDGE_BLOCK_LEN;
    let mut rng = Rng::new(seed);
    let mut noise =
        |scale: f64| -> Vec<f32> { (0..N).map(|_| (rng.gaussian() * scale) as f32).collect() };
    let ramp = |f: &dyn Fn(usize) -> f32| -> Vec<f32> { (0..N).map(f).collect() };
    let mut blocks = vec![
        EdgeBlock {
            name: "zeros",
            values: vec![0.0; N],
        },
        EdgeBlock {
            name: "negative zeros",
            values: vec![-0.0; N],
        },
        EdgeBlock {
            name: "tiny 1e-9*i",
            values: ramp(&|i| 1e-9 * i as f32),
        },
        EdgeBlock {
            name: "sub-eps 1e-17*i",
            values: ramp(&|i| 1e-17 * i as f32),
        },
        EdgeBlock {
            name: "huge 1e7*i",
            values: ramp(&|i| 1e7 * i as f32),
        },
        EdgeBlock {
            name: "huge alternating",
            values: ramp(&|i| if i % 2 == 0 { 3e38 } else { -2e38 }),
        },
        EdgeBlock {
            name: "half-way i+0.5",
            values: ramp(&|i| i as f32 + 0.5),
        },
        EdgeBlock {
            name: "half-way centred",
            values: ramp(&|i| (i % 32) as f32 - 15.5),
        },
        EdgeBlock {
            name: "constant 0.7",
            values: vec![0.7; N],
        },
        EdgeBlock {
            name: "constant -3.25",
            values: vec![-3.25; N],
        },
        EdgeBlock {
            name: "constant 1",
            values: vec![1.0; N],
        },
    ];
    // Exact ties: every 32 values start with -a, so the common scale formulas give d = ±1 (or a
    // power of two) and the remaining values k + 0.5 land exactly half-way between two quants.
    for (name, a) in [
        ("ties a=127", 127.0f32),
        ("ties a=8", 8.0),
        ("ties a=16", 16.0),
        ("ties a=4", 4.0),
    ] {
        let values = ramp(&|i| {
            let k = i % 32;
            if k == 0 {
                -a
            } else {
                let span = a as i32 - 1;
                let step = (k as i32 * 37) % (2 * span + 1) - span;
                step as f32 + if step < 0 { -0.5 } else { 0.5 }
            }
        });
        blocks.push(EdgeBlock { name, values });
    }
    // +a and -a share the largest magnitude; which one a quantizer keeps decides the sign of d.
    let mut plus_first = noise(0.3);
    let mut minus_first = plus_first.clone();
    for start in (0..N).step_by(16) {
        plus_first[start + 3] = 2.5;
        plus_first[start + 9] = -2.5;
        minus_first[start + 3] = -2.5;
        minus_first[start + 9] = 2.5;
    }
    blocks.push(EdgeBlock {
        name: "+a/-a amax tie",
        values: plus_first,
    });
    blocks.push(EdgeBlock {
        name: "-a/+a amax tie",
        values: minus_first,
    });
    // One outlier 1e5 times the rest: the other sub-blocks' quantized scales round to 0.
    let mut outlier = noise(1e-3);
    outlier[77] = 100.0;
    blocks.push(EdgeBlock {
        name: "outlier zeroes sub-scales",
        values: outlier,
    });
    let mut neg_outlier = noise(1e-2);
    neg_outlier[200] = -1000.0;
    blocks.push(EdgeBlock {
        name: "negative outlier",
        values: neg_outlier,
    });
    // Values whose quants hit the i8 extremes (-127/-128 after rounding at the edge).
    blocks.push(EdgeBlock {
        name: "i8 extremes",
        values: ramp(&|i| {
            if i % 2 == 0 {
                -128.0
            } else {
                127.0 + (i % 3) as f32 * 0.25
            }
        }),
    });
    let mut with_inf = noise(1.0);
    with_inf[17] = f32::INFINITY;
    blocks.push(EdgeBlock {
        name: "one +inf",
        values: with_inf,
    });
    let mut with_neg_inf = noise(1.0);
    with_neg_inf[130] = f32::NEG_INFINITY;
    blocks.push(EdgeBlock {
        name: "one -inf",
        values: with_neg_inf,
    });
    let mut with_nan = noise(1.0);
    with_nan[5] = f32::NAN;
    blocks.push(EdgeBlock {
        name: "one NaN",
        values: with_nan,
    });
    let mut subnormal = noise(1.0);
    for v in subnormal.iter_mut().step_by(3) {
        *v = f32::from_bits(1 + (v.to_bits() & 0x7f));
    }
    blocks.push(EdgeBlock {
        name: "f32 subnormals",
        values: subnormal,
    });
    let mut f16_edges = noise(1.0);
    for (v, edge) in f16_edges.iter_mut().zip([
        65504.0f32, 65520.0, -65519.0, 6.1e-5, 5.96e-8, 2.98e-8, 1e-8,
    ]) {
        *v = edge;
    }
    blocks.push(EdgeBlock {
        name: "f16 range edges",
        values: f16_edges,
    });
    blocks
}

/// The edge blocks laid end to end.
pub fn edge_values(seed: u64) -> Vec<f32> {
    edge_blocks(seed)
        .into_iter()
        .flat_map(|b| b.values)
        .collect()
}

/// How raw blocks fill their scale fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scales {
    /// Finite, moderate scales (|d| roughly 2^-14 .. 1), as a quantizer would write.
    Sane,
    /// Any bits, with inf, NaN, -0 and subnormals forced into some blocks.
    Arbitrary,
}

/// Where a block keeps a scale, and in which encoding.
#[derive(Debug, Clone, Copy)]
enum ScaleField {
    Half(usize),
    Single(usize),
    /// IQ1_M spreads its f16 super-scale over the top nibbles of the four u16 words at this offset.
    Iq1mNibbles(usize),
    E8m0(usize),
    Ue4m3(usize, usize),
}

fn scale_fields(t: GgmlType) -> &'static [ScaleField] {
    use GgmlType::*;
    match t {
        Q4_0 | Q5_0 | Q8_0 | IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S | IQ4_NL | IQ3_S | IQ2_S
        | IQ4_XS | Q1_0 | Q2_0 => &[ScaleField::Half(0)],
        Q4_1 | Q5_1 | Q8_1 | Q4_K | Q5_K => &[ScaleField::Half(0), ScaleField::Half(2)],
        Q2_K => &[ScaleField::Half(80), ScaleField::Half(82)],
        Q3_K => &[ScaleField::Half(108)],
        Q6_K => &[ScaleField::Half(208)],
        Q8_K => &[ScaleField::Single(0)],
        IQ1_M => &[ScaleField::Iq1mNibbles(48)],
        TQ1_0 => &[ScaleField::Half(52)],
        TQ2_0 => &[ScaleField::Half(64)],
        MXFP4 => &[ScaleField::E8m0(0)],
        NVFP4 => &[ScaleField::Ue4m3(0, 4)],
        F16 => &[ScaleField::Half(0)],
        BF16 | F32 | F64 | I8 | I16 | I32 | I64 => &[],
    }
}

/// f16 bits of a finite, normal value with |x| in 2^-14 .. 2^0 and a random sign.
pub fn sane_f16_bits(rng: &mut Rng) -> u16 {
    let sign = (rng.below(2) as u16) << 15;
    let exponent = 1 + rng.below(15) as u16; // biased 1..=15: 2^-14 .. 2^0
    sign | (exponent << 10) | rng.below(1 << 10) as u16
}

/// f16 bits that hit the special encodings often: inf, NaN (quiet and signalling), -0,
/// subnormals, the largest finite, or anything.
pub fn arbitrary_f16_bits(rng: &mut Rng) -> u16 {
    const SPECIAL: [u16; 10] = [
        0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x8000, 0x0001, 0x03ff, 0x7bff, 0xfbff,
    ];
    match rng.below(3) {
        0 => SPECIAL[rng.below(SPECIAL.len() as u64) as usize],
        _ => rng.next_u64() as u16,
    }
}

fn put_f16(block: &mut [u8], at: usize, bits: u16) {
    block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
}

/// `count` blocks of type `t` with random payload bytes and scale fields chosen by `scales`.
/// For the plain types (F16, BF16, F32, F64, integers) every element is a "scale": `Sane` gives
/// finite moderate values, `Arbitrary` any bits.
pub fn raw_blocks(t: GgmlType, count: usize, scales: Scales, rng: &mut Rng) -> Vec<u8> {
    let block_bytes = t.block_bytes() as usize;
    let mut out = vec![0u8; count * block_bytes];
    rng.fill(&mut out);
    for block in out.chunks_exact_mut(block_bytes) {
        match (t, scales) {
            (GgmlType::BF16, Scales::Sane) => {
                let value = (rng.gaussian() as f32).to_bits();
                put_f16(block, 0, (value >> 16) as u16);
            }
            (GgmlType::F32, Scales::Sane) => {
                block.copy_from_slice(&(rng.gaussian() as f32).to_le_bytes());
            }
            (GgmlType::F64, Scales::Sane) => block.copy_from_slice(&rng.gaussian().to_le_bytes()),
            (GgmlType::F32, Scales::Arbitrary) if rng.below(4) == 0 => {
                let special = [
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NAN,
                    -0.0,
                    f32::MIN_POSITIVE,
                ];
                let pick = special[rng.below(special.len() as u64) as usize];
                block.copy_from_slice(&pick.to_le_bytes());
            }
            _ => {}
        }
        for field in scale_fields(t) {
            let f16_bits = match scales {
                Scales::Sane => sane_f16_bits(rng),
                Scales::Arbitrary => arbitrary_f16_bits(rng),
            };
            match *field {
                ScaleField::Half(at) => put_f16(block, at, f16_bits),
                ScaleField::Single(at) => {
                    let value = match scales {
                        Scales::Sane => rng.uniform(1e-4, 1.0) as f32,
                        Scales::Arbitrary => f32::from_bits(rng.next_u64() as u32),
                    };
                    block[at..at + 4].copy_from_slice(&value.to_le_bytes());
                }
                ScaleField::Iq1mNibbles(at) => {
                    for i in 0..4 {
                        let nibble = ((f16_bits >> (4 * i)) & 0xf) as u8;
                        let byte = &mut block[at + 2 * i + 1];
                        *byte = (*byte & 0x0f) | (nibble << 4);
                    }
                }
                ScaleField::E8m0(at) => {
                    if scales == Scales::Sane {
                        block[at] = 100 + rng.below(54) as u8; // 2^-27 .. 2^26
                    }
                }
                ScaleField::Ue4m3(start, end) => {
                    if scales == Scales::Sane {
                        for byte in &mut block[start..end] {
                            *byte = rng.below(0x7f) as u8; // 0x7f is the NaN encoding
                        }
                    }
                }
            }
        }
    }
    out
}

/// Raw Q8_K activation blocks whose `bsums` agree with their quants (the K-quant dots read the
/// sums instead of recomputing them). `extremes` fills every quant with -128 or 127.
pub fn raw_q8k_blocks(count: usize, extremes: bool, rng: &mut Rng) -> Vec<u8> {
    let block_bytes = GgmlType::Q8_K.block_bytes() as usize;
    let mut out = vec![0u8; count * block_bytes];
    for block in out.chunks_exact_mut(block_bytes) {
        let d = rng.uniform(1e-4, 1e-1) as f32;
        block[0..4].copy_from_slice(&d.to_le_bytes());
        let quants = &mut block[4..4 + 256];
        if extremes {
            for q in quants.iter_mut() {
                *q = if rng.below(4) == 0 { 127 } else { 0x80 };
            }
        } else {
            rng.fill(quants);
        }
        let sums: Vec<i16> = quants
            .chunks_exact(16)
            .map(|group| group.iter().map(|&q| i16::from(q as i8)).sum())
            .collect();
        for (slot, sum) in block[260..].chunks_exact_mut(2).zip(sums) {
            slot.copy_from_slice(&sum.to_le_bytes());
        }
    }
    out
}

/// Raw Q8_0 or Q8_1 activation blocks with sane scales. `extremes` fills every quant with -128
/// (the value that saturates x86 `maddubs`) or 127.
pub fn raw_q8_blocks(t: GgmlType, count: usize, extremes: bool, rng: &mut Rng) -> Vec<u8> {
    assert!(
        matches!(t, GgmlType::Q8_0 | GgmlType::Q8_1),
        "{t} is not a 32-element Q8 type"
    );
    let mut out = raw_blocks(t, count, Scales::Sane, rng);
    if extremes {
        let block_bytes = t.block_bytes() as usize;
        let quants_at = block_bytes - 32;
        for block in out.chunks_exact_mut(block_bytes) {
            for q in &mut block[quants_at..] {
                *q = if rng.below(4) == 0 { 127 } else { 0x80 };
            }
        }
    }
    out
}
