//! The kernel table: for every block type, its kernels at every [`Level`], in one list.
//!
//! `kernel_table!` below is the only place that names the block types: from one line per type it
//! builds
//! - [`ArchKernels`], the set of SIMD overrides one level provides (each arch module fills in a
//!   constant of it, everything else stays [`Ops::NONE`]);
//! - the [`Kernels`] impl of each block type, which picks the kernel for a level (walking the
//!   level's fallback chain down to the scalar twin);
//! - `visit`, the one dispatch from a run-time [`GgmlType`] to its block type, which the public
//!   byte-slice API uses.
//!
//! Kernel families sit behind cargo features (`legacy`, `k-quants`, `iq`, `misc`, default on): a
//! disabled family has no [`Kernels`] impls and no dispatch arm, so nothing references its kernels
//! (or the IQ grids) and the linker drops them. The activation types Q8_0, Q8_1 and Q8_K and the
//! plain float types F32, F16 and BF16 are always present. The typed API ([`super::typed`]) references only the kernels of the types it is called
//! with.

use super::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::arch::pick;
use super::blockwise::with_groups;
use super::cast::Block;
use super::iq::{
    iq1_m::BlockIq1M, iq1_s::BlockIq1S, iq2_s::BlockIq2S, iq2_xs::BlockIq2Xs, iq2_xxs::BlockIq2Xxs,
    iq3_s::BlockIq3S, iq3_xxs::BlockIq3Xxs, iq4_nl::BlockIq4Nl, iq4_xs::BlockIq4Xs,
};
use super::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use super::legacy::plain::{BlockBf16, BlockF16, BlockF32};
use super::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use super::level::Level;
use super::misc::{
    mxfp4::BlockMxfp4, nvfp4::BlockNvfp4, q1_0::BlockQ1_0, q2_0::BlockQ2_0, tq1_0::BlockTq1_0,
    tq2_0::BlockTq2_0,
};
use super::output_columns::OutputColumns;
#[allow(unused_imports)]
use super::{iq, k_quants, legacy, misc};
use crate::ggml_type::GgmlType;

/// A dequantize kernel: blocks to f32.
pub type DequantizeFn<W> = fn(&[W], &mut [f32]);
/// A quantize kernel: f32 to blocks.
pub type QuantizeFn<W> = fn(&[f32], &mut [W]);
/// A vec_dot kernel: weight blocks against activation blocks.
pub type VecDotFn<W, X> = fn(&[W], &[X]) -> f32;
/// A rows kernel: `out[r]` = vec_dot of weight row `r` (`row_blocks` blocks each, one after
/// another in `w`) against `x`, for every `r < out.len()`, with vec_dot's bits. It lets a SIMD
/// level work on several rows at once (their serial float sums interleaved) without changing
/// any row's order of operations.
pub type RowsFn<W, X> = fn(w: &[W], row_blocks: usize, x: &[X], out: &mut [f32]);
/// A 2x2 kernel: two weight rows against two activation columns, returning
/// `[w0·x0, w0·x1, w1·x0, w1·x1]`, each with vec_dot's bits (i8mm `smmla` computes such tiles).
pub type VecDot2x2Fn<W, X> = fn(w0: &[W], w1: &[W], x0: &[X], x1: &[X]) -> [f32; 4];
/// A matmul kernel: every row of `w` (`row_blocks` blocks each, one after another) against every
/// one of the `n` activation columns in `x` (one after another, `x.len() / n` blocks each),
/// writing row `r` of column `c` to `y.get_mut(c, r)`, each output with vec_dot's bits. It
/// lets a SIMD level keep a tile of rows × columns in registers, decoding each weight block once
/// for several columns; the rows and columns left over by its tiles are its own to finish.
pub type MatmulFn<W, X> =
    fn(w: &[W], row_blocks: usize, x: &[X], n: usize, y: &mut OutputColumns<'_, '_>);
/// A packed-rows kernel: `out[r]` = vec_dot of row `r` of the whole groups of rows in `packed`
/// (the layout of [`super::packed`], `row_blocks` blocks a row) against `x`, for every
/// `r < out.len()` (a multiple of [`super::packed::GROUP_ROWS`]), with vec_dot's bits.
pub type PackedRowsFn<X> = fn(packed: &[u8], row_blocks: usize, x: &[X], out: &mut [f32]);
/// A packed matmul kernel: the whole groups of rows in `packed` (as [`PackedRowsFn`]'s) against
/// the `n` activation columns in `x` (`row_blocks` blocks each), with each activation block's
/// integer start in `starts` (little-endian i32, [`super::packed`]'s), writing row `r` of column
/// `c` to `y.get_mut(c, r)`, each output with vec_dot's bits.
pub type PackedMatmulFn<X> = fn(
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    starts: &[[u8; 4]],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
);

/// One block type's kernels at one level; `None` means "not at this level" (the next lower level
/// of the chain is used). The signatures are those of the scalar twins:
/// - `dequantize(blocks, out)` fills `out[..blocks.len() * VALUES]`;
/// - `quantize(values, blocks)` encodes `values[..blocks.len() * VALUES]`;
/// - `vec_dot(w, x)` with `x.len() == w.len() * ACTIVATION_BLOCKS`.
///
/// Callers check those lengths once; a kernel given other lengths must stay memory-safe and
/// panic-free (it may compute garbage).
pub struct Ops<W: 'static, X: 'static> {
    /// Blocks to f32.
    pub dequantize: Option<DequantizeFn<W>>,
    /// f32 to blocks.
    pub quantize: Option<QuantizeFn<W>>,
    /// Dot product against the activation blocks.
    pub vec_dot: Option<VecDotFn<W, X>>,
    /// Several rows against one activation vector (matvec); `None`: vec_dot row by row.
    pub rows: Option<RowsFn<W, X>>,
    /// Two rows against two activation vectors (matmul); `None`: four vec_dots.
    pub vec_dot_2x2: Option<VecDot2x2Fn<W, X>>,
    /// Many rows against many activation vectors (matmul); `None`: `vec_dot_2x2` or `rows`.
    pub matmul: Option<MatmulFn<W, X>>,
    /// Packed groups of rows against one activation vector; `None`: the packed layout's scalar
    /// twin.
    pub packed_rows: Option<PackedRowsFn<X>>,
    /// Packed groups of rows against many activation vectors; `None`: the packed rows kernel
    /// column by column.
    pub packed_matmul: Option<PackedMatmulFn<X>>,
}

impl<W, X> Ops<W, X> {
    /// No override at all.
    pub const NONE: Ops<W, X> = Ops {
        dequantize: None,
        quantize: None,
        vec_dot: None,
        rows: None,
        vec_dot_2x2: None,
        matmul: None,
        packed_rows: None,
        packed_matmul: None,
    };
}

/// A block type with its kernels at every level.
pub trait Kernels: Block {
    /// Values per block.
    const VALUES: usize;
    /// The block type of `vec_dot`'s second operand (the type itself when there is no vec_dot).
    type Activation: Kernels;
    /// Activation blocks per weight block in `vec_dot` (2 for the 64-value NVFP4 against Q8_0).
    const ACTIVATION_BLOCKS: usize;
    /// The dequantize kernel at `level` (the scalar one if `level` is not available here).
    fn dequantize_kernel(level: Level) -> DequantizeFn<Self>;
    /// The quantize kernel at `level`, `None` if ggml quantizes the type only with extra data.
    fn quantize_kernel(level: Level) -> Option<QuantizeFn<Self>>;
    /// The vec_dot kernel at `level`, `None` if the type has no vec_dot.
    fn vec_dot_kernel(level: Level) -> Option<VecDotFn<Self, Self::Activation>>;
    /// The multi-row kernel at `level`, `None` where rows run one vec_dot each.
    fn rows_kernel(level: Level) -> Option<RowsFn<Self, Self::Activation>>;
    /// The 2x2 kernel at `level`, `None` where a tile runs four vec_dots.
    fn vec_dot_2x2_kernel(level: Level) -> Option<VecDot2x2Fn<Self, Self::Activation>>;
    /// The matmul kernel at `level`, `None` where matmul runs the 2x2 or rows kernels.
    fn matmul_kernel(level: Level) -> Option<MatmulFn<Self, Self::Activation>>;
    /// The packed-rows kernel at `level`, `None` where no level of its chain has one.
    fn packed_rows_kernel(level: Level) -> Option<PackedRowsFn<Self::Activation>>;
    /// The packed matmul kernel at `level`, `None` where no level of its chain has one.
    fn packed_matmul_kernel(level: Level) -> Option<PackedMatmulFn<Self::Activation>>;
}

/// A computation generic over the block type, run by [`visit`] for a run-time [`GgmlType`].
pub(crate) trait Visitor {
    /// What the computation returns.
    type Out;
    /// Runs it for block type `B`.
    fn visit<B: Kernels>(self) -> Self::Out;
}

/// The scalar twin of a dequantize kernel: `kernel` on each block and its group of `N` values.
#[inline(always)]
pub(crate) fn dequantize_each<B, const N: usize>(
    blocks: &[B],
    out: &mut [f32],
    kernel: impl Fn(&B, &mut [f32; N]),
) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(N)) {
        if let Ok(values) = <&mut [f32; N]>::try_from(values) {
            kernel(block, values);
        }
    }
}

/// The scalar twin of a quantize kernel: `kernel` on each group of `N` values.
#[inline(always)]
pub(crate) fn quantize_each<B, const N: usize>(
    values: &[f32],
    blocks: &mut [B],
    kernel: impl Fn(&[f32; N]) -> B,
) {
    for (group, block) in values.chunks_exact(N).zip(blocks) {
        if let Ok(group) = <&[f32; N]>::try_from(group) {
            *block = kernel(group);
        }
    }
}

macro_rules! scalar_quantize {
    (none, $B:ty, $N:expr) => {
        None
    };
    ($f:path, $B:ty, $N:expr) => {{
        let kernel: fn(&[f32], &mut [$B]) = |x, b| quantize_each::<$B, { $N }>(x, b, $f);
        Some(kernel)
    }};
}

macro_rules! scalar_vec_dot {
    (none, $B:ty, $A:ty) => {
        None
    };
    (grouped $R:expr, $f:path, $B:ty, $A:ty) => {{
        let kernel: fn(&[$B], &[$A]) -> f32 = |w, x| $f(with_groups::<$B, $A, { $R }>(w, x));
        Some(kernel)
    }};
    ($f:path, $B:ty, $A:ty) => {{
        let kernel: fn(&[$B], &[$A]) -> f32 = $f;
        Some(kernel)
    }};
}

macro_rules! vec_dot_type_of {
    ([none], $A:ty) => {
        None
    };
    ([$($dot:tt)+], $A:ty) => {
        Some(<$A as Block>::TYPE)
    };
}

macro_rules! kernel_table {
    ($(
        $(#[$gate:meta])*
        $T:ident => $B:ty, $field:ident,
            dequantize $deq:path,
            quantize [$($quant:tt)+],
            vec_dot $A:ty, per $R:expr, [$($dot:tt)+];
    )*) => {
        /// The SIMD overrides of one level, one field per block type (named after the type).
        #[allow(missing_docs)]
        pub struct ArchKernels {
            $(pub $field: Ops<$B, $A>,)*
        }

        impl ArchKernels {
            /// No override for any type: everything runs the next lower level's kernels.
            pub const NONE: ArchKernels = ArchKernels {
                $($field: Ops::NONE,)*
            };
        }

        $(
            $(#[$gate])*
            impl Kernels for $B {
                const VALUES: usize = GgmlType::$T.block_size() as usize;
                type Activation = $A;
                const ACTIVATION_BLOCKS: usize = $R;

                fn dequantize_kernel(level: Level) -> fn(&[Self], &mut [f32]) {
                    let scalar: fn(&[Self], &mut [f32]) =
                        |b, out| dequantize_each::<$B, { GgmlType::$T.block_size() as usize }>(b, out, $deq);
                    pick!(level, $field.dequantize).unwrap_or(scalar)
                }

                fn quantize_kernel(level: Level) -> Option<QuantizeFn<Self>> {
                    let scalar: Option<QuantizeFn<Self>> =
                        scalar_quantize!($($quant)+, $B, GgmlType::$T.block_size() as usize);
                    scalar.map(|s| pick!(level, $field.quantize).unwrap_or(s))
                }

                fn vec_dot_kernel(level: Level) -> Option<VecDotFn<Self, $A>> {
                    let scalar: Option<VecDotFn<Self, $A>> =
                        scalar_vec_dot!($($dot)+, $B, $A);
                    scalar.map(|s| pick!(level, $field.vec_dot).unwrap_or(s))
                }

                fn rows_kernel(level: Level) -> Option<RowsFn<Self, $A>> {
                    pick!(level, $field.rows)
                }

                fn vec_dot_2x2_kernel(level: Level) -> Option<VecDot2x2Fn<Self, $A>> {
                    pick!(level, $field.vec_dot_2x2)
                }

                fn matmul_kernel(level: Level) -> Option<MatmulFn<Self, $A>> {
                    pick!(level, $field.matmul)
                }

                fn packed_rows_kernel(level: Level) -> Option<PackedRowsFn<$A>> {
                    pick!(level, $field.packed_rows)
                }

                fn packed_matmul_kernel(level: Level) -> Option<PackedMatmulFn<$A>> {
                    pick!(level, $field.packed_matmul)
                }
            }
        )*

        /// ggml's `type_traits_cpu[t].vec_dot_type` as this table holds it, whether or not the
        /// type's kernel family is compiled in: `None` where the table has no vec_dot for `t` (or
        /// no row).
        pub(crate) const fn vec_dot_type(t: GgmlType) -> Option<GgmlType> {
            match t {
                $(GgmlType::$T => vec_dot_type_of!([$($dot)+], $A),)*
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }

        $(
            // The block struct has the type's ggml geometry (its value count is `GgmlType`'s).
            $(#[$gate])*
            const _: () = assert!(
                core::mem::size_of::<$B>() == GgmlType::$T.block_bytes() as usize
                    && core::mem::align_of::<$B>() == 1
                    && <$B as Block>::TYPE as u32 == GgmlType::$T as u32
            );
        )*

        /// Runs `visitor` for the block type of `t`; `None` for F64 and the integer types (no
        /// block type, see `legacy::plain`) and for types whose kernel family is not compiled in.
        pub(crate) fn visit<V: Visitor>(t: GgmlType, visitor: V) -> Option<V::Out> {
            match t {
                $(
                    $(#[$gate])*
                    GgmlType::$T => Some(visitor.visit::<$B>()),
                )*
                #[allow(unreachable_patterns)]
                _ => None,
            }
        }
    };
}

kernel_table! {
    // The activation types, always present.
    Q8_0 => BlockQ8_0, q8_0,
        dequantize legacy::q8_0::dequantize_block,
        quantize [legacy::q8_0::quantize_block],
        vec_dot BlockQ8_0, per 1, [legacy::q8_0::vec_dot];
    Q8_1 => BlockQ8_1, q8_1,
        dequantize legacy::q8_1::dequantize_block,
        quantize [legacy::q8_1::quantize_block],
        vec_dot BlockQ8_1, per 1, [none];
    Q8_K => BlockQ8K, q8_k,
        dequantize k_quants::q8_k::dequantize_block,
        quantize [k_quants::q8_k::quantize_block],
        vec_dot BlockQ8K, per 1, [none];

    // The plain float types, always present: one value per block, dotted with their own type.
    F32 => BlockF32, f32,
        dequantize legacy::plain::dequantize_f32,
        quantize [legacy::plain::quantize_f32],
        vec_dot BlockF32, per 1, [legacy::plain::vec_dot_f32];
    F16 => BlockF16, f16,
        dequantize legacy::plain::dequantize_f16,
        quantize [legacy::plain::quantize_f16],
        vec_dot BlockF16, per 1, [legacy::plain::vec_dot_f16];
    BF16 => BlockBf16, bf16,
        dequantize legacy::plain::dequantize_bf16,
        quantize [legacy::plain::quantize_bf16],
        vec_dot BlockBf16, per 1, [legacy::plain::vec_dot_bf16];

    #[cfg(feature = "legacy")]
    Q4_0 => BlockQ4_0, q4_0,
        dequantize legacy::q4_0::dequantize_block,
        quantize [legacy::q4_0::quantize_block],
        vec_dot BlockQ8_0, per 1, [legacy::q4_0::vec_dot];
    #[cfg(feature = "legacy")]
    Q4_1 => BlockQ4_1, q4_1,
        dequantize legacy::q4_1::dequantize_block,
        quantize [legacy::q4_1::quantize_block],
        vec_dot BlockQ8_1, per 1, [legacy::q4_1::vec_dot];
    #[cfg(feature = "legacy")]
    Q5_0 => BlockQ5_0, q5_0,
        dequantize legacy::q5_0::dequantize_block,
        quantize [legacy::q5_0::quantize_block],
        vec_dot BlockQ8_0, per 1, [legacy::q5_0::vec_dot];
    #[cfg(feature = "legacy")]
    Q5_1 => BlockQ5_1, q5_1,
        dequantize legacy::q5_1::dequantize_block,
        quantize [legacy::q5_1::quantize_block],
        vec_dot BlockQ8_1, per 1, [legacy::q5_1::vec_dot];

    #[cfg(feature = "k-quants")]
    Q2_K => BlockQ2K, q2_k,
        dequantize k_quants::q2_k::dequantize_block,
        quantize [k_quants::q2_k::quantize_block],
        vec_dot BlockQ8K, per 1, [k_quants::q2_k::vec_dot];
    #[cfg(feature = "k-quants")]
    Q3_K => BlockQ3K, q3_k,
        dequantize k_quants::q3_k::dequantize_block,
        quantize [k_quants::q3_k::quantize_block],
        vec_dot BlockQ8K, per 1, [k_quants::q3_k::vec_dot];
    #[cfg(feature = "k-quants")]
    Q4_K => BlockQ4K, q4_k,
        dequantize k_quants::q4_k::dequantize_block,
        quantize [k_quants::q4_k::quantize_block],
        vec_dot BlockQ8K, per 1, [k_quants::q4_k::vec_dot];
    #[cfg(feature = "k-quants")]
    Q5_K => BlockQ5K, q5_k,
        dequantize k_quants::q5_k::dequantize_block,
        quantize [k_quants::q5_k::quantize_block],
        vec_dot BlockQ8K, per 1, [k_quants::q5_k::vec_dot];
    #[cfg(feature = "k-quants")]
    Q6_K => BlockQ6K, q6_k,
        dequantize k_quants::q6_k::dequantize_block,
        quantize [k_quants::q6_k::quantize_block],
        vec_dot BlockQ8K, per 1, [k_quants::q6_k::vec_dot];

    #[cfg(feature = "iq")]
    IQ2_XXS => BlockIq2Xxs, iq2_xxs,
        dequantize iq::iq2_xxs::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq2_xxs::vec_dot];
    #[cfg(feature = "iq")]
    IQ2_XS => BlockIq2Xs, iq2_xs,
        dequantize iq::iq2_xs::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq2_xs::vec_dot];
    #[cfg(feature = "iq")]
    IQ2_S => BlockIq2S, iq2_s,
        dequantize iq::iq2_s::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq2_s::vec_dot];
    #[cfg(feature = "iq")]
    IQ3_XXS => BlockIq3Xxs, iq3_xxs,
        dequantize iq::iq3_xxs::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq3_xxs::vec_dot];
    #[cfg(feature = "iq")]
    IQ3_S => BlockIq3S, iq3_s,
        dequantize iq::iq3_s::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq3_s::vec_dot];
    #[cfg(feature = "iq")]
    IQ1_S => BlockIq1S, iq1_s,
        dequantize iq::iq1_s::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq1_s::vec_dot];
    #[cfg(feature = "iq")]
    IQ1_M => BlockIq1M, iq1_m,
        dequantize iq::iq1_m::dequantize_block,
        quantize [none],
        vec_dot BlockQ8K, per 1, [iq::iq1_m::vec_dot];
    #[cfg(feature = "iq")]
    IQ4_NL => BlockIq4Nl, iq4_nl,
        dequantize iq::iq4_nl::dequantize_block,
        quantize [iq::iq4_nl::quantize_block],
        vec_dot BlockQ8_0, per 1, [iq::iq4_nl::vec_dot];
    #[cfg(feature = "iq")]
    IQ4_XS => BlockIq4Xs, iq4_xs,
        dequantize iq::iq4_xs::dequantize_block,
        quantize [iq::iq4_xs::quantize_block],
        vec_dot BlockQ8K, per 1, [iq::iq4_xs::vec_dot];

    #[cfg(feature = "misc")]
    TQ1_0 => BlockTq1_0, tq1_0,
        dequantize misc::tq1_0::dequantize_block,
        quantize [misc::tq1_0::quantize_block],
        vec_dot BlockQ8K, per 1, [misc::tq1_0::vec_dot];
    #[cfg(feature = "misc")]
    TQ2_0 => BlockTq2_0, tq2_0,
        dequantize misc::tq2_0::dequantize_block,
        quantize [misc::tq2_0::quantize_block],
        vec_dot BlockQ8K, per 1, [misc::tq2_0::vec_dot];
    #[cfg(feature = "misc")]
    MXFP4 => BlockMxfp4, mxfp4,
        dequantize misc::mxfp4::dequantize_block,
        quantize [misc::mxfp4::quantize_block],
        vec_dot BlockQ8_0, per 1, [misc::mxfp4::vec_dot];
    #[cfg(feature = "misc")]
    NVFP4 => BlockNvfp4, nvfp4,
        dequantize misc::nvfp4::dequantize_block,
        quantize [misc::nvfp4::quantize_block],
        vec_dot BlockQ8_0, per 2, [grouped 2, misc::nvfp4::vec_dot];
    #[cfg(feature = "misc")]
    Q1_0 => BlockQ1_0, q1_0,
        dequantize misc::q1_0::dequantize_block,
        quantize [misc::q1_0::quantize_block],
        vec_dot BlockQ8_0, per misc::q1_0::Q8_PER_BLOCK,
            [grouped misc::q1_0::Q8_PER_BLOCK, misc::q1_0::vec_dot];
    #[cfg(feature = "misc")]
    Q2_0 => BlockQ2_0, q2_0,
        dequantize misc::q2_0::dequantize_block,
        quantize [misc::q2_0::quantize_block],
        vec_dot BlockQ8_0, per misc::q2_0::Q8_PER_BLOCK,
            [grouped misc::q2_0::Q8_PER_BLOCK, misc::q2_0::vec_dot];
}
