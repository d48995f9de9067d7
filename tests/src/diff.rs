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
    /// Values whose bits differ.
    pub differing: usize,
    /// The first difference: index, ours, reference.
    pub first: Option<(usize, u32, u32)>,
}

/// Compares two f32 slices by `to_bits` (so NaN payloads and the sign of zero count).
pub fn compare_floats(ours: &[f32], reference: &[f32]) -> FloatDiff {
    assert_eq!(ours.len(), reference.len(), "outputs of different lengths");
    let mut diff = FloatDiff {
        values: ours.len(),
        ..FloatDiff::default()
    };
    for (i, (a, b)) in ours.iter().zip(reference).enumerate() {
        if a.to_bits() != b.to_bits() {
            diff.differing += 1;
            diff.first.get_or_insert((i, a.to_bits(), b.to_bits()));
        }
    }
    diff
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
