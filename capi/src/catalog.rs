//! "Give me these keys and tensors": runs a parser to the end of the header and records the keys and
//! tensors named in advance, with the core's `Catalog` (no heap).

use core::ffi::c_char;

use miniquant::gguf::{Catalog, FoundKey, FoundTensor};

use crate::error::{mq_error, Failure};
use crate::ffi;
use crate::parser::{mq_parser, mq_scalar, scalar_to_c};

/// Most keys one `mq_catalog` call looks for.
pub const MQ_CATALOG_MAX_KEYS: usize = 8;
/// Most tensors one `mq_catalog` call looks for.
pub const MQ_CATALOG_MAX_TENSORS: usize = 8;

/// A key looked for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_found_key {
    /// 1 if the file has the key (the other fields are then set), else 0.
    pub found: i32,
    /// Its value's type code.
    pub value_type: i32,
    /// For an array, its elements' type code; else -1.
    pub element_type: i32,
    /// Absolute offset of the value's encoding (for a string, its length prefix), so a program
    /// holding the file in memory can read a string or array in place.
    pub value_offset: u64,
    /// For a string, its length in bytes; for an array, its element count.
    pub len: u64,
    /// For a scalar, its value (`has_scalar` is 1).
    pub scalar: mq_scalar,
    /// 1 if `scalar` is set.
    pub has_scalar: i32,
}

/// A tensor looked for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_found_tensor {
    /// 1 if the file has the tensor (the other fields are then set), else 0.
    pub found: i32,
    /// ggml type code.
    pub ggml_type: u32,
    /// Number of dimensions.
    pub n_dims: u32,
    /// Dimensions, fastest-varying first; unused ones are 1.
    pub ne: [u64; 4],
    /// Offset relative to the data section.
    pub offset: u64,
    /// Bytes of data.
    pub bytes: u64,
}

fn key_to_c(k: Option<&FoundKey>) -> mq_found_key {
    let Some(k) = k else {
        return mq_found_key {
            element_type: -1,
            ..Default::default()
        };
    };
    mq_found_key {
        found: 1,
        value_type: k.value_type.code() as i32,
        element_type: k.element_type.map_or(-1, |t| t.code() as i32),
        value_offset: k.value_offset,
        len: k.len,
        scalar: k.scalar.map(scalar_to_c).unwrap_or_default(),
        has_scalar: i32::from(k.scalar.is_some()),
    }
}

fn tensor_to_c(t: Option<&FoundTensor>) -> mq_found_tensor {
    let Some(t) = t else {
        return mq_found_tensor::default();
    };
    let mut ne = [1u64; 4];
    for (slot, d) in ne.iter_mut().zip(t.ne.iter().take(t.n_dims as usize)) {
        *slot = *d;
    }
    mq_found_tensor {
        found: 1,
        ggml_type: t.ggml_type.code(),
        n_dims: t.n_dims,
        ne,
        offset: t.offset,
        bytes: t.bytes,
    }
}

/// Collects `n` names from C.
///
/// # Safety
/// `names` NULL (with `n` 0) or `n` valid pointers to NUL-terminated strings.
unsafe fn names<'a, const N: usize>(
    names: *const *const c_char,
    n: usize,
) -> Result<heapless::Vec<&'a str, N>, Failure> {
    if n > N {
        return Err(Failure::TooManyNames {
            found: n,
            capacity: N,
        });
    }
    // SAFETY: the caller's contract on `names`.
    let pointers = unsafe { ffi::slice(names, n) }?;
    let mut out = heapless::Vec::new();
    for &p in pointers {
        // SAFETY: each pointer's contract.
        let name = unsafe { ffi::name(p) }?;
        // At most N pushes: checked above.
        let _ = out.push(name);
    }
    Ok(out)
}

/// Parses the rest of the header with `p` (a parser fresh from `mq_parser_init_*`, or part-way)
/// and records the `n_keys` keys named by `keys` into `keys_out[0..n_keys]` and the `n_tensors`
/// tensors named by `tensors` into `tensors_out[0..n_tensors]` (a name not in the file gives
/// `found = 0`), and the data section's offset into `*data_offset` (may be NULL).
///
/// Names are NUL-terminated UTF-8; at most `MQ_CATALOG_MAX_KEYS` keys and `MQ_CATALOG_MAX_TENSORS`
/// tensors. Nothing is allocated; the outputs are written only when the whole header parsed.
///
/// Returns `MQ_OK` or the parse error (as `mq_parser_next`), `MQ_E_NULL` (a NULL array with a
/// non-zero count, a NULL name, `p` NULL), `MQ_E_TOO_MANY_NAMES`, `MQ_E_NAME_NOT_UTF8`,
/// `MQ_E_MISALIGNED_POINTER`, `MQ_E_OVERLAP` (the two output arrays overlap) or
/// `MQ_E_NOT_INITIALISED`. `err` may be NULL.
///
/// # Safety
/// `p` as for `mq_parser_next`; `keys`/`tensors` arrays of valid name pointers; `keys_out` and
/// `tensors_out` valid for writes of `n_keys` and `n_tensors` records; `data_offset` and `err` NULL
/// or valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mq_catalog(
    p: *mut mq_parser,
    keys: *const *const c_char,
    n_keys: usize,
    keys_out: *mut mq_found_key,
    tensors: *const *const c_char,
    n_tensors: usize,
    tensors_out: *mut mq_found_tensor,
    data_offset: *mut u64,
    err: *mut mq_error,
) -> i32 {
    let result = (|| {
        // SAFETY: the caller's contracts on the name arrays.
        let key_names = unsafe { names::<MQ_CATALOG_MAX_KEYS>(keys, n_keys) }?;
        // SAFETY: as above.
        let tensor_names = unsafe { names::<MQ_CATALOG_MAX_TENSORS>(tensors, n_tensors) }?;
        let keys_span = ffi::span(keys_out.cast_const(), n_keys)?;
        ffi::disjoint(
            keys_span,
            &[ffi::span(tensors_out.cast_const(), n_tensors)?],
        )?;
        // `names` kept both lists within the capacities; the catalog refuses a longer one anyway.
        // Used where `new` returned it: moving it out of the `Result` would copy the whole
        // catalog into a second stack slot (firmware-example/README.md, the C image's stack).
        let mut made =
            Catalog::<MQ_CATALOG_MAX_KEYS, MQ_CATALOG_MAX_TENSORS>::new(&key_names, &tensor_names);
        let catalog = made.as_mut().map_err(|e| Failure::TooManyNames {
            found: e.wanted,
            capacity: e.capacity,
        })?;
        // SAFETY: the caller's contract on `p`.
        unsafe { crate::parser::drive(p, |event, offset| catalog.observe(event, offset)) }?;
        // SAFETY: the caller's contract on `keys_out`, with the overlap checked above.
        let keys_out = unsafe { ffi::slice_mut(keys_out, n_keys) }?;
        for (out, name) in keys_out.iter_mut().zip(&key_names) {
            *out = key_to_c(catalog.key(name));
        }
        // SAFETY: the caller's contract on `tensors_out`.
        let tensors_out = unsafe { ffi::slice_mut(tensors_out, n_tensors) }?;
        for (out, name) in tensors_out.iter_mut().zip(&tensor_names) {
            *out = tensor_to_c(catalog.tensor(name));
        }
        // SAFETY: the caller's contract on `data_offset`.
        unsafe { ffi::put(data_offset, catalog.data_offset().unwrap_or(0)) };
        Ok(())
    })();
    // SAFETY: the caller's contract on `err`.
    unsafe { ffi::finish(err, result) }
}
