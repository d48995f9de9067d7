//! Placeholder dispatcher for the iq family, replaced by the family's kernels.

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

pub(crate) fn dequantize(t: GgmlType, _src: &[u8], _dst: &mut [f32]) -> Result<()> {
    Err(Error::Unsupported {
        ggml_type: t,
        op: Op::Dequantize,
    })
}

pub(crate) fn quantize(t: GgmlType, _src: &[f32], _dst: &mut [u8]) -> Result<()> {
    Err(Error::Unsupported {
        ggml_type: t,
        op: Op::Quantize,
    })
}

pub(crate) fn vec_dot(t: GgmlType, _w: &[u8], _x: &[u8]) -> Result<f32> {
    Err(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    })
}
