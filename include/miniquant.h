/* miniquant.h: the C API of miniquant's no_std core (a GGUF pull parser, a catalog, the GGML
 * kernels by type code). Generated from capi/src by cbindgen: do not edit; `cargo xtask capi`
 * fails when it is stale.
 *
 * Conventions:
 * - Every function returns MQ_OK (0) or a negative MQ_E_* code (mq_parser_next may also return
 *   MQ_DONE); when `err` is not NULL it receives the code, the byte offset in the input, the
 *   limit and the values involved (all zero on success).
 * - A pointer/length pair may be NULL/0. A NULL pointer with a non-zero length, a pointer not
 *   aligned for its element type, a length whose byte size overflows, and an output buffer that
 *   overlaps another buffer of the call are error codes (MQ_E_NULL, MQ_E_MISALIGNED_POINTER,
 *   MQ_E_TOO_LONG, MQ_E_OVERLAP), never undefined behaviour in the library.
 * - The library allocates nothing and keeps no pointer past a call, except a parser, which keeps
 *   its input bytes (or its read buffer and callback context) until the caller stops using it.
 * - Strings the library returns are static and NUL-terminated; strings in events are UTF-8 with an
 *   explicit length and no NUL.
 */

#ifndef MINIQUANT_H
#define MINIQUANT_H

#include <stddef.h>
#include <stdint.h>

// Most keys one `mq_catalog` call looks for.
#define MQ_CATALOG_MAX_KEYS 8

// Most tensors one `mq_catalog` call looks for.
#define MQ_CATALOG_MAX_TENSORS 8

// Success.
#define MQ_OK 0

// `mq_parser_next`: the header is complete, no event was written.
#define MQ_DONE 1

// The file does not start with `GGUF` (`found`: its first four bytes, little-endian).
#define MQ_E_BAD_MAGIC -1

// A GGUF version other than 1, 2 or 3 (`found`).
#define MQ_E_UNSUPPORTED_VERSION -2

// The input ends inside `field` (`expected`: bytes needed, `available`: bytes left).
#define MQ_E_TRUNCATED -3

// A count, length or depth exceeds `limit` (`expected`: the limit's value, `found`: the file's).
#define MQ_E_LIMIT_EXCEEDED -4

// A count or length in `field` (`found`) cannot fit the bytes left (`expected`: bytes it needs,
// `available`).
#define MQ_E_EXCEEDS_INPUT -5

// A key, string or tensor name (`field`) is not UTF-8; `offset`: the first bad byte.
#define MQ_E_INVALID_UTF8 -6

// An empty key or tensor name (`field`).
#define MQ_E_EMPTY_NAME -7

// A key or tensor name (`field`) contains a NUL byte.
#define MQ_E_NUL_IN_NAME -8

// A bool other than 0 or 1 (`found`).
#define MQ_E_INVALID_BOOL -9

// A metadata value type code outside 0..=12 (`found`).
#define MQ_E_INVALID_VALUE_TYPE -10

// A ggml type code no ggml version defines (`found`), in a file or passed to a kernel.
#define MQ_E_UNKNOWN_GGML_TYPE -11

// A ggml type code ggml removed (`found`: 4, 5, 31..=33, 36..=38).
#define MQ_E_REMOVED_GGML_TYPE -12

// `general.alignment` is unusable (`detail`: `MQ_ALIGNMENT_*`, `found`: the value or its type).
#define MQ_E_BAD_ALIGNMENT -13

// A tensor dimension above `INT64_MAX` (`found`).
#define MQ_E_DIMENSION_TOO_LARGE -14

// A tensor's element count, byte count or end offset overflows 64 bits.
#define MQ_E_SHAPE_OVERFLOW -15

// A tensor's first dimension (`found`) is not whole blocks of its type (`detail`: the type code,
// `expected`: its block size).
#define MQ_E_NOT_WHOLE_BLOCKS -16

// A tensor's data offset (`found`) is not a multiple of the alignment (`expected`).
#define MQ_E_MISALIGNED_TENSOR -17

// A key or tensor info needs `expected` contiguous bytes; the read buffer holds `found`.
#define MQ_E_BUFFER_TOO_SMALL -18

// The read callback returned a negative value, or more bytes than asked for.
#define MQ_E_IO -19

// A key appears twice.
#define MQ_E_DUPLICATE_KEY -20

// A tensor name appears twice.
#define MQ_E_DUPLICATE_TENSOR -21

// A tensor's data ends (`found`) past the end of the file (`expected`: the file size).
#define MQ_E_TENSOR_OUT_OF_BOUNDS -22

// Two tensors' data overlap.
#define MQ_E_TENSOR_OVERLAP -23

// A length (`found`) is not whole blocks of the type (`detail`: the type code).
#define MQ_E_PARTIAL_BLOCK -24

// Two lengths that must agree do not (`expected`, `found`).
#define MQ_E_LENGTH_MISMATCH -25

// The operation (`found`: `MQ_OP_*`) is not available for the type (`detail`: its code).
#define MQ_E_UNSUPPORTED -26

// A kernel level this CPU or build lacks.
#define MQ_E_LEVEL_UNAVAILABLE -27

// An error of the core this version of the C API has no code for.
#define MQ_E_OTHER -63

// A pointer that may not be NULL was NULL (or NULL with a non-zero length).
#define MQ_E_NULL -64

// A pointer not aligned for its element type.
#define MQ_E_MISALIGNED_POINTER -65

// A length whose byte size does not fit the address space.
#define MQ_E_TOO_LONG -66

// A buffer the call writes overlaps another buffer of the call.
#define MQ_E_OVERLAP -67

// A name passed from C is not UTF-8.
#define MQ_E_NAME_NOT_UTF8 -68

// More names than the catalog holds (`found`: asked, `expected`: capacity).
#define MQ_E_TOO_MANY_NAMES -69

// The `mq_parser` was not initialised by `mq_parser_init_*`.
#define MQ_E_NOT_INITIALISED -70

// `mq_error.limit`: none.
#define MQ_LIMIT_NONE 0

// `mq_limits.max_depth`.
#define MQ_LIMIT_DEPTH 1

// `mq_limits.max_string_bytes`.
#define MQ_LIMIT_STRING_BYTES 2

// `mq_limits.max_key_bytes`.
#define MQ_LIMIT_KEY_BYTES 3

// `mq_limits.max_array_len`.
#define MQ_LIMIT_ARRAY_LEN 4

// `mq_limits.max_metadata`.
#define MQ_LIMIT_METADATA_COUNT 5

// `mq_limits.max_tensors`.
#define MQ_LIMIT_TENSOR_COUNT 6

// `mq_limits.max_dims`.
#define MQ_LIMIT_DIMS 7

// `mq_error.detail` of `MQ_E_BAD_ALIGNMENT`: the value is not a u32 (`found`: its value type).
#define MQ_ALIGNMENT_NOT_U32 1

// The alignment is 0.
#define MQ_ALIGNMENT_ZERO 2

// The alignment (`found`) is not a power of two.
#define MQ_ALIGNMENT_NOT_POWER_OF_TWO 3

// `general.alignment` appears twice.
#define MQ_ALIGNMENT_DUPLICATE 4

// `mq_error.field` values: the header field involved.
#define MQ_FIELD_MAGIC 1

// The u32 version.
#define MQ_FIELD_VERSION 2

// The tensor count.
#define MQ_FIELD_TENSOR_COUNT 3

// The metadata count.
#define MQ_FIELD_METADATA_COUNT 4

// A metadata key.
#define MQ_FIELD_KEY 5

// A value type code.
#define MQ_FIELD_VALUE_TYPE 6

// A metadata value.
#define MQ_FIELD_VALUE 7

// A string value.
#define MQ_FIELD_STRING 8

// An array's element type and length.
#define MQ_FIELD_ARRAY_HEADER 9

// A tensor name.
#define MQ_FIELD_TENSOR_NAME 10

// A tensor's dimension count.
#define MQ_FIELD_DIMENSION_COUNT 11

// A tensor dimension.
#define MQ_FIELD_DIMENSION 12

// `mq_parser_init_read`'s `total_len` when the stream's length is not known.
#define MQ_LEN_UNKNOWN UINT64_MAX

// 64-bit words of an `mq_parser`.
#define MQ_PARSER_WORDS 48

// `mq_event.kind`: the fixed header (`header`).
#define MQ_EVENT_HEADER 1

// A metadata key (`text`) and its value's type (`value_type`).
#define MQ_EVENT_KEY 2

// A scalar value of a key (`value_type`, `scalar`).
#define MQ_EVENT_SCALAR 3

// A run of `len` numeric or bool array elements of type `value_type`, `raw`/`raw_len` bytes in the
// file's byte order (`header.big_endian`).
#define MQ_EVENT_SCALARS 4

// A string value or a piece of one: `text`/`text_len` (UTF-8, not NUL-terminated), at byte `at`
// of the whole string of `len` bytes.
#define MQ_EVENT_STRING 5

// An array of `len` elements of type `value_type` starts.
#define MQ_EVENT_ARRAY_START 6

// The innermost open array ends.
#define MQ_EVENT_ARRAY_END 7

// A tensor info (`text`: its name; `tensor`).
#define MQ_EVENT_TENSOR 8

// The end of the header (`data`); `mq_parser_next` returns `MQ_DONE` after it.
#define MQ_EVENT_END 9

// A parser, in memory the caller owns (on its stack or in a static): its contents are private.
// Initialise it with `mq_parser_init_slice` or `mq_parser_init_read`; it holds no resource, so it
// needs no release. It may be moved (copied) between calls, but not while a call runs.
typedef struct mq_parser {
  // Private.
  uint64_t _opaque[MQ_PARSER_WORDS];
} mq_parser;

// A scalar metadata value.
typedef struct mq_scalar {
  // The value's bits, zero-extended: integers and bools as stored (converted to the host's byte
  // order), f32 and f64 as their IEEE bits.
  uint64_t bits;
  // The value as a double (exact for every type but 64-bit integers beyond 2^53).
  double as_f64;
} mq_scalar;

// A key looked for.
typedef struct mq_found_key {
  // 1 if the file has the key (the other fields are then set), else 0.
  int32_t found;
  // Its value's type code.
  int32_t value_type;
  // For an array, its elements' type code; else -1.
  int32_t element_type;
  // Absolute offset of the value's encoding (for a string, its length prefix), so a program
  // holding the file in memory can read a string or array in place.
  uint64_t value_offset;
  // For a string, its length in bytes; for an array, its element count.
  uint64_t len;
  // For a scalar, its value (`has_scalar` is 1).
  struct mq_scalar scalar;
  // 1 if `scalar` is set.
  int32_t has_scalar;
} mq_found_key;

// A tensor looked for.
typedef struct mq_found_tensor {
  // 1 if the file has the tensor (the other fields are then set), else 0.
  int32_t found;
  // ggml type code.
  uint32_t ggml_type;
  // Number of dimensions.
  uint32_t n_dims;
  // Dimensions, fastest-varying first; unused ones are 1.
  uint64_t ne[4];
  // Offset relative to the data section.
  uint64_t offset;
  // Bytes of data.
  uint64_t bytes;
} mq_found_tensor;

// An error: what, where and which limit. All fields are 0 when the call succeeded; fields an
// error does not use are 0.
typedef struct mq_error {
  // `MQ_E_*`, or `MQ_OK`.
  int32_t code;
  // `MQ_LIMIT_*` for `MQ_E_LIMIT_EXCEEDED`, else `MQ_LIMIT_NONE`.
  int32_t limit;
  // The header field involved (`MQ_FIELD_*`), 0 if none.
  int32_t field;
  // A code-specific detail (see each `MQ_E_*`).
  int32_t detail;
  // 1 if `offset` is a byte offset in the input, 0 if the error has none (kernel errors).
  int32_t has_offset;
  // Byte offset in the input that the error points at.
  uint64_t offset;
  // The value found (count, length, code, ...).
  uint64_t found;
  // The value allowed or needed (the limit's value, the length required, ...).
  uint64_t expected;
  // Bytes that remained in the input, where it matters.
  uint64_t available;
} mq_error;

// The parser's limits (see each field); `mq_limits_default()` gives the defaults.
typedef struct mq_limits {
  // Array nesting depth (at most 8 whatever is set here).
  uint32_t max_depth;
  // Dimensions of one tensor (at most 4).
  uint32_t max_dims;
  // Bytes of one string value.
  uint64_t max_string_bytes;
  // Bytes of one key or tensor name.
  uint64_t max_key_bytes;
  // Elements of one array.
  uint64_t max_array_len;
  // Metadata key/value pairs.
  uint64_t max_metadata;
  // Tensors.
  uint64_t max_tensors;
} mq_limits;

// Reads up to `len` bytes into `buf`; returns the number read (at most `len`), 0 at the end of
// the stream, or a negative value on failure (the parse fails with `MQ_E_IO`).
typedef int (*mq_read_fn)(void *ctx, uint8_t *buf, size_t len);

// The fixed header.
typedef struct mq_header {
  // GGUF version: 1, 2 or 3.
  uint32_t version;
  // 1 if the file is big-endian.
  uint32_t big_endian;
  // Tensor infos that follow the metadata.
  uint64_t tensor_count;
  // Metadata key/value pairs.
  uint64_t metadata_count;
} mq_header;

// A tensor info.
typedef struct mq_tensor_info {
  // ggml type code.
  uint32_t ggml_type;
  // Number of dimensions (0..=4).
  uint32_t n_dims;
  // Dimensions, fastest-varying first; unused ones are 1.
  uint64_t ne[4];
  // Offset of its data relative to the data section.
  uint64_t offset;
  // Elements.
  uint64_t elements;
  // Bytes of data.
  uint64_t bytes;
} mq_tensor_info;

// The end of the header.
typedef struct mq_data_section {
  // The alignment in effect.
  uint32_t alignment;
  // Absolute offset where tensor data starts.
  uint64_t data_offset;
} mq_data_section;

// One event of the header, in file order. `kind` says which fields are set; the others are 0.
// Pointers are valid until the next call on the parser (with a byte-range parser, as long as the
// caller's bytes).
typedef struct mq_event {
  // `MQ_EVENT_*`.
  int32_t kind;
  // The value type code (0..=12) of a key's value, a scalar, a run's or an array's elements;
  // -1 otherwise.
  int32_t value_type;
  // Absolute byte offset where the event's bytes start.
  uint64_t offset;
  // A key, string (piece) or tensor name; UTF-8, not NUL-terminated; NULL when `text_len` is 0.
  const uint8_t *text;
  // Bytes at `text`.
  size_t text_len;
  // Strings: the whole string's length; arrays: their element count; runs: elements in the run.
  uint64_t len;
  // Strings: position of this piece in the whole string.
  uint64_t at;
  // Runs: the elements' bytes as stored.
  const uint8_t *raw;
  // Bytes at `raw`.
  size_t raw_len;
  // `MQ_EVENT_SCALAR`.
  struct mq_scalar scalar;
  // `MQ_EVENT_HEADER`.
  struct mq_header header;
  // `MQ_EVENT_TENSOR`.
  struct mq_tensor_info tensor;
  // `MQ_EVENT_END`.
  struct mq_data_section data;
} mq_event;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Parses the rest of the header with `p` (a parser fresh from `mq_parser_init_*`, or part-way)
// and records the `n_keys` keys named by `keys` into `keys_out[0..n_keys]` and the `n_tensors`
// tensors named by `tensors` into `tensors_out[0..n_tensors]` (a name not in the file gives
// `found = 0`), and the data section's offset into `*data_offset` (may be NULL).
//
// Names are NUL-terminated UTF-8; at most `MQ_CATALOG_MAX_KEYS` keys and `MQ_CATALOG_MAX_TENSORS`
// tensors. Nothing is allocated; the outputs are written only when the whole header parsed.
//
// Returns `MQ_OK` or the parse error (as `mq_parser_next`), `MQ_E_NULL` (a NULL array with a
// non-zero count, a NULL name, `p` NULL), `MQ_E_TOO_MANY_NAMES`, `MQ_E_NAME_NOT_UTF8`,
// `MQ_E_MISALIGNED_POINTER`, `MQ_E_OVERLAP` (the two output arrays overlap) or
// `MQ_E_NOT_INITIALISED`. `err` may be NULL.
//
// # Safety
// `p` as for `mq_parser_next`; `keys`/`tensors` arrays of valid name pointers; `keys_out` and
// `tensors_out` valid for writes of `n_keys` and `n_tensors` records; `data_offset` and `err` NULL
// or valid for writes.
int32_t mq_catalog(struct mq_parser *p,
                   const char *const *keys,
                   size_t n_keys,
                   struct mq_found_key *keys_out,
                   const char *const *tensors,
                   size_t n_tensors,
                   struct mq_found_tensor *tensors_out,
                   uint64_t *data_offset,
                   struct mq_error *err);

// The name of an error code: the core's name for the error (`"LimitExceeded"`, ...) or the C
// API's (`"Null"`, ...); `"Ok"` for `MQ_OK`, `"Done"` for `MQ_DONE`, `"Unknown"` otherwise.
// The string is static and NUL-terminated.
const char *mq_error_name(int32_t code);

// The `mq_limits` field a `MQ_LIMIT_*` code names (`"max_metadata"`, ...), `""` for none. Static,
// NUL-terminated.
const char *mq_limit_name(int32_t limit);

// Elements per block and bytes per block of type `code`, into `*block_size` and `*block_bytes`
// (either may be NULL). Returns `MQ_OK`, `MQ_E_UNKNOWN_GGML_TYPE` or `MQ_E_REMOVED_GGML_TYPE`.
//
// # Safety
// `block_size`, `block_bytes` and `err` NULL or valid for writes.
int32_t mq_type_block(uint32_t code,
                      uint32_t *block_size,
                      uint32_t *block_bytes,
                      struct mq_error *err);

// Bytes that `elements` values of type `code` take, into `*out`. Returns `MQ_OK`,
// `MQ_E_PARTIAL_BLOCK` (not whole blocks, or too large for `size_t`), `MQ_E_UNKNOWN_GGML_TYPE`,
// `MQ_E_REMOVED_GGML_TYPE` or `MQ_E_NULL` (`out` NULL).
//
// # Safety
// `out` valid for writes; `err` NULL or valid for writes.
int32_t mq_row_bytes(uint32_t code, size_t elements, size_t *out, struct mq_error *err);

// The type code `vec_dot` and `matvec` quantize the activations of type `code` into, into `*out`.
// Returns `MQ_OK`, `MQ_E_UNSUPPORTED` (ggml has no vec_dot for the type), a type-code error or
// `MQ_E_NULL`.
//
// # Safety
// `out` valid for writes; `err` NULL or valid for writes.
int32_t mq_vec_dot_type(uint32_t code, uint32_t *out, struct mq_error *err);

// Dequantizes `src_len` bytes of type `code` (whole blocks) at `src` into the `dst_len` floats at
// `dst`, which must be exactly the elements they hold.
//
// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED`, a type-code
// error, `MQ_E_NULL` (a NULL pointer with a non-zero length), `MQ_E_MISALIGNED_POINTER` (`dst` not
// 4-aligned), `MQ_E_TOO_LONG` or `MQ_E_OVERLAP` (`dst` overlaps `src`). Lengths are checked before anything
// is written.
//
// # Safety
// `src` valid for `src_len` bytes of reads; `dst` valid for `dst_len` floats of writes; `err` NULL
// or valid for writes.
int32_t mq_dequantize(uint32_t code,
                      const uint8_t *src,
                      size_t src_len,
                      float *dst,
                      size_t dst_len,
                      struct mq_error *err);

// Quantizes the `src_len` floats at `src` into `dst_len` bytes of type `code` at `dst` (exactly
// the bytes they take; `mq_row_bytes` gives it), byte-identical to ggml's reference quantizer.
//
// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED` (types ggml
// quantizes only with an importance matrix), a type-code error, `MQ_E_NULL`,
// `MQ_E_MISALIGNED_POINTER` (`src` not 4-aligned), `MQ_E_TOO_LONG` or `MQ_E_OVERLAP`.
//
// # Safety
// `src` valid for `src_len` floats of reads; `dst` valid for `dst_len` bytes of writes; `err` NULL
// or valid for writes.
int32_t mq_quantize(uint32_t code,
                    const float *src,
                    size_t src_len,
                    uint8_t *dst,
                    size_t dst_len,
                    struct mq_error *err);

// The dot product of `w` (`w_len` bytes, whole blocks of type `code`) with `x` (`x_len` bytes:
// as many elements in type `mq_vec_dot_type(code)`), into `*out`, in ggml's float order.
//
// Returns `MQ_OK`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_UNSUPPORTED`, a type-code
// error, `MQ_E_NULL` (`out` NULL, or a NULL buffer with a non-zero length),
// `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`.
//
// # Safety
// `w` and `x` valid for their lengths of reads; `out` valid for writes; `err` NULL or valid for
// writes.
int32_t mq_vec_dot(uint32_t code,
                   const uint8_t *w,
                   size_t w_len,
                   const uint8_t *x,
                   size_t x_len,
                   float *out,
                   struct mq_error *err);

// Scratch bytes `mq_matvec` needs for `cols` columns of weights of type `code`, into `*out`.
// Returns `MQ_OK`, `MQ_E_UNSUPPORTED`, `MQ_E_PARTIAL_BLOCK` (`cols` not whole blocks), a type-code
// error or `MQ_E_NULL`.
//
// # Safety
// `out` valid for writes; `err` NULL or valid for writes.
int32_t mq_matvec_scratch_bytes(uint32_t code, size_t cols, size_t *out, struct mq_error *err);

// `y = W x` for a row-major `rows` x `cols` matrix `w` of type `code` (`w_len` bytes: exactly
// `rows` rows of `cols` elements), `x` of `x_len` = `cols` floats and `y` of `y_len` = `rows`
// floats. `x` is quantized once into the caller's `scratch` (`scratch_len` at least
// `mq_matvec_scratch_bytes(code, cols)`). Every output has the bits of `mq_vec_dot` of its row.
//
// Returns `MQ_OK`, `MQ_E_LENGTH_MISMATCH`, `MQ_E_PARTIAL_BLOCK`, `MQ_E_UNSUPPORTED`, a type-code
// error, `MQ_E_NULL`, `MQ_E_MISALIGNED_POINTER` (`x` or `y` not 4-aligned), `MQ_E_TOO_LONG` or
// `MQ_E_OVERLAP` (`y` or `scratch` overlaps another buffer).
//
// # Safety
// Each pointer valid for its length (reads for `w` and `x`, writes for `scratch` and `y`); `err`
// NULL or valid for writes.
int32_t mq_matvec(uint32_t code,
                  const uint8_t *w,
                  size_t w_len,
                  size_t rows,
                  size_t cols,
                  const float *x,
                  size_t x_len,
                  uint8_t *scratch,
                  size_t scratch_len,
                  float *y,
                  size_t y_len,
                  struct mq_error *err);

// The kernel level in use (`"scalar"`, `"avx2"`, `"neon"`, ...): on x86_64 the best this CPU
// has (detected once with `cpuid`, no OS call; so never `"amx"`, which needs the OS's permission
// that this library does not ask for), elsewhere the best the build's target features allow.
// Static, NUL-terminated.
const char *mq_kernel_level(void);

// The default limits: depth 8, strings and arrays up to 2^30, keys up to 65535 bytes, 2^20
// metadata pairs and tensors, 4 dimensions. They accept every real file we know of.
struct mq_limits mq_limits_default(void);

// Starts parsing the `len` bytes at `data` (the whole file, or at least its header). `limits` NULL
// means the defaults. The parser checks the header, not where tensor data lies: before reading a
// tensor, check that `data_offset + offset + bytes` is within the file.
//
// Ownership: `data` stays the caller's and must stay valid and unchanged while the parser is used;
// events point into it. `p` is the caller's memory, overwritten.
//
// Returns `MQ_OK`, or `MQ_E_NULL` (`p` NULL, or `data` NULL with `len > 0`),
// `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`; `err` (may be NULL) receives the details.
//
// # Safety
// `p` valid for writes of an `mq_parser`; `data` valid for `len` bytes as above; `limits` NULL or
// valid; `err` NULL or valid for writes.
int32_t mq_parser_init_slice(struct mq_parser *p,
                             const uint8_t *data,
                             size_t len,
                             const struct mq_limits *limits,
                             struct mq_error *err);

// Starts parsing a stream read through `read(ctx, ...)` into the caller's buffer `buf` of
// `buf_len` bytes (at least 64; every key and tensor info must fit it, else
// `MQ_E_BUFFER_TOO_SMALL`; strings longer than it arrive in pieces). `total_len` is the stream's
// length if known (counts and lengths are then checked against the bytes that remain), else
// `MQ_LEN_UNKNOWN`. `limits` NULL means the defaults.
//
// Ownership: `buf` and `ctx` stay the caller's; `buf` must stay valid and untouched by the caller
// while the parser is used (events point into it until the next call). The parser never seeks.
//
// Returns `MQ_OK`, `MQ_E_NULL` (`p`, `read` or `buf` NULL), `MQ_E_BUFFER_TOO_SMALL` (`buf_len` <
// 64), `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`; `err` (may be NULL) receives the details.
//
// # Safety
// `p` valid for writes of an `mq_parser`; `buf` valid for `buf_len` bytes as above; `read` a
// function that writes at most `len` bytes to its `buf`; `limits` NULL or valid; `err` NULL or
// valid for writes.
int32_t mq_parser_init_read(struct mq_parser *p,
                            mq_read_fn read,
                            void *ctx,
                            uint8_t *buf,
                            size_t buf_len,
                            uint64_t total_len,
                            const struct mq_limits *limits,
                            struct mq_error *err);

// Pulls the next event into `*out`.
//
// Returns `MQ_OK` (an event was written), `MQ_DONE` (the header ended with the previous event:
// nothing written), or an error code: a parse error (`MQ_E_TRUNCATED`, `MQ_E_LIMIT_EXCEEDED`,
// ...; `err` holds its offset and values, and every later call returns it again), `MQ_E_NULL`
// (`p` or `out` NULL) or `MQ_E_NOT_INITIALISED`. `err` may be NULL.
//
// # Safety
// `p` an initialised parser whose input or buffer is still valid; `out` valid for writes of an
// `mq_event`; `err` NULL or valid for writes.
int32_t mq_parser_next(struct mq_parser *p, struct mq_event *out, struct mq_error *err);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* MINIQUANT_H */
