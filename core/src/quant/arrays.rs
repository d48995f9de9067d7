//! Element-wise helpers over fixed-size arrays for the kernels' hot loops.
//!
//! `core`'s `<[T; N]>::map` goes through `try_map`, which LLVM does not always inline for the array
//! sizes used here (16 to 256), leaving an out-of-line call and scalar code; a plain loop over
//! `iter_mut().zip(..)` inlines and vectorizes.

/// `f` applied to each element.
#[inline(always)]
pub(crate) fn map<T: Copy, U: Copy + Default, const N: usize>(
    a: &[T; N],
    f: impl Fn(T) -> U,
) -> [U; N] {
    let mut out = [U::default(); N];
    for (o, &v) in out.iter_mut().zip(a) {
        *o = f(v);
    }
    out
}

/// `a[i] * b[i]` for each element.
#[inline(always)]
pub(crate) fn products<const N: usize>(a: &[f32; N], b: &[f32; N]) -> [f32; N] {
    let mut out = [0.0f32; N];
    for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
        *o = a * b;
    }
    out
}
