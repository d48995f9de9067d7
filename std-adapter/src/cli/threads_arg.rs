//! `--threads N`: one parser, so every command takes the same counts and refuses the others with
//! the same message (a usage error, exit 2).

use std::num::NonZeroUsize;

/// Most threads a command starts: far above any machine's useful count, and a bound on what a typo
/// (`--threads 80000`) can spawn.
pub(super) const MAX_THREADS: usize = 1024;

/// clap's value parser for `--threads`.
pub(super) fn parse(text: &str) -> Result<NonZeroUsize, String> {
    text.trim()
        .parse::<usize>()
        .ok()
        .and_then(NonZeroUsize::new)
        .filter(|n| n.get() <= MAX_THREADS)
        .ok_or_else(|| {
            format!("{text:?} is not a thread count: give a whole number from 1 to {MAX_THREADS}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_one_to_the_maximum_are_accepted() {
        assert_eq!(parse("1").map(NonZeroUsize::get), Ok(1));
        assert_eq!(parse("1024").map(NonZeroUsize::get), Ok(MAX_THREADS));
        for bad in ["0", "1025", "-1", "two", "", "1.5"] {
            let e = parse(bad).unwrap_err();
            assert!(e.ends_with("give a whole number from 1 to 1024"), "{e}");
        }
    }
}
