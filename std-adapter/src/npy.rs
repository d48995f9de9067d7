//! The header of a NumPy `.npy` file (format version 1.0) holding little-endian f32 in C order,
//! so `numpy.load` reads what `miniquant dequant --format npy` writes. The data follows the header
//! as raw `<f4` values.

/// The `.npy` header for an f32 array of `shape` (row-major, slowest-varying first; empty for a
/// 0-d array): magic, version, header length, the dict, padded with spaces and a newline so the
/// data starts at a multiple of 64 bytes, as NumPy writes it.
pub fn f32_header(shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    // A 1-tuple needs its trailing comma in Python.
    let tuple = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}");
    // magic (6) + version (2) + header length (2) + dict + padding + '\n'
    let unpadded = 10 + dict.len() + 1;
    let total = unpadded.div_ceil(64) * 64;
    let header_len = total - 10;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    // A dict of a few dimensions is far below 65535 bytes.
    out.extend_from_slice(&u16::try_from(header_len).unwrap_or(u16::MAX).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
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
}
