//! Bit-level comparison of two outputs, reporting where they first differ in terms a kernel author
//! can act on: which block, which byte or element, and the two values.

use std::fmt::Write;

/// The result of comparing two byte strings laid out in blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByteDiff {
    /// Blocks compared.
    pub blocks: usize,
    /// Bytes that differ.
    pub bytes: usize,
    /// Blocks with at least one differing byte.
    pub blocks_differing: usize,
    /// The first difference: block index, byte within the block, ours, reference.
    pub first: Option<(usize, usize, u8, u8)>,
}

/// Compares `ours` with `reference` block by block (`block_bytes` each). `mask(block, byte)` says
/// whether a byte is meaningful; masked-out bytes are not compared. Lengths must match.
pub fn compare_bytes(
    ours: &[u8],
    reference: &[u8],
    block_bytes: usize,
    mask: impl Fn(usize, usize) -> bool,
) -> ByteDiff {
    assert_eq!(ours.len(), reference.len(), "outputs of different lengths");
    let mut diff = ByteDiff::default();
    for (block, (a, b)) in ours
        .chunks(block_bytes)
        .zip(reference.chunks(block_bytes))
        .enumerate()
    {
        diff.blocks += 1;
        let mut differs = false;
        for (byte, (&x, &y)) in a.iter().zip(b).enumerate() {
            if x != y && mask(block, byte) {
                diff.bytes += 1;
                differs = true;
                diff.first.get_or_insert((block, byte, x, y));
            }
        }
        diff.blocks_differing += usize::from(differs);
    }
    diff
}

/// The result of comparing two f32 slices by their bits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloatDiff {
    /// Values compared.
    pub values: usize,
    /// Values whose bits differ, not counting pairs that are both NaN.
    pub differing: usize,
    /// Pairs that are both NaN with different bits (sign or payload).
    pub nan_bits: usize,
    /// The first counted difference: index, ours, reference.
    pub first: Option<(usize, u32, u32)>,
    /// The first NaN pair with different bits.
    pub first_nan: Option<(usize, u32, u32)>,
}

impl FloatDiff {
    /// Whether the outputs are identical by `to_bits`, with NaN sign and payload differences
    /// counted only when `strict_nan`.
    pub fn is_identical(&self, strict_nan: bool) -> bool {
        self.differing == 0 && (!strict_nan || self.nan_bits == 0)
    }

    /// Adds another comparison's counts (its indices are kept as they are).
    pub fn absorb(&mut self, other: &FloatDiff) {
        self.values += other.values;
        self.differing += other.differing;
        self.nan_bits += other.nan_bits;
        self.first = self.first.or(other.first);
        self.first_nan = self.first_nan.or(other.first_nan);
    }
}

/// Compares two f32 slices by `to_bits`: inf, the sign of zero and NaN-ness count as differences.
/// NaN pairs with different bits are counted apart (see [`strict_nan`]).
pub fn compare_floats(ours: &[f32], reference: &[f32]) -> FloatDiff {
    assert_eq!(ours.len(), reference.len(), "outputs of different lengths");
    let mut diff = FloatDiff {
        values: ours.len(),
        ..FloatDiff::default()
    };
    for (i, (a, b)) in ours.iter().zip(reference).enumerate() {
        if a.to_bits() == b.to_bits() {
            continue;
        }
        if a.is_nan() && b.is_nan() {
            diff.nan_bits += 1;
            diff.first_nan.get_or_insert((i, a.to_bits(), b.to_bits()));
        } else {
            diff.differing += 1;
            diff.first.get_or_insert((i, a.to_bits(), b.to_bits()));
        }
    }
    diff
}

/// Whether NaN sign and payload differences fail the comparisons of dot products (and of gguf-py's
/// numpy dequantization) (`MINIQUANT_STRICT_NAN=1`). Dequantized values against ggml are always
/// compared strictly.
///
/// Off by default for a dot product's result, which is NaN whenever any of its products or scales
/// is, and whose NaN bits are then not a property of the algorithm:
/// - when both operands of an add or multiply are NaN, x86 (SSE/AVX) returns the first source
///   operand's NaN and AArch64 the first operand's; since these operations are commutative, the
///   compiler may swap their operands (C's and Rust's semantics allow it), so which NaN survives the
///   sum depends on instruction selection, on both sides;
/// - an invalid operation (`inf * 0`, `inf - inf`) creates a new NaN: negative (`0xffc00000`) on
///   x86, positive (`0x7fc00000`) on AArch64, and Rust leaves the sign and payload of any
///   arithmetic NaN unspecified, so LLVM may also fold such an operation to its own canonical NaN.
///
/// NaN-ness itself always counts.
pub fn strict_nan() -> bool {
    std::env::var_os("MINIQUANT_STRICT_NAN").is_some_and(|v| v == "1")
}

/// A summary note on NaN bit differences, empty if there are none.
pub fn nan_note(nan_bits: usize, strict: bool) -> String {
    match (nan_bits, strict) {
        (0, _) => String::new(),
        (n, true) => format!(", {n} NaN sign/payload differences (strict)"),
        (n, false) => format!(
            ", {n} NaN sign/payload differences (tolerated; MINIQUANT_STRICT_NAN=1 fails them)"
        ),
    }
}

/// One line describing a float difference: index, block (for `block_size` elements per block) and
/// both values with their bits.
pub fn describe_float(first: (usize, u32, u32), block_size: usize) -> String {
    let (i, a, b) = first;
    let mut s = String::new();
    let _ = write!(
        s,
        "first at element {i} (block {}, element {} in it): ours {:e} ({a:#010x}), ggml {:e} ({b:#010x})",
        i / block_size.max(1),
        i % block_size.max(1),
        f32::from_bits(a),
        f32::from_bits(b)
    );
    s
}
