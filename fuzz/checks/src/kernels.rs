//! `kernels`: an arbitrary type and bytes through dequantize, quantize, vec_dot, matvec, matmul
//! and the packed matvec and matmul (their types only), at the scalar level and at every SIMD
//! level this CPU has (`amx` too where Linux grants it). Errors are fine; panics are
//! findings, and so is any level whose answer differs from the scalar one (the same error, or the
//! same bits in every output; any NaN matches any NaN, as Rust leaves NaN payloads unspecified).
//! Lengths come from the input too, so mismatched and partial lengths are exercised.
//!
//! Input: byte 0 picks the type (`GgmlType::ALL`), byte 1 the operation (low six bits) and a
//! length skew (top two bits: half the inputs get exact lengths, the rest are one off), the rest
//! is the data, cut to whole blocks so the kernels themselves run, not only the length checks.

use miniquant::quant::{self, level, matvec, packed, Level};
use miniquant::{Error, GgmlType};

/// Stands for every byte of a quantized block whose inputs hold a NaN (see `Case::quantize`).
const NAN_BLOCK: u32 = u32::MAX;

/// The largest output a case allocates, so a long input cannot ask for unbounded memory.
const MAX_VALUES: usize = 1 << 20;

/// The check.
pub fn check(data: &[u8]) {
    let [t, op, rest @ ..] = data else {
        return;
    };
    let t = GgmlType::ALL[usize::from(*t) % GgmlType::ALL.len()];
    let skew = [0, 0, -1, 1][usize::from(op >> 6)];
    let skewed = |n: usize| n.saturating_add_signed(skew);
    let case = Case { t, skewed: &skewed };
    // The `amx` level is available only once this process holds Linux's permission for it.
    static AMX: std::sync::Once = std::sync::Once::new();
    AMX.call_once(|| {
        miniquant_std::amx::request();
    });
    match (op & 0x3f) % 7 {
        0 => same_at_every_level(|l| case.dequantize(l, rest)),
        1 => same_at_every_level(|l| case.quantize(l, rest)),
        2 => same_at_every_level(|l| case.vec_dot(l, rest)),
        3 => same_at_every_level(|l| case.matvec(l, rest)),
        4 => same_at_every_level(|l| case.matmul(l, rest)),
        5 => same_at_every_level(|l| case.packed(l, rest)),
        _ => same_at_every_level(|l| case.packed_matmul(l, rest)),
    }
}

/// A packed operation's matrix: its type and shape, plain and packed.
struct PackedCase {
    t: GgmlType,
    rows: usize,
    cols: usize,
    plain: Vec<u8>,
    packed: Vec<u8>,
}

/// One operation's answer at one level: an error, or its outputs as bit patterns.
type Answer = Result<Vec<u32>, Error>;

/// Runs `op` at the scalar level and at every other available level; panics (a finding) when a
/// level answers differently.
fn same_at_every_level(op: impl Fn(Level) -> Answer) {
    let scalar = op(Level::Scalar);
    for l in level::available().filter(|&l| l != Level::Scalar) {
        let answer = op(l);
        match (&scalar, &answer) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.len(), b.len(), "level {} gives another length", l.name());
                if let Some(i) = (0..a.len()).find(|&i| !same_bits(a[i], b[i])) {
                    panic!(
                        "level {} differs from scalar at output {i}: {:#010x} vs {:#010x}",
                        l.name(),
                        b[i],
                        a[i]
                    );
                }
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "level {} gives another error", l.name()),
            _ => panic!("level {}: {answer:?}, scalar: {scalar:?}", l.name()),
        }
    }
}

/// Equal bits, or both NaN.
fn same_bits(a: u32, b: u32) -> bool {
    a == b || (f32::from_bits(a).is_nan() && f32::from_bits(b).is_nan())
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Little-endian f32s from the data (whole chunks only).
fn floats(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `n` activation values from the data, cycling it; byte patterns spread over the whole f32
/// range (NaN, infinities, subnormals included).
fn activations(data: &[u8], n: usize) -> Vec<f32> {
    (0..n.min(MAX_VALUES))
        .map(|i| {
            let b = data.get(i % data.len().max(1)).copied().unwrap_or(0);
            let spread = u32::from(b).wrapping_mul(0x0101_0101) ^ (i as u32).rotate_left(23);
            f32::from_bits(spread)
        })
        .collect()
}

struct Case<'a> {
    t: GgmlType,
    skewed: &'a dyn Fn(usize) -> usize,
}

impl Case<'_> {
    /// `data` cut to whole blocks of the type.
    fn whole_blocks<'d>(&self, data: &'d [u8]) -> &'d [u8] {
        let block = (self.t.block_bytes() as usize).max(1);
        &data[..data.len() / block * block]
    }

    fn dequantize(&self, l: Level, data: &[u8]) -> Answer {
        let data = self.whole_blocks(data);
        let n = quant::elements_in(self.t, data.len()).unwrap_or(data.len());
        let mut out = vec![0f32; (self.skewed)(n).min(MAX_VALUES)];
        quant::dequantize_at(l, self.t, data, &mut out)?;
        Ok(bits(&out))
    }

    /// The bytes of a block whose inputs hold a NaN are replaced by [`NAN_BLOCK`]: the quantizers
    /// turn values into integers bit by bit (ggml's `nearest_int` adds 2^23 + 2^22 and keeps the low
    /// mantissa bits), so such a block's bytes follow the NaN's payload, and which operand's
    /// payload an operation on two NaNs returns is left unspecified by Rust (LLVM may swap the
    /// operands of a commutative operation). ggml's own bytes for them depend on its compiler too.
    /// Every other block must be identical at every level.
    fn quantize(&self, l: Level, data: &[u8]) -> Answer {
        let block_values = (self.t.block_size() as usize).max(1);
        let mut values = floats(data);
        values.truncate(values.len() / block_values * block_values);
        let bytes = quant::bytes_for(self.t, values.len()).unwrap_or(values.len());
        let mut out = vec![0u8; (self.skewed)(bytes)];
        quant::quantize_at(l, self.t, &values, &mut out)?;
        let block_bytes = (self.t.block_bytes() as usize).max(1);
        let answer = out
            .chunks(block_bytes)
            .zip(values.chunks(block_values))
            .flat_map(|(bytes, inputs)| {
                let has_nan = inputs.iter().any(|v| v.is_nan());
                bytes
                    .iter()
                    .map(move |&b| if has_nan { NAN_BLOCK } else { u32::from(b) })
            })
            .collect();
        Ok(answer)
    }

    fn vec_dot(&self, l: Level, data: &[u8]) -> Answer {
        let t = self.t;
        // Weights first, activations (in the vec-dot type) after.
        let split = quant::vec_dot_type(t)
            .and_then(|vd| {
                let x_per_block = vd.bytes_for(u64::from(t.block_size()))? as usize;
                let per_block = t.block_bytes() as usize + x_per_block;
                Some(data.len() / per_block * t.block_bytes() as usize)
            })
            .unwrap_or(data.len() / 2);
        let (w, x) = data.split_at((self.skewed)(split).min(data.len()));
        Ok(vec![quant::vec_dot_at(l, t, w, x)?.to_bits()])
    }

    /// Byte 0: columns in blocks (low nibble) and rows (high nibble); weights after it, cut to
    /// whole rows when there are enough (so the kernels run, not only the length checks).
    fn shape<'d>(&self, data: &'d [u8]) -> Option<(usize, usize, &'d [u8])> {
        let (&shape, weights) = data.split_first()?;
        let cols = usize::from(shape & 0x0f) * self.t.block_size() as usize;
        let rows = usize::from(shape >> 4);
        let whole_rows = quant::bytes_for(self.t, cols)
            .ok()
            .and_then(|row_bytes| weights.get(..row_bytes.checked_mul(rows)?))
            .unwrap_or(weights);
        Some((cols, rows, whole_rows))
    }

    fn matvec(&self, l: Level, data: &[u8]) -> Answer {
        let Some((cols, rows, w)) = self.shape(data) else {
            return Ok(Vec::new());
        };
        let x = activations(w, (self.skewed)(cols));
        let mut scratch = vec![0u8; matvec::matvec_scratch_bytes(self.t, cols)?];
        let mut y = vec![0f32; rows];
        matvec::matvec_at(l, self.t, w, rows, cols, &x, &mut scratch, &mut y)?;
        Ok(bits(&y))
    }

    /// The packed case of `data`: one of the packed types, `16 · (high nibble of byte 0) + (low
    /// nibble of byte 1)` rows and byte 1's high nibble of blocks a row, the bytes after the
    /// first `header` cycled into the plain matrix, and that matrix packed. `None`: too short.
    fn packed_matrix(&self, data: &[u8], header: usize) -> Option<Result<PackedCase, Error>> {
        const TYPES: [GgmlType; 3] = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0];
        let t = TYPES[self.t.code() as usize % TYPES.len()];
        let (&[shape, more], _) = data.split_first_chunk::<2>()?;
        let rest = data.get(header.max(2)..)?;
        let rows = usize::from(shape >> 4) * packed::GROUP_ROWS + usize::from(more & 0x0f);
        let cols = usize::from(more >> 4) * t.block_size() as usize;
        let bytes = quant::bytes_for(t, cols).unwrap_or(0).saturating_mul(rows);
        let plain: Vec<u8> = rest.iter().copied().cycle().take(bytes).collect();
        let mut packed_w = vec![0u8; plain.len()];
        Some(
            packed::pack(t, &plain, rows, cols, &mut packed_w).map(|()| PackedCase {
                t,
                rows,
                cols,
                plain,
                packed: packed_w,
            }),
        )
    }

    /// The packed matrix of [`Case::packed_matrix`] (after bytes 0 and 1): its product must have
    /// the plain matvec's bits at the same level (checked here), and the scalar twin's at every
    /// level (by the caller).
    fn packed(&self, l: Level, data: &[u8]) -> Answer {
        let Some(case) = self.packed_matrix(data, 2) else {
            return Ok(Vec::new());
        };
        let case = case?;
        let (t, rows, cols, w, packed_w) =
            (case.t, case.rows, case.cols, &case.plain, &case.packed);
        let x = activations(w, (self.skewed)(cols));
        let mut scratch = vec![0u8; matvec::matvec_scratch_bytes(t, cols)?];
        let mut y = vec![0f32; rows];
        packed::packed_matvec_at(l, t, packed_w, rows, cols, &x, &mut scratch, &mut y)?;
        let mut plain = vec![0f32; rows];
        matvec::matvec_at(l, t, w, rows, cols, &x, &mut scratch, &mut plain)?;
        let (y, plain) = (bits(&y), bits(&plain));
        if let Some(i) = (0..rows).find(|&i| !same_bits(y[i], plain[i])) {
            panic!("packed {} differs from plain at row {i} of {rows}", t);
        }
        Ok(y)
    }

    /// The packed matmul of [`Case::packed_matrix`]'s matrix (after bytes 0-2; byte 2's low six
    /// bits plus one are the columns: up to 64, past the 16 where the `amx` level's tiles start
    /// and the 32 of a tile pair): every output must have the plain matmul's bits at the same
    /// level, and the scalar twin's at every level.
    fn packed_matmul(&self, l: Level, data: &[u8]) -> Answer {
        let Some(&columns) = data.get(2) else {
            return Ok(Vec::new());
        };
        let Some(case) = self.packed_matrix(data, 3) else {
            return Ok(Vec::new());
        };
        let case = case?;
        let (t, rows, cols, w, packed_w) =
            (case.t, case.rows, case.cols, &case.plain, &case.packed);
        let n = 1 + usize::from(columns & 0x3f);
        let x = activations(w, (self.skewed)(cols * n));
        let mut scratch = vec![0u8; packed::packed_activation_bytes(t, cols, n)?];
        let mut y = vec![0f32; rows * n];
        packed::packed_matmul_at(l, t, packed_w, rows, cols, n, &x, &mut scratch, &mut y)?;
        let mut scratch = vec![0u8; matvec::matmul_scratch_bytes(t, cols, n)?];
        let mut plain = vec![0f32; rows * n];
        matvec::matmul(l, t, w, rows, cols, n, &x, &mut scratch, &mut plain)?;
        let (y, plain) = (bits(&y), bits(&plain));
        if let Some(i) = (0..y.len()).find(|&i| !same_bits(y[i], plain[i])) {
            panic!("packed matmul {t} differs from plain at output {i} of {rows} x {n}");
        }
        Ok(y)
    }

    /// 1..=4 columns (top bits of the last byte), so pairs and odd columns both occur.
    fn matmul(&self, l: Level, data: &[u8]) -> Answer {
        let Some((cols, rows, w)) = self.shape(data) else {
            return Ok(Vec::new());
        };
        let n = 1 + usize::from(w.last().copied().unwrap_or(0) >> 6);
        let x = activations(w, (self.skewed)(cols.saturating_mul(n)));
        let mut scratch = vec![0u8; matvec::matmul_scratch_bytes(self.t, cols, n)?];
        let mut y = vec![0f32; rows.saturating_mul(n)];
        matvec::matmul(l, self.t, w, rows, cols, n, &x, &mut scratch, &mut y)?;
        Ok(bits(&y))
    }
}
