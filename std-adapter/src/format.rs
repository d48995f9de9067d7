//! One-line text forms of metadata values, for `miniquant inspect`.
//!
//! - Scalars carry their type as a suffix: `30u32`, `-3i8`, `0.00001f32`, `true`.
//! - Floats use the shortest digits that read back to the same value (`1e-30f32` for very small or
//!   large magnitudes); NaN and infinities print as `NaN`, `inf`, `-inf`.
//! - Strings are quoted with control characters escaped, and cut to 60 characters with the full
//!   length in bytes after them: `"{% for message in messages %}..."... (368 bytes)`.
//! - Arrays show their first 3 elements and their length: `[3i32, 3i32, 3i32, ...] (len 49152)`.

use std::fmt::Write as _;

use miniquant::gguf::Scalar;

use crate::value::{Array, Element, Value};

/// Characters of a string shown before it is cut.
pub const STRING_PREVIEW_CHARS: usize = 60;
/// Elements of an array shown.
pub const ARRAY_PREVIEW_LEN: usize = 3;

/// The one-line form of a value.
pub fn value(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Scalar(s) => scalar(&mut out, *s),
        Value::String(s) => string(&mut out, s),
        Value::Array(a) => array(&mut out, a),
    }
    out
}

/// A scalar with its type suffix.
pub fn scalar(out: &mut String, s: Scalar) {
    // Writing to a String cannot fail.
    let _ = match s {
        Scalar::U8(v) => write!(out, "{v}u8"),
        Scalar::I8(v) => write!(out, "{v}i8"),
        Scalar::U16(v) => write!(out, "{v}u16"),
        Scalar::I16(v) => write!(out, "{v}i16"),
        Scalar::U32(v) => write!(out, "{v}u32"),
        Scalar::I32(v) => write!(out, "{v}i32"),
        Scalar::U64(v) => write!(out, "{v}u64"),
        Scalar::I64(v) => write!(out, "{v}i64"),
        Scalar::Bool(v) => write!(out, "{v}"),
        Scalar::F32(v) => write!(
            out,
            "{}f32",
            float(
                v,
                v.is_finite() && v != 0.0 && !(1e-5..1e16).contains(&v.abs())
            )
        ),
        Scalar::F64(v) => write!(
            out,
            "{}f64",
            float(
                v,
                v.is_finite() && v != 0.0 && !(1e-5..1e16).contains(&v.abs())
            )
        ),
    };
}

/// Shortest round-trip digits (Rust's float formatting), in exponent notation for magnitudes below
/// 1e-5 or from 1e16 on, where plain notation would be long runs of zeros.
fn float<F: std::fmt::Display + std::fmt::LowerExp>(v: F, use_exponent: bool) -> String {
    if use_exponent {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A quoted, escaped string, cut to [`STRING_PREVIEW_CHARS`] characters.
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars().take(STRING_PREVIEW_CHARS) {
        out.extend(c.escape_debug());
    }
    out.push('"');
    if s.chars().nth(STRING_PREVIEW_CHARS).is_some() {
        let _ = write!(out, "... ({} bytes)", s.len());
    }
}

/// The first [`ARRAY_PREVIEW_LEN`] elements and the length. Nested arrays are shown the same way;
/// their depth is bounded by the parser's limit.
pub fn array(out: &mut String, a: &Array) {
    out.push('[');
    for (i, element) in a.iter().take(ARRAY_PREVIEW_LEN).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match element {
            Element::Scalar(s) => scalar(out, s),
            Element::Str(s) => string(out, s),
            Element::Array(inner) => array(out, inner),
        }
    }
    if a.len() > ARRAY_PREVIEW_LEN {
        out.push_str(", ...");
    }
    let _ = write!(out, "] (len {})", a.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Strings;

    #[test]
    fn scalars_carry_their_type() {
        assert_eq!(value(&Value::Scalar(Scalar::U32(30))), "30u32");
        assert_eq!(value(&Value::Scalar(Scalar::F32(100000.0))), "100000f32");
        assert_eq!(value(&Value::Scalar(Scalar::F32(1e-5))), "0.00001f32");
        assert_eq!(value(&Value::Scalar(Scalar::F32(1e-30))), "1e-30f32");
        assert_eq!(value(&Value::Scalar(Scalar::F64(0.1))), "0.1f64");
        assert_eq!(
            value(&Value::Scalar(Scalar::F32(f32::NEG_INFINITY))),
            "-inff32"
        );
        assert_eq!(value(&Value::Scalar(Scalar::F64(f64::NAN))), "NaNf64");
        assert_eq!(
            value(&Value::Scalar(Scalar::I64(i64::MIN))),
            "-9223372036854775808i64"
        );
    }

    #[test]
    fn long_strings_are_cut_and_escaped() {
        let long = "a\n".repeat(40);
        let shown = value(&Value::String(long));
        assert_eq!(shown, format!("\"{}\"... (80 bytes)", "a\\n".repeat(30)));
        assert_eq!(value(&Value::from("llama")), "\"llama\"");
    }

    #[test]
    fn arrays_show_three_elements_and_the_length() {
        let tokens: Strings = ["<s>", "</s>", "a", "b"].into_iter().collect();
        assert_eq!(
            value(&Array::from(tokens).into()),
            "[\"<s>\", \"</s>\", \"a\", ...] (len 4)"
        );
        assert_eq!(
            value(&Array::I32(vec![3, 3]).into()),
            "[3i32, 3i32] (len 2)"
        );
        let nested = Array::Array(vec![Array::U8(vec![1]), Array::U8(vec![])]);
        assert_eq!(value(&nested.into()), "[[1u8] (len 1), [] (len 0)] (len 2)");
    }
}
