//! The Unicode character classes the pre-tokenizers split on: letters (`\p{L}`), numbers
//! (`\p{N}`), punctuation (`\p{P}`) and white space (`\s`).
//!
//! The general categories come from `regex-syntax`'s Unicode tables (the ranges of its parsed
//! `\p{..}` classes), so no table is kept here; white space is Rust's `char::is_whitespace`, the
//! Unicode `White_Space` property, which is the set llama.cpp uses.

use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

/// What the pre-tokenizers need to know about a character.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CharClass {
    pub letter: bool,
    pub number: bool,
    pub punctuation: bool,
    pub whitespace: bool,
}

/// Sorted, disjoint inclusive codepoint ranges of one general category.
struct Ranges(Vec<(u32, u32)>);

impl Ranges {
    fn of(class: &str) -> Self {
        let ranges = match regex_syntax::parse(class).map(|hir| hir.into_kind()) {
            Ok(HirKind::Class(Class::Unicode(c))) => c
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end())))
                .collect(),
            // The three classes below are compiled into regex-syntax with the features this crate
            // enables; a class that did not parse would be a build configuration error, caught by
            // the unit tests.
            _ => Vec::new(),
        };
        Self(ranges)
    }

    fn contains(&self, c: char) -> bool {
        let c = u32::from(c);
        let i = self.0.partition_point(|&(_, end)| end < c);
        self.0.get(i).is_some_and(|&(start, _)| start <= c)
    }
}

struct Tables {
    letter: Ranges,
    number: Ranges,
    punctuation: Ranges,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        letter: Ranges::of(r"\p{L}"),
        number: Ranges::of(r"\p{N}"),
        punctuation: Ranges::of(r"\p{P}"),
    })
}

/// The class of `c`.
pub(super) fn class_of(c: char) -> CharClass {
    if c.is_ascii() {
        return CharClass {
            letter: c.is_ascii_alphabetic(),
            number: c.is_ascii_digit(),
            punctuation: is_ascii_punctuation(c),
            whitespace: c.is_ascii_whitespace() || c == '\x0b',
        };
    }
    let t = tables();
    CharClass {
        letter: t.letter.contains(c),
        number: t.number.contains(c),
        punctuation: t.punctuation.contains(c),
        whitespace: c.is_whitespace(),
    }
}

/// ASCII characters of Unicode's punctuation categories (`$+<=>^`|~` are symbols, not
/// punctuation).
fn is_ascii_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_fast_path_agrees_with_the_unicode_tables() {
        let t = tables();
        for b in 0u8..128 {
            let c = char::from(b);
            let fast = class_of(c);
            assert_eq!(fast.letter, t.letter.contains(c), "{c:?}");
            assert_eq!(fast.number, t.number.contains(c), "{c:?}");
            assert_eq!(fast.punctuation, t.punctuation.contains(c), "{c:?}");
            assert_eq!(fast.whitespace, c.is_whitespace(), "{c:?}");
        }
    }

    #[test]
    fn categories_beyond_ascii() {
        for c in ['é', 'ß', 'Ж', '中', 'ア', '한'] {
            assert!(class_of(c).letter, "{c:?}");
        }
        for c in ['½', '²', '٣', 'Ⅻ'] {
            assert!(class_of(c).number, "{c:?}");
        }
        for c in ['¿', '—', '「', '。'] {
            assert!(class_of(c).punctuation, "{c:?}");
        }
        for c in ['\u{a0}', '\u{3000}', '\u{2028}', '\u{85}'] {
            assert!(class_of(c).whitespace, "{c:?}");
        }
        // Marks and symbols are none of these.
        for c in ['\u{301}', '€', '😀'] {
            assert_eq!(class_of(c), CharClass::default(), "{c:?}");
        }
    }
}
