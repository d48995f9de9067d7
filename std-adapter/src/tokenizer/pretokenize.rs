//! Pre-tokenizers of byte-level BPE vocabularies: they cut a text into words before merges
//! run, each word separately. `tokenizer.ggml.pre` names which one a vocabulary was trained
//! with; these are the splits llama.cpp applies for those names, written as scanners rather than
//! regular expressions (the patterns need look-ahead, which the `regex` crate does not have).
//!
//! A split works on a text's characters and refines a list of segments: each stage cuts every
//! segment of the previous stage further, never joining across segments, as llama.cpp's
//! `unicode_regex_split` chains its expressions. Segments are character index ranges.

use std::ops::Range;

use super::unicode::{class_of, CharClass};

/// A pre-tokenizer: the chain of splits one `tokenizer.ggml.pre` stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2's pattern: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
    Gpt2,
    /// Every number character alone, then GPT-2's pattern (StarCoder, SmolLM, Command-R, ...).
    DigitsThenGpt2,
    /// Llama 3's pattern: case-insensitive contractions, an optional non-letter before letters,
    /// numbers in groups of at most three, punctuation runs with their line breaks, line-break
    /// runs, white space.
    Llama3,
    /// llama.cpp's default for BPE vocabularies that name no known pre-tokenizer: punctuation
    /// runs, GPT-2's pattern, number runs, then groups of three ASCII digits.
    Default,
}

impl PreTokenizer {
    /// Cuts `chars` into words: the character ranges, in order, covering all of `chars`.
    pub fn split(self, chars: &[char]) -> Vec<Range<usize>> {
        // One segment: the whole text.
        let all = 0..chars.len();
        let whole = std::slice::from_ref(&all);
        match self {
            Self::Gpt2 => refine(chars, whole, gpt2),
            Self::DigitsThenGpt2 => {
                let digits = refine(chars, whole, |c, s, out| {
                    isolate_each(c, s, out, |k| k.number)
                });
                refine(chars, &digits, gpt2)
            }
            Self::Llama3 => refine(chars, whole, llama3),
            Self::Default => {
                let punct = refine(chars, whole, |c, s, out| {
                    isolate_runs(c, s, out, |ch, k| {
                        k.punctuation || matches!(ch, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
                    })
                });
                let words = refine(chars, &punct, gpt2);
                let numbers = refine(chars, &words, |c, s, out| {
                    isolate_runs(c, s, out, |_, k| k.number)
                });
                refine(chars, &numbers, ascii_digit_triples)
            }
        }
    }
}

/// Applies `stage` to every segment.
fn refine(
    chars: &[char],
    segments: &[Range<usize>],
    stage: impl Fn(&[char], Range<usize>, &mut Vec<Range<usize>>),
) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(segments.len());
    for s in segments {
        stage(chars, s.clone(), &mut out);
    }
    out
}

/// A segment's characters as the scanners see them: outside the segment there is nothing (no
/// character, no class), as a regular expression run on the segment alone sees.
struct Scan<'a> {
    chars: &'a [char],
    seg: Range<usize>,
    /// Where the next word starts.
    word_start: usize,
}

impl<'a> Scan<'a> {
    fn new(chars: &'a [char], seg: Range<usize>) -> Self {
        Self {
            chars,
            word_start: seg.start,
            seg,
        }
    }

    fn char_at(&self, pos: usize) -> Option<char> {
        if self.seg.contains(&pos) {
            self.chars.get(pos).copied()
        } else {
            None
        }
    }

    fn class_at(&self, pos: usize) -> CharClass {
        self.char_at(pos).map(class_of).unwrap_or_default()
    }

    /// Whether `pos` holds a character (of any class).
    fn inside(&self, pos: usize) -> bool {
        self.char_at(pos).is_some()
    }

    /// Ends the current word at `end` (nothing if empty); returns its length.
    fn cut(&mut self, end: usize, out: &mut Vec<Range<usize>>) -> usize {
        let len = end.saturating_sub(self.word_start);
        if len > 0 {
            out.push(self.word_start..end);
        }
        self.word_start = end;
        len
    }
}

/// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (case-insensitive if `fold`): the contraction's length.
fn contraction(s: &Scan<'_>, pos: usize, fold: bool) -> Option<usize> {
    if s.char_at(pos) != Some('\'') {
        return None;
    }
    let lower = |c: Option<char>| c.map(|c| if fold { c.to_ascii_lowercase() } else { c });
    let next = lower(s.char_at(pos + 1))?;
    if matches!(next, 's' | 't' | 'm' | 'd') {
        return Some(2);
    }
    let next2 = lower(s.char_at(pos + 2))?;
    matches!((next, next2), ('r', 'e') | ('v', 'e') | ('l', 'l')).then_some(3)
}

/// Length of the run of white space starting at `pos`.
fn whitespace_run(s: &Scan<'_>, pos: usize) -> usize {
    (pos..).take_while(|&p| s.class_at(p).whitespace).count()
}

/// Where a word that starts at `pos` with `spaces` white space characters ends: `\s+(?!\S)`
/// leaves the last one to the word after it, `\s+` takes them all; a character no alternative
/// matched is a word alone.
fn whitespace_end(s: &Scan<'_>, pos: usize, spaces: usize) -> usize {
    if spaces > 1 && s.inside(pos + spaces) {
        pos + spaces - 1
    } else {
        pos + spaces.max(1)
    }
}

fn is_other(k: CharClass) -> bool {
    !(k.whitespace || k.letter || k.number)
}

/// GPT-2's pattern over one segment.
fn gpt2(chars: &[char], seg: Range<usize>, out: &mut Vec<Range<usize>>) {
    let mut s = Scan::new(chars, seg.clone());
    let mut pos = seg.start;
    while pos < seg.end {
        if let Some(len) = contraction(&s, pos, false) {
            pos += s.cut(pos + len, out);
            continue;
        }
        let space = s.char_at(pos) == Some(' ');
        let first = if space { pos + 1 } else { pos };
        let k = s.class_at(first);
        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        let run: Option<fn(CharClass) -> bool> = if k.letter {
            Some(|k| k.letter)
        } else if k.number {
            Some(|k| k.number)
        } else if is_other(k) && s.inside(first) {
            Some(is_other)
        } else {
            None
        };
        if let Some(in_run) = run {
            pos = first;
            while s.inside(pos) && in_run(s.class_at(pos)) {
                pos += 1;
            }
            s.cut(pos, out);
            continue;
        }
        pos = whitespace_end(&s, pos, whitespace_run(&s, pos));
        s.cut(pos, out);
    }
}

/// Llama 3's pattern over one segment.
fn llama3(chars: &[char], seg: Range<usize>, out: &mut Vec<Range<usize>>) {
    let mut s = Scan::new(chars, seg.clone());
    let mut pos = seg.start;
    while pos < seg.end {
        if let Some(len) = contraction(&s, pos, true) {
            pos += s.cut(pos + len, out);
            continue;
        }
        let c = s.char_at(pos);
        let k = s.class_at(pos);
        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if !(matches!(c, Some('\r' | '\n')) || k.number) && (k.letter || s.class_at(pos + 1).letter)
        {
            pos += 1;
            while s.class_at(pos).letter {
                pos += 1;
            }
            s.cut(pos, out);
            continue;
        }
        // `\p{N}{1,3}`
        if k.number {
            let mut group = pos;
            while s.class_at(pos).number {
                pos += 1;
                if pos - group >= 3 {
                    s.cut(pos, out);
                    group = pos;
                }
            }
            s.cut(pos, out);
            continue;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        let space = c == Some(' ');
        let first = if space { pos + 1 } else { pos };
        if is_other(s.class_at(first)) {
            pos = first;
            while s.inside(pos) && is_other(s.class_at(pos)) {
                pos += 1;
            }
            while matches!(s.char_at(pos), Some('\r' | '\n')) {
                pos += 1;
            }
            s.cut(pos, out);
            continue;
        }
        let spaces = whitespace_run(&s, pos);
        let last_line_break = (pos..pos + spaces)
            .rev()
            .find(|&p| matches!(s.char_at(p), Some('\r' | '\n')));
        pos = match last_line_break {
            // `\s*[\r\n]+`
            Some(p) => p + 1,
            None => whitespace_end(&s, pos, spaces),
        };
        s.cut(pos, out);
    }
}

/// Every character for which `isolate` holds becomes a word of its own; the runs between them
/// are words.
fn isolate_each(
    chars: &[char],
    seg: Range<usize>,
    out: &mut Vec<Range<usize>>,
    isolate: impl Fn(CharClass) -> bool,
) {
    let mut start = seg.start;
    for pos in seg.clone() {
        if isolate(class_of(chars[pos])) {
            if start < pos {
                out.push(start..pos);
            }
            out.push(pos..pos + 1);
            start = pos + 1;
        }
    }
    if start < seg.end {
        out.push(start..seg.end);
    }
}

/// Maximal runs of characters for which `in_run` holds are words; so are the runs between them.
fn isolate_runs(
    chars: &[char],
    seg: Range<usize>,
    out: &mut Vec<Range<usize>>,
    in_run: impl Fn(char, CharClass) -> bool,
) {
    let mut start = seg.start;
    let mut inside = None;
    for pos in seg.clone() {
        let c = chars[pos];
        let now = in_run(c, class_of(c));
        if inside.is_some_and(|was| was != now) {
            out.push(start..pos);
            start = pos;
        }
        inside = Some(now);
    }
    if start < seg.end {
        out.push(start..seg.end);
    }
}

/// `[0-9][0-9][0-9]` as a split: leftmost non-overlapping triples of ASCII digits are words, and
/// so is what lies between them.
fn ascii_digit_triples(chars: &[char], seg: Range<usize>, out: &mut Vec<Range<usize>>) {
    let mut start = seg.start;
    let mut pos = seg.start;
    while pos + 3 <= seg.end {
        if chars[pos..pos + 3].iter().all(char::is_ascii_digit) {
            if start < pos {
                out.push(start..pos);
            }
            out.push(pos..pos + 3);
            pos += 3;
            start = pos;
        } else {
            pos += 1;
        }
    }
    if start < seg.end {
        out.push(start..seg.end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        pre.split(&chars)
            .into_iter()
            .map(|r| chars[r].iter().collect())
            .collect()
    }

    #[test]
    fn gpt2_words_contractions_and_spaces() {
        assert_eq!(
            words(PreTokenizer::Gpt2, "Hello world, it's  2024!\n\n  ok"),
            ["Hello", " world", ",", " it", "'s", " ", " 2024", "!", "\n\n ", " ok"]
        );
        assert_eq!(words(PreTokenizer::Gpt2, "a  "), ["a", "  "]);
        assert_eq!(words(PreTokenizer::Gpt2, ""), Vec::<String>::new());
    }

    #[test]
    fn digits_are_isolated_before_gpt2() {
        assert_eq!(
            words(PreTokenizer::DigitsThenGpt2, "x 123 y"),
            ["x", " ", "1", "2", "3", " y"]
        );
    }

    #[test]
    fn llama3_groups_digits_by_three_and_keeps_line_breaks() {
        assert_eq!(
            words(PreTokenizer::Llama3, "I'M 1234567 ok!\n\nyes  \n x"),
            ["I", "'M", " ", "123", "456", "7", " ok", "!\n\n", "yes", "  \n", " x"]
        );
    }

    #[test]
    fn default_isolates_punctuation_numbers_and_triples() {
        assert_eq!(
            words(PreTokenizer::Default, "a+b 12345"),
            ["a", "+", "b", " ", "123", "45"]
        );
    }
}
