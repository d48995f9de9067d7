//! Turning C's pointer and length pairs into slices, with every check a C caller's mistake needs:
//! NULL with a non-zero length, misalignment, a byte size above `isize::MAX`, and overlap between
//! a buffer written and any other buffer of the same call.

use core::ffi::{c_char, CStr};
use core::mem::{align_of, size_of};

use crate::error::{mq_error, Failure};

/// A buffer's address range, for the overlap check.
#[derive(Clone, Copy)]
pub struct Span {
    start: usize,
    end: usize,
}

impl Span {
    fn of<T>(p: *const T, len: usize) -> Span {
        let start = p as usize;
        // The byte size was checked not to overflow before a span is made.
        let bytes = len.wrapping_mul(size_of::<T>());
        Span {
            start,
            end: start.wrapping_add(bytes),
        }
    }

    fn overlaps(self, other: Span) -> bool {
        self.start < self.end
            && other.start < other.end
            && self.start < other.end
            && other.start < self.end
    }
}

/// Fails unless `p .. p + len` elements is a range a slice may cover: `p` not NULL when `len > 0`,
/// aligned for `T`, and at most `isize::MAX` bytes.
fn check<T>(p: *const T, len: usize) -> Result<Span, Failure> {
    if len == 0 {
        return Ok(Span { start: 0, end: 0 });
    }
    if p.is_null() {
        return Err(Failure::Null);
    }
    if !(p as usize).is_multiple_of(align_of::<T>()) {
        return Err(Failure::Misaligned);
    }
    match len.checked_mul(size_of::<T>()) {
        Some(bytes)
            if bytes <= isize::MAX as usize && (p as usize).checked_add(bytes).is_some() =>
        {
            Ok(Span::of(p, len))
        }
        _ => Err(Failure::TooLong),
    }
}

/// Fails if `written` overlaps any of `others`.
pub fn disjoint(written: Span, others: &[Span]) -> Result<(), Failure> {
    if others.iter().any(|o| written.overlaps(*o)) {
        Err(Failure::Overlap)
    } else {
        Ok(())
    }
}

/// The span `p, len` would cover, checked (for overlap checks before making slices).
pub fn span<T>(p: *const T, len: usize) -> Result<Span, Failure> {
    check(p, len)
}

/// A shared slice over `len` elements at `p` (NULL allowed when `len` is 0).
///
/// # Safety
/// If `len > 0`, `p` must point to `len` initialised elements that stay valid and are not written
/// for `'a` (the C caller's promise, documented per function in the header).
pub unsafe fn slice<'a, T>(p: *const T, len: usize) -> Result<&'a [T], Failure> {
    check(p, len)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: `p` is non-NULL, aligned, and `len * size_of::<T>()` bytes fit `isize` (checked
    // above); validity and the absence of writers for `'a` are the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, len) })
}

/// A mutable slice over `len` elements at `p` (NULL allowed when `len` is 0).
///
/// # Safety
/// If `len > 0`, `p` must point to `len` elements valid for writes, not accessed through any other
/// pointer for `'a`; the callers check overlap with the call's other buffers with [`disjoint`].
pub unsafe fn slice_mut<'a, T>(p: *mut T, len: usize) -> Result<&'a mut [T], Failure> {
    check(p, len)?;
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in `slice`, plus exclusivity, which the caller's contract and the overlap checks
    // of the calling function give.
    Ok(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// A NUL-terminated UTF-8 name from C.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string valid for `'a`.
pub unsafe fn name<'a>(p: *const c_char) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::Null);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(p) };
    text.to_str().map_err(|_| Failure::NotUtf8)
}

/// Writes `value` to `out` if `out` is not NULL.
///
/// # Safety
/// `out` must be NULL or valid for one aligned write of `T`.
pub unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL, and valid and aligned by the caller's contract.
        unsafe { out.write(value) };
    }
}

/// Writes `value` to a required out-pointer: fails if it is NULL or misaligned.
///
/// # Safety
/// `out` must be NULL or valid for one write of `T`.
pub unsafe fn put_required<T>(out: *mut T, value: T) -> Result<(), Failure> {
    check(out.cast_const(), 1)?;
    // SAFETY: non-NULL and aligned (checked), valid by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Stores `failure` in `err` (if not NULL) and returns its code.
///
/// # Safety
/// `err` must be NULL or valid for one write of [`mq_error`].
pub unsafe fn fail(err: *mut mq_error, failure: Failure) -> i32 {
    let e = failure.to_c();
    // SAFETY: the caller's contract on `err`.
    unsafe { put(err, e) };
    e.code
}

/// The C result of `result`: `MQ_OK` (and `err` cleared) or the failure's code (and `err` filled).
///
/// # Safety
/// `err` must be NULL or valid for one write of [`mq_error`].
pub unsafe fn finish(err: *mut mq_error, result: Result<(), Failure>) -> i32 {
    match result {
        Ok(()) => {
            // SAFETY: the caller's contract on `err`.
            unsafe { put(err, mq_error::NONE) };
            crate::error::MQ_OK
        }
        // SAFETY: the caller's contract on `err`.
        Err(f) => unsafe { fail(err, f) },
    }
}

/// A static NUL-terminated string for C.
pub const fn c_str(text: &'static CStr) -> *const c_char {
    text.as_ptr()
}
