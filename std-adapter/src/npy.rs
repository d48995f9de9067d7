//! NumPy `.npy` files: the one reader and the one writer of the commands' f32 (and raw block)
//! inputs and outputs, so that what `numpy.save` writes is read and what `numpy.load` reads is
//! written.
//!
//! Written: format version 1.0, C order, `<f4` (f32) or `|u1` (bytes), the header padded with
//! spaces and a newline so that the data starts at a multiple of 64 bytes, as NumPy writes it.
//!
//! Read: versions 1.0, 2.0 and 3.0. The header is a Python dict literal; only what `numpy.save`
//! writes is accepted (the keys `descr`, `fortran_order` and `shape` once each, a type string, a
//! bool, a tuple of sizes), parsed without recursion and within [`MAX_HEADER_BYTES`] and
//! [`MAX_DIMS`], and the data must be exactly as long as the shape says. Anything else is an
//! error that says what was found.

use std::fmt;

/// The 6-byte magic every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header read (NumPy itself refuses headers over 10,000 bytes by default).
pub const MAX_HEADER_BYTES: usize = 1 << 16;

/// Most dimensions read (NumPy's own limit is 64).
pub const MAX_DIMS: usize = 64;

/// The element types written and checked here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// Little-endian f32: `<f4`.
    F32,
    /// Bytes: `|u1` (raw ggml blocks).
    U8,
}

impl Dtype {
    /// NumPy's type string (`dtype.str`).
    pub fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::U8 => "|u1",
        }
    }

    fn item_bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::U8 => 1,
        }
    }

    fn numpy_name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::U8 => "uint8",
        }
    }
}

/// Why bytes are not a `.npy` array of the wanted type. `Display` writes one line that completes a
/// sentence whose subject is the file (`"x.npy" {error}`), e.g. `holds float64 ('<f8'), not ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyError(String);

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NpyError {}

fn error<T>(message: impl Into<String>) -> Result<T, NpyError> {
    Err(NpyError(message.into()))
}

/// A `.npy` header as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The type string (`<f4`, `<f8`, `|u1`, ...).
    pub descr: String,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The shape, slowest-varying first (empty for a 0-d array).
    pub shape: Vec<u64>,
    /// Where the data starts.
    pub data_offset: usize,
}

/// Whether `bytes` start with the `.npy` magic.
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The header of a `.npy` file held in `bytes`.
pub fn read_header(bytes: &[u8]) -> Result<Header, NpyError> {
    if !has_magic(bytes) {
        return error("is not a .npy file: it does not start with NumPy's magic \"\\x93NUMPY\"");
    }
    let (major, minor) = match bytes.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return error("has a .npy header cut short after its magic"),
    };
    let (len_bytes, utf8) = match major {
        1 => (2, false),
        2 => (4, false),
        3 => (4, true),
        _ => {
            return error(format!(
            "has .npy format version {major}.{minor}, which is not known (1.0, 2.0 and 3.0 are)"
        ))
        }
    };
    let len_field = bytes
        .get(8..8 + len_bytes)
        .ok_or_else(|| NpyError("has a .npy header cut short in its length".into()))?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    if header_len > MAX_HEADER_BYTES as u64 {
        return error(format!(
            "has a .npy header of {header_len} bytes, over the limit of {MAX_HEADER_BYTES}"
        ));
    }
    let start = 8 + len_bytes;
    // Below MAX_HEADER_BYTES: fits usize.
    let data_offset = start + header_len as usize;
    let Some(raw) = bytes.get(start..data_offset) else {
        return error(format!(
            "has a .npy header of {header_len} bytes but only {} of them are in the file",
            bytes.len().saturating_sub(start)
        ));
    };
    // Versions 1 and 2 are latin-1, which is ASCII for every header NumPy writes.
    let text = match std::str::from_utf8(raw) {
        Ok(t) if utf8 || t.is_ascii() => t,
        _ => return error("has a .npy header that is not text (ASCII, or UTF-8 in version 3.0)"),
    };
    let (descr, fortran_order, shape) = parse_dict(text)?;
    Ok(Header {
        descr,
        fortran_order,
        shape,
        data_offset,
    })
}

/// The shape and data of a `.npy` array of `dtype` in C order held in `bytes`, the data borrowed.
pub fn read(bytes: &[u8], dtype: Dtype) -> Result<(Vec<u64>, &[u8]), NpyError> {
    let header = read_header(bytes)?;
    if header.descr != dtype.descr() {
        return error(format!(
            "holds {} ('{}'), not {} ('{}'): save a.astype('{}')",
            describe_descr(&header.descr),
            one_line(&header.descr),
            dtype.numpy_name(),
            dtype.descr(),
            dtype.descr()
        ));
    }
    let shape = header.shape;
    if header.fortran_order && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return error(format!(
            "is in Fortran order (shape {}): save np.ascontiguousarray(a)",
            shape_text(&shape)
        ));
    }
    let data = bytes.get(header.data_offset..).unwrap_or_default();
    let expected = shape
        .iter()
        .try_fold(dtype.item_bytes(), |acc, &d| acc.checked_mul(d));
    match expected {
        Some(n) if n == data.len() as u64 => Ok((shape, data)),
        Some(n) => error(format!(
            "has shape {}, which needs {n} bytes of data, but {} follow the header",
            shape_text(&shape),
            data.len()
        )),
        None => error(format!(
            "has shape {}, too large (its byte count overflows)",
            shape_text(&shape)
        )),
    }
}

/// The shape and values of a `.npy` array of little-endian f32 (`<f4`, C order).
pub fn read_f32(bytes: &[u8]) -> Result<(Vec<u64>, Vec<f32>), NpyError> {
    let (shape, data) = read(bytes, Dtype::F32)?;
    let values = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok((shape, values))
}

/// The `.npy` header for an f32 array of `shape` (see [`header`]).
pub fn f32_header(shape: &[u64]) -> Vec<u8> {
    header(Dtype::F32, shape)
}

/// The `.npy` header for an array of `dtype` and `shape` (row-major, slowest-varying first; empty
/// for a 0-d array): magic, version 1.0, header length, the dict, padded with spaces and a newline
/// so the data starts at a multiple of 64 bytes, as NumPy writes it.
pub fn header(dtype: Dtype, shape: &[u64]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        dtype.descr(),
        shape_text(shape)
    );
    // magic (6) + version (2) + header length (2) + dict + padding + '\n'
    let unpadded = 10 + dict.len() + 1;
    let total = unpadded.div_ceil(64) * 64;
    let header_len = total - 10;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    // A dict of a few dimensions is far below 65535 bytes.
    out.extend_from_slice(&u16::try_from(header_len).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

/// A shape as Python spells the tuple: `(3, 64)`, `(5,)`, `()`.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    match dims.as_slice() {
        // A 1-tuple needs its trailing comma in Python.
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    }
}

/// NumPy's name of a type string, for messages.
fn describe_descr(descr: &str) -> String {
    let order = match descr.as_bytes().first() {
        Some(b'>') => "big-endian ",
        _ => "",
    };
    let name = match descr.get(1..) {
        Some("f2") => "float16",
        Some("f4") => "float32",
        Some("f8") => "float64",
        Some("i1") => "int8",
        Some("u1") => "uint8",
        Some("i2") => "int16",
        Some("u2") => "uint16",
        Some("i4") => "int32",
        Some("u4") => "uint32",
        Some("i8") => "int64",
        Some("u8") => "uint64",
        Some("b1") => "bool",
        _ => return format!("type {}", one_line(descr)),
    };
    format!("{order}{name}")
}

/// A header string as printed in one line: control characters escaped, at most 40 characters.
fn one_line(s: &str) -> String {
    let escaped: String = s.chars().flat_map(char::escape_debug).collect();
    match escaped.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &escaped[..cut]),
        None => escaped,
    }
}

/// The dict's three values: `descr`, `fortran_order`, `shape`.
fn parse_dict(text: &str) -> Result<(String, bool, Vec<u64>), NpyError> {
    let mut p = Cursor { text, at: 0 };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.expect('{')?;
    loop {
        p.skip_spaces();
        if p.eat('}') {
            break;
        }
        let key = p.string()?;
        p.skip_spaces();
        p.expect(':')?;
        p.skip_spaces();
        let duplicate = match key {
            "descr" => descr.replace(p.descr()?).is_some(),
            "fortran_order" => fortran.replace(p.bool()?).is_some(),
            "shape" => shape.replace(p.tuple()?).is_some(),
            other => {
                return error(format!(
                    "has a .npy header with key '{}'; only 'descr', 'fortran_order' and 'shape' are known",
                    one_line(other)
                ))
            }
        };
        if duplicate {
            return error(format!("has a .npy header with key '{key}' twice"));
        }
        p.skip_spaces();
        if !p.eat(',') {
            p.expect('}')?;
            break;
        }
    }
    if !p
        .rest()
        .trim_matches([' ', '\t', '\n', '\r', '\0'])
        .is_empty()
    {
        return error(format!(
            "has a .npy header with '{}' after its dict",
            one_line(p.rest().trim())
        ));
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => error("has a .npy header without one of 'descr', 'fortran_order' and 'shape'"),
    }
}

/// A position in the header text.
struct Cursor<'t> {
    text: &'t str,
    at: usize,
}

impl<'t> Cursor<'t> {
    fn rest(&self) -> &'t str {
        self.text.get(self.at..).unwrap_or_default()
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            self.unexpected(&format!("'{c}'"))
        }
    }

    fn unexpected<T>(&self, wanted: &str) -> Result<T, NpyError> {
        let found = match self.rest().chars().next() {
            Some(_) => format!("'{}'", one_line(self.rest())),
            None => "its end".to_owned(),
        };
        error(format!(
            "has a .npy header NumPy would not write: expected {wanted} at character {}, found {found}",
            self.at
        ))
    }

    /// A quoted string without escapes (`'...'` or `"..."`).
    fn string(&mut self) -> Result<&'t str, NpyError> {
        let rest = self.rest();
        let Some(quote) = rest.chars().next().filter(|&c| c == '\'' || c == '"') else {
            return self.unexpected("a quoted string");
        };
        let body = &rest[1..];
        match body.find([quote, '\\']) {
            Some(end) if body[end..].starts_with(quote) => {
                self.at += end + 2;
                Ok(&body[..end])
            }
            _ => self.unexpected("a string without escapes, closed"),
        }
    }

    /// `descr`: a type string; a list is a structured dtype, refused by name.
    fn descr(&mut self) -> Result<String, NpyError> {
        if self.rest().starts_with('[') {
            return error(
                "holds a structured array (its descr is a list of fields), not plain values",
            );
        }
        self.string().map(str::to_owned)
    }

    fn bool(&mut self) -> Result<bool, NpyError> {
        for (word, value) in [("True", true), ("False", false)] {
            if self.rest().starts_with(word) {
                self.at += word.len();
                return Ok(value);
            }
        }
        self.unexpected("True or False")
    }

    /// `(a, b, ...)`, `(a,)` or `()`: sizes as u64, at most [`MAX_DIMS`].
    fn tuple(&mut self) -> Result<Vec<u64>, NpyError> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            self.skip_spaces();
            if self.eat(')') {
                return Ok(dims);
            }
            let rest = self.rest();
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                return self.unexpected("a dimension (a non-negative integer) or ')'");
            }
            let Ok(d) = rest[..digits].parse::<u64>() else {
                return error(format!(
                    "has a .npy shape with dimension {} (over u64)",
                    one_line(&rest[..digits])
                ));
            };
            if dims.len() == MAX_DIMS {
                return error(format!("has a .npy shape of over {MAX_DIMS} dimensions"));
            }
            dims.push(d);
            self.at += digits;
            // Python 2's long suffix, as old NumPy wrote it.
            self.eat('L');
            self.skip_spaces();
            if !self.eat(',') {
                self.skip_spaces();
                self.expect(')')?;
                return Ok(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_spell_the_shape_as_python_does() {
        for (shape, tuple) in [
            (&[3u64, 64][..], "(3, 64)"),
            (&[5][..], "(5,)"),
            (&[][..], "()"),
        ] {
            let h = f32_header(shape);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
            assert_eq!(usize::from(u16::from_le_bytes([h[8], h[9]])), h.len() - 10);
            let dict = std::str::from_utf8(&h[10..]).unwrap();
            assert!(dict.ends_with(" \n") || dict.ends_with("}\n"), "{dict:?}");
            assert_eq!(
                dict.trim_end(),
                format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}")
            );
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        for shape in [&[3u64, 2][..], &[6][..], &[1, 2, 3][..]] {
            let values: Vec<f32> = (0..6).map(|i| i as f32 - 2.5).collect();
            let mut file = f32_header(shape);
            file.extend(values.iter().flat_map(|v| v.to_le_bytes()));
            assert_eq!(read_f32(&file), Ok((shape.to_vec(), values)));
        }
        let mut blocks = header(Dtype::U8, &[4]);
        blocks.extend([1, 2, 3, 4]);
        assert_eq!(read(&blocks, Dtype::U8), Ok((vec![4], &[1u8, 2, 3, 4][..])));
    }

    /// A file with header `dict` (version 1.0, unpadded) and `data`.
    fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend((dict.len() as u16).to_le_bytes());
        f.extend(dict.as_bytes());
        f.extend(data);
        f
    }

    #[test]
    fn headers_numpy_may_write_are_read() {
        let four = [0u8; 16];
        for dict in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
            "{\"shape\": (2, 2), \"fortran_order\": False, \"descr\": \"<f4\"}",
            "{'descr':'<f4','fortran_order':False,'shape':(4L,)}   \n",
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 4), }",
        ] {
            assert!(read_f32(&npy(dict, &four)).is_ok(), "{dict}");
        }
    }

    #[test]
    fn hostile_and_foreign_files_get_one_clear_error() {
        let f32_dict =
            |shape: &str| format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"\x93NUMP".to_vec(), "does not start with NumPy's magic"),
            (b"\x93NUMPY".to_vec(), "cut short after its magic"),
            (
                b"\x93NUMPY\x04\x00\x10\x00".to_vec(),
                "version 4.0, which is not known",
            ),
            (b"\x93NUMPY\x01\x00\x10".to_vec(), "cut short in its length"),
            (
                b"\x93NUMPY\x01\x00\xff\xff{".to_vec(),
                "header of 65535 bytes but only 1 of them are in the file",
            ),
            (
                b"\x93NUMPY\x02\x00\xff\xff\xff\xff{".to_vec(),
                "over the limit of 65536",
            ),
            (
                npy(
                    "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
                    &[0; 16],
                ),
                "holds float64 ('<f8'), not float32 ('<f4')",
            ),
            (
                npy(
                    "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                    &[0; 8],
                ),
                "holds big-endian float32 ('>f4')",
            ),
            (
                npy(
                    "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
                    &[0; 8],
                ),
                "holds type |O ('|O')",
            ),
            (
                npy(
                    "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                    &[0; 8],
                ),
                "structured array",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                    &[0; 16],
                ),
                "Fortran order",
            ),
            (
                npy(&f32_dict("(3,)"), &[0; 8]),
                "needs 12 bytes of data, but 8 follow",
            ),
            (
                npy(&f32_dict("(2,)"), &[0; 12]),
                "needs 8 bytes of data, but 12 follow",
            ),
            (npy(&f32_dict("(4294967296, 4294967296)"), &[]), "too large"),
            (
                npy(&f32_dict("(99999999999999999999999,)"), &[]),
                "over u64",
            ),
            (npy(&f32_dict("(-1,)"), &[]), "expected a dimension"),
            (
                npy(&f32_dict(&format!("({})", "1,".repeat(65))), &[0; 4]),
                "over 64 dimensions",
            ),
            (npy(&f32_dict("((2,),)"), &[]), "expected a dimension"),
            (
                npy("{'descr': '<f4', 'fortran_order': False}", &[]),
                "without one of",
            ),
            (
                npy(
                    "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }",
                    &[0; 4],
                ),
                "key 'descr' twice",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': 0, 'shape': (), }",
                    &[0; 4],
                ),
                "expected True or False",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}",
                    &[0; 4],
                ),
                "with key 'x'",
            ),
            (
                npy(
                    "{'descr': '<f\\4', 'fortran_order': False, 'shape': (), }",
                    &[0; 4],
                ),
                "without escapes",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (), } junk",
                    &[0; 4],
                ),
                "'junk' after its dict",
            ),
            (
                npy(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (),",
                    &[0; 4],
                ),
                "found its end",
            ),
            (
                npy(
                    "{'descr': '<f4\u{e9}', 'fortran_order': False, 'shape': (), }",
                    &[0; 4],
                ),
                "not text",
            ),
        ];
        for (bytes, expected) in cases {
            let message = read_f32(&bytes).unwrap_err().to_string();
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
            assert!(!message.contains('\n'), "{message:?}");
        }
    }
}
