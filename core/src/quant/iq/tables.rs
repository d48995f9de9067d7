//! The small IQ tables (`ksigns_iq2xs`, `kvalues_iq4nl` in ggml-common.h) and the accessors every
//! IQ kernel reads the grids through. Accessors mask the index to the table length (a power of
//! two), so no input can index out of bounds.

use super::grid_iq1::IQ1S_GRID;

/// `ksigns_iq2xs`: a 7-bit sign code -> 8 sign bits (bit `j` set = value `j` negative); bit 7 makes
/// the number of minus signs even, so it need not be stored.
#[rustfmt::skip]
pub(crate) static KSIGNS_IQ2XS: [u8; 128] = [
      0, 129, 130,   3, 132,   5,   6, 135, 136,   9,  10, 139,  12, 141, 142,  15,
    144,  17,  18, 147,  20, 149, 150,  23,  24, 153, 154,  27, 156,  29,  30, 159,
    160,  33,  34, 163,  36, 165, 166,  39,  40, 169, 170,  43, 172,  45,  46, 175,
     48, 177, 178,  51, 180,  53,  54, 183, 184,  57,  58, 187,  60, 189, 190,  63,
    192,  65,  66, 195,  68, 197, 198,  71,  72, 201, 202,  75, 204,  77,  78, 207,
     80, 209, 210,  83, 212,  85,  86, 215, 216,  89,  90, 219,  92, 221, 222,  95,
     96, 225, 226,  99, 228, 101, 102, 231, 232, 105, 106, 235, 108, 237, 238, 111,
    240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255,
];

/// `kvalues_iq4nl`: the 16 non-linear levels of IQ4_NL and IQ4_XS, denser near zero.
#[rustfmt::skip]
pub(crate) static KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The 8 bytes of entry `index` of a grid of `u64` groups, value `j` in byte `j`.
#[inline(always)]
pub(super) fn grid8<const N: usize>(grid: &[u64; N], index: usize) -> [u8; 8] {
    grid[index % N].to_le_bytes()
}

/// The 4 bytes of entry `index` of a grid of `u32` groups, value `j` in byte `j`.
#[inline(always)]
pub(super) fn grid4<const N: usize>(grid: &[u32; N], index: usize) -> [u8; 4] {
    grid[index % N].to_le_bytes()
}

/// The 8 signed values (-1, 0, +1) of IQ1 grid entry `index` (11 bits).
#[inline(always)]
pub(super) fn iq1_grid(index: usize) -> [i8; 8] {
    grid8(&IQ1S_GRID, index).map(|b| b as i8)
}

/// The 8 sign bits of a 7-bit sign code (higher bits of `code` are ignored, as ggml masks them).
#[inline(always)]
pub(super) fn ksigns(code: u32) -> u8 {
    KSIGNS_IQ2XS[(code & 127) as usize]
}

/// `value * (signs & kmask_iq2xs[j] ? -1.f : 1.f)` (`kmask_iq2xs[j]` is `1 << j`), as the
/// reference is compiled: a conditional negation.
///
/// For a non-NaN value the product is exactly `±value` either way; only a NaN's sign depends on the
/// form. IEEE 754 and C leave the sign of an arithmetic NaN to the implementation, and GCC at `-O2`
/// (the oracle's flags; scalar and vectorized alike) and Clang both compile the multiply as a
/// conditional sign flip, so a NaN's sign flips too. Rust likewise lets LLVM pick either form for a
/// multiply by ±1; the explicit negation is a pure sign-bit operation with one defined result, so
/// the output no longer depends on that choice. (GCC at `-O3` vectorizes it as a real multiply,
/// which keeps the NaN's sign: ggml's own NaN bits here depend on how it was built.)
#[inline(always)]
pub(super) fn apply_sign(value: f32, signs: u8, j: usize) -> f32 {
    if signs & (1 << (j & 7)) != 0 {
        -value
    } else {
        value
    }
}

/// `signs & kmask_iq2xs[j] ? -1 : 1`.
#[inline(always)]
pub(super) fn sign_i32(signs: u8, j: usize) -> i32 {
    if signs & (1 << (j & 7)) != 0 {
        -1
    } else {
        1
    }
}

/// The IQ4 level of a 4-bit code.
#[inline(always)]
pub(super) fn iq4_level(code: u8) -> i8 {
    KVALUES_IQ4NL[usize::from(code & 0xf)]
}

#[cfg(test)]
mod tests {
    use super::super::grid_iq2::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID};
    use super::super::grid_iq3::{IQ3S_GRID, IQ3XXS_GRID};
    use super::*;

    #[test]
    fn apply_sign_flips_the_sign_bit_of_everything_selected() {
        let negative_nan = f32::from_bits(0xffd0_6000);
        let positive_nan = f32::from_bits(0x7fc0_2000);
        for j in 0..8 {
            let on = 1u8 << j;
            let off = !on;
            assert_eq!(apply_sign(2.5, on, j), -2.5);
            assert_eq!(apply_sign(2.5, off, j), 2.5);
            assert_eq!(apply_sign(0.0, on, j).to_bits(), (-0.0f32).to_bits());
            assert_eq!(apply_sign(-0.0, on, j).to_bits(), 0);
            assert_eq!(apply_sign(f32::INFINITY, on, j), f32::NEG_INFINITY);
            assert_eq!(apply_sign(negative_nan, on, j).to_bits(), 0x7fd0_6000);
            assert_eq!(apply_sign(positive_nan, on, j).to_bits(), 0xffc0_2000);
            for nan in [negative_nan, positive_nan] {
                assert_eq!(apply_sign(nan, off, j).to_bits(), nan.to_bits());
            }
        }
    }

    /// Sum of `(i + 1) * entry` mod 2^64: changes if any entry or its position changes.
    fn position_checksum(entries: impl Iterator<Item = u64>) -> u64 {
        entries.enumerate().fold(0u64, |acc, (i, v)| {
            acc.wrapping_add((i as u64 + 1).wrapping_mul(v))
        })
    }

    fn assert_strictly_increasing<T: PartialOrd + core::fmt::Debug>(t: &[T]) {
        for w in t.windows(2) {
            assert!(w[0] < w[1], "{:?} !< {:?}", w[0], w[1]);
        }
    }

    fn assert_bytes_in(bytes: impl Iterator<Item = u8>, allowed: &[u8]) {
        for b in bytes {
            assert!(allowed.contains(&b), "byte {b:#04x} not in {allowed:02x?}");
        }
    }

    // The checksums below were computed with a script from the tables in ggml-common.h (ggml
    // d99724f), independently of this file.
    #[test]
    fn iq2_grids_match_ggml() {
        assert_eq!(
            position_checksum(IQ2XXS_GRID.iter().copied()),
            0xcb9c_a27f_96a6_81f5
        );
        assert_eq!(
            position_checksum(IQ2XS_GRID.iter().copied()),
            0xa3bb_3aa0_abcc_b48c
        );
        assert_eq!(
            position_checksum(IQ2S_GRID.iter().copied()),
            0x20f0_afd1_8f24_c859
        );
        // ggml lists every grid in ascending order, so strict order also proves the entries distinct.
        assert_strictly_increasing(&IQ2XXS_GRID);
        assert_strictly_increasing(&IQ2XS_GRID);
        assert_strictly_increasing(&IQ2S_GRID);
        for grid in [&IQ2XXS_GRID[..], &IQ2XS_GRID[..], &IQ2S_GRID[..]] {
            assert_bytes_in(
                grid.iter().flat_map(|e| e.to_le_bytes()),
                &[0x08, 0x19, 0x2b],
            );
        }
    }

    #[test]
    fn iq3_grids_match_ggml() {
        assert_eq!(
            position_checksum(IQ3XXS_GRID.iter().map(|&e| u64::from(e))),
            0x11be_6d9a_520e
        );
        assert_eq!(
            position_checksum(IQ3S_GRID.iter().map(|&e| u64::from(e))),
            0x114b_10ed_9fb0
        );
        assert_strictly_increasing(&IQ3XXS_GRID);
        assert_strictly_increasing(&IQ3S_GRID);
        assert_bytes_in(
            IQ3XXS_GRID.iter().flat_map(|e| e.to_le_bytes()),
            &[4, 12, 20, 28, 36, 44, 52, 62],
        );
        assert_bytes_in(
            IQ3S_GRID.iter().flat_map(|e| e.to_le_bytes()),
            &[1, 3, 5, 7, 9, 11, 13, 15],
        );
    }

    #[test]
    fn iq1_grid_matches_ggml() {
        assert_eq!(
            position_checksum(IQ1S_GRID.iter().copied()),
            0x0574_9c55_a877_6663
        );
        assert_bytes_in(
            IQ1S_GRID.iter().flat_map(|e| e.to_le_bytes()),
            &[0x00, 0x01, 0xff],
        );
        // Not sorted in ggml: check distinctness by sorting a copy.
        let mut sorted = IQ1S_GRID;
        sorted.sort_unstable();
        assert_strictly_increasing(&sorted);
        assert_eq!(iq1_grid(0), [-1; 8]);
    }

    #[test]
    fn ksigns_has_even_parity_and_keeps_the_code() {
        assert_eq!(
            position_checksum(KSIGNS_IQ2XS.iter().map(|&e| u64::from(e))),
            0x12_ba80
        );
        for (code, &signs) in KSIGNS_IQ2XS.iter().enumerate() {
            assert_eq!(usize::from(signs & 127), code);
            assert_eq!(signs.count_ones() % 2, 0, "code {code}");
        }
    }

    #[test]
    fn iq4_levels_are_increasing() {
        assert_strictly_increasing(&KVALUES_IQ4NL);
        assert_eq!((KVALUES_IQ4NL[0], KVALUES_IQ4NL[15]), (-127, 113));
        assert_eq!(iq4_level(0xf8), 1);
    }
}
