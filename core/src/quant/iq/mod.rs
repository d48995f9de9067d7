//! The IQ family: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (lattice codes that index the
//! lookup grids of ggml-common.h) and IQ4_NL, IQ4_XS (4-bit indices into 16 non-linear levels).
//!
//! This step holds the grids and tables; the kernels follow.

#[allow(dead_code)]
pub(in crate::quant) mod cmath;
#[allow(dead_code)]
mod grid_iq1;
#[allow(dead_code)]
mod grid_iq2;
#[allow(dead_code)]
mod grid_iq3;
#[allow(dead_code)]
mod tables;

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
