//! `validate`: the std adapter's whole-file checks over arbitrary bytes never panic, the two forms
//! (`check` over an index, `check_bytes` streamed) agree on validity, and neither accepts a file
//! that the core parser rejects.

use miniquant::gguf::{Limits, SliceParser};
use miniquant_std::{validate, Index};

/// The check.
pub fn check(data: &[u8]) {
    let core_error = SliceParser::new(data, Limits::DEFAULT).find_map(Result::err);
    let streamed = validate::check_bytes(data);
    let (index, parse_error) = Index::from_bytes_partial(data, Limits::DEFAULT);
    assert_eq!(
        parse_error, core_error,
        "the index stops where the core parser does"
    );
    let indexed = validate::check(&index, parse_error);
    assert_eq!(
        streamed.is_valid(),
        indexed.is_valid(),
        "check_bytes {:?} vs check {:?}",
        streamed.errors,
        indexed.errors
    );
    if let Some(e) = core_error {
        assert!(
            !streamed.is_valid(),
            "check_bytes accepts what the core rejects: {e}"
        );
        assert!(
            !indexed.is_valid(),
            "check accepts what the core rejects: {e}"
        );
        assert!(
            Index::from_bytes(data).is_err(),
            "Index accepts what the core rejects: {e}"
        );
    }
}
