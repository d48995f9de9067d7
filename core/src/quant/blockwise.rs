//! Row helpers shared by the scalar kernels: length checks, views of plain numeric rows as
//! little-endian scalars, and the pairing of a block with its group of activation blocks. Lengths
//! that do not fit are errors, never panics.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use bytemuck::Pod;

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
