//! Row drivers shared by the scalar kernels: they view a row as blocks and as fixed-size groups of
//! f32, check that the counts agree, and run a per-block kernel over them. Lengths that do not fit
//! are errors, never panics.

use super::cast::{blocks, blocks_mut, Block};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use bytemuck::Pod;

/// Views `values` as groups of `N`, or fails with [`Error::PartialBlock`] for `B`'s type.
fn groups<B: Block, const N: usize>(values: &[f32]) -> Result<&[[f32; N]]>
where
    [f32; N]: Pod,
{
    bytemuck::try_cast_slice(values).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len: values.len() as u64,
    })
}

/// Mutable form of [`groups`].
fn groups_mut<B: Block, const N: usize>(values: &mut [f32]) -> Result<&mut [[f32; N]]>
where
    [f32; N]: Pod,
{
    let len = values.len() as u64;
    bytemuck::try_cast_slice_mut(values).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len,
    })
}

/// `Ok` when two lengths that must agree do, else [`Error::LengthMismatch`].
pub(crate) fn same_len(expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            expected: expected as u64,
            found: found as u64,
        })
    }
}

/// Decodes every block of `src` into the matching group of `N` values of `dst`.
pub(crate) fn dequantize_blocks<B: Block, const N: usize>(
    src: &[u8],
    dst: &mut [f32],
    kernel: impl Fn(&B, &mut [f32; N]),
) -> Result<()>
where
    [f32; N]: Pod,
{
    let blocks = blocks::<B>(src)?;
    let out = groups_mut::<B, N>(dst)?;
    same_len(blocks.len(), out.len())?;
    for (block, values) in blocks.iter().zip(out) {
        kernel(block, values);
    }
    Ok(())
}

/// Encodes every group of `N` values of `src` into the matching block of `dst`.
pub(crate) fn quantize_blocks<B: Block, const N: usize>(
    src: &[f32],
    dst: &mut [u8],
    kernel: impl Fn(&[f32; N]) -> B,
) -> Result<()>
where
    [f32; N]: Pod,
{
    let input = groups::<B, N>(src)?;
    let out = blocks_mut::<B>(dst)?;
    same_len(input.len(), out.len())?;
    for (values, block) in input.iter().zip(out) {
        *block = kernel(values);
    }
    Ok(())
}

/// Views a weight row and an activation row as blocks, which must be equally many.
pub(crate) fn paired_blocks<'a, W: Block, X: Block>(
    w: &'a [u8],
    x: &'a [u8],
) -> Result<(&'a [W], &'a [X])> {
    let w = blocks::<W>(w)?;
    let x = blocks::<X>(x)?;
    same_len(w.len(), x.len())?;
    Ok((w, x))
}

/// Views `bytes` as little-endian scalars of `N` bytes each (the plain numeric types).
pub(crate) fn scalars<const N: usize>(t: GgmlType, bytes: &[u8]) -> Result<&[[u8; N]]>
where
    [u8; N]: Pod,
{
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::PartialBlock {
        ggml_type: t,
        len: bytes.len() as u64,
    })
}

/// Mutable form of [`scalars`].
pub(crate) fn scalars_mut<const N: usize>(t: GgmlType, bytes: &mut [u8]) -> Result<&mut [[u8; N]]>
where
    [u8; N]: Pod,
{
    let len = bytes.len() as u64;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| Error::PartialBlock { ggml_type: t, len })
}

/// The two operands of a vec_dot: `w` as blocks of `B` and `x` as blocks of `Y`, `per_block` of
/// them for each `B` (a 64-value NVFP4 block pairs with two 32-value Q8_0 blocks).
pub(crate) fn vec_dot_operands<'a, B: Block, Y: Block>(
    w: &'a [u8],
    x: &'a [u8],
    per_block: usize,
) -> Result<(&'a [B], &'a [Y])> {
    let ws = blocks::<B>(w)?;
    let ys = blocks::<Y>(x)?;
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
pub(crate) fn with_groups<'a, B, Y, const R: usize>(
    ws: &'a [B],
    ys: &'a [Y],
) -> impl Iterator<Item = (&'a B, &'a [Y; R])> {
    ws.iter().zip(
        ys.chunks_exact(R)
            .filter_map(|g| <&[Y; R]>::try_from(g).ok()),
    )
}
