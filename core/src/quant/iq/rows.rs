//! Drivers that run a per-block kernel over whole rows of blocks: they view the bytes as blocks,
//! check that both sides hold the same number of elements (an error, never a panic) and hand each
//! kernel fixed-size arrays, so the kernels themselves index nothing that input can move.
//!
//! Shared by the `iq` and `misc` families.

use crate::error::{Error, Result};
use crate::quant::cast::{self, Block};

/// `Ok` if `blocks` blocks of `per_block` elements are exactly `elements` elements.
fn check_elements(blocks: usize, per_block: usize, elements: usize) -> Result<()> {
    match blocks.checked_mul(per_block) {
        Some(expected) if expected == elements => Ok(()),
        expected => Err(Error::LengthMismatch {
            expected: expected.map_or(u64::MAX, |e| e as u64),
            found: elements as u64,
        }),
    }
}

/// Dequantizes every block of `src` into the matching `N` values of `dst`.
pub(in crate::quant) fn dequantize_blocks<B: Block, const N: usize>(
    src: &[u8],
    dst: &mut [f32],
    kernel: fn(&B, &mut [f32; N]),
) -> Result<()> {
    let blocks = cast::blocks::<B>(src)?;
    check_elements(blocks.len(), N, dst.len())?;
    for (block, out) in blocks.iter().zip(dst.chunks_exact_mut(N)) {
        // `chunks_exact_mut(N)` only yields slices of length N, so the conversion always succeeds.
        if let Ok(out) = <&mut [f32; N]>::try_from(out) {
            kernel(block, out);
        }
    }
    Ok(())
}

/// Quantizes every `N` values of `src` into the matching block of `dst`.
pub(in crate::quant) fn quantize_blocks<B: Block, const N: usize>(
    src: &[f32],
    dst: &mut [u8],
    kernel: fn(&[f32; N]) -> B,
) -> Result<()> {
    let blocks = cast::blocks_mut::<B>(dst)?;
    check_elements(blocks.len(), N, src.len())?;
    for (block, x) in blocks.iter_mut().zip(src.chunks_exact(N)) {
        if let Ok(x) = <&[f32; N]>::try_from(x) {
            *block = kernel(x);
        }
    }
    Ok(())
}

/// The two operands of a vec_dot: `w` as blocks of `B` and `x` as blocks of `Y`, `per_block` of
/// them for each `B` (a 64-value NVFP4 block pairs with two 32-value Q8_0 blocks).
pub(in crate::quant) fn vec_dot_operands<'a, B: Block, Y: Block>(
    w: &'a [u8],
    x: &'a [u8],
    per_block: usize,
) -> Result<(&'a [B], &'a [Y])> {
    let ws = cast::blocks::<B>(w)?;
    let ys = cast::blocks::<Y>(x)?;
    let expected = ws
        .len()
        .checked_mul(per_block)
        .and_then(|n| n.checked_mul(core::mem::size_of::<Y>()));
    if expected != Some(x.len()) {
        return Err(Error::LengthMismatch {
            expected: expected.map_or(u64::MAX, |e| e as u64),
            found: x.len() as u64,
        });
    }
    Ok((ws, ys))
}

/// Pairs each block of `ws` with its `R` activation blocks.
pub(in crate::quant) fn with_groups<'a, B, Y, const R: usize>(
    ws: &'a [B],
    ys: &'a [Y],
) -> impl Iterator<Item = (&'a B, &'a [Y; R])> {
    ws.iter().zip(
        ys.chunks_exact(R)
            .filter_map(|g| <&[Y; R]>::try_from(g).ok()),
    )
}
