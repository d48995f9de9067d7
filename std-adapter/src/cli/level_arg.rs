//! `--level LEVEL` and `MINIQUANT_LEVEL`: one parser for every command that takes a kernel level,
//! and the note an experimental level prints whichever way it was chosen.

use miniquant::quant::{level, Level};

/// clap's value parser for `--level`: a level name or `auto`, available on this CPU (else a usage
/// error, exit 2).
pub(super) fn parse(name: &str) -> Result<Level, String> {
    level::resolve(name).map_err(|e| e.to_string())
}

/// The note for a level that is experimental (never the automatic choice), naming how it was
/// chosen (`--level amx`, `MINIQUANT_LEVEL=amx`); `None` for any other level.
pub(super) fn experimental_note(level: Level, chosen_by: &str) -> Option<String> {
    level.is_experimental().then(|| {
        format!(
            "note: {chosen_by}{level} is experimental (never chosen automatically: the same \
             bits, but only its packed matmul is faster than avx512vnni's where measured)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_experimental_levels_get_a_note_that_names_how_they_were_chosen() {
        let note = experimental_note(Level::Amx, "--level ").unwrap_or_default();
        assert!(
            note.starts_with("note: --level amx is experimental"),
            "{note}"
        );
        let note = experimental_note(Level::Amx, "MINIQUANT_LEVEL=").unwrap_or_default();
        assert!(
            note.starts_with("note: MINIQUANT_LEVEL=amx is experimental"),
            "{note}"
        );
        for l in [Level::Scalar, Level::Avx2, Level::Avx512Vnni] {
            assert_eq!(experimental_note(l, "--level "), None, "{l}");
        }
    }

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
