//! `--level LEVEL`: one parser for every command that takes a kernel level.

use miniquant::quant::{level, Level};

/// clap's value parser for `--level`: a level name or `auto`, available on this CPU (else a usage
/// error, exit 2).
pub(super) fn parse(name: &str) -> Result<Level, String> {
    level::resolve(name).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_are_refused_with_the_names_accepted() {
        let e = parse("avx9").unwrap_err();
        assert!(e.starts_with("unknown kernel level"), "{e}");
        for name in ["auto", "scalar", "avx2", "avx512vnni", "amx"] {
            assert!(e.contains(name), "{e} lacks {name}");
        }
        assert_eq!(parse("scalar"), Ok(Level::Scalar));
    }
}
