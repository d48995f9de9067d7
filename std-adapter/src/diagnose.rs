//! Context for error messages: which metadata key a byte offset falls in, whether a file is
//! simply cut short (a partial download), so that a user reads one line that says so instead of
//! one "past the end of the file" error per tensor, and what a header that fails to parse probably
//! got wrong (a tensor or key count off by one, [`count_hint`]); [`problem_lines`] puts it
//! together.

use miniquant::error::Limit;
use miniquant::gguf::{ByteOrder, Event, Limits, SliceParser};
use miniquant::Error;

use crate::file::GgufFile;
use crate::index::Index;
use crate::validate::Report;

/// A file that ends before the data its header describes: most often a partial download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The file's size.
    pub file_size: u64,
    /// The size the header and the tensors' data need (the furthest tensor end).
    pub needed: u64,
    /// The first tensor, in data order, whose data does not fit in the file.
    pub first_cut: CutTensor,
}

/// The first tensor that a [`Truncation`] cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutTensor {
    /// Its name.
    pub name: String,
    /// Absolute offset of its tensor info.
    pub info_offset: u64,
    /// Absolute offset where its data starts.
    pub data_start: u64,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Ends with the tensor info's offset, like every error line.
        write!(
            f,
            "file is truncated: it has {} of the {} bytes its header and tensors need; the first \
             tensor cut is {:?} (its data starts at offset {}) at byte {}",
            self.file_size,
            self.needed,
            self.first_cut.name,
            self.first_cut.data_start,
            self.first_cut.info_offset
        )
    }
}

/// Whether the tensors of a complete `index` end past its [`file_size`](Index::file_size), and
/// by how much (as [`Report::truncation`]). `None` for a partial index or one read from a stream
/// of unknown length.
pub fn truncation(index: &Index) -> Option<Truncation> {
    if !index.is_complete() {
        return None;
    }
    crate::validate::check(index, None).truncation
}

/// Where each metadata pair lies in a file, to name the key an error offset falls in.
#[derive(Debug, Clone, Default)]
pub struct KeyRanges {
    /// `(start, end, key)` in file order; the end of a pair the parse could not finish is `u64::MAX`.
    pairs: Vec<(u64, u64, String)>,
}

impl KeyRanges {
    /// Parses the header in `bytes` once, up to byte `up_to` (the last offset that will be asked
    /// about) or the first parse error.
    pub fn scan(bytes: &[u8], up_to: u64) -> Self {
        let mut pairs = Vec::new();
        let mut parser = SliceParser::new(bytes, Limits::DEFAULT);
        // The pair being read: where it starts and its key.
        let mut open: Option<(u64, &str)> = None;
        let mut depth = 0usize;
        loop {
            let start = parser.parser().offset();
            // Past `up_to`, finish the open pair only, to know where it ends.
            if start > up_to && open.is_none() {
                break;
            }
            let event = match parser.next_event() {
                Ok(Some(event)) => event,
                // The parse stopped at an error: inside the open pair, if there is one.
                Ok(None) | Err(_) => break,
            };
            let value_done = match event {
                Event::Key { key, .. } => {
                    open = Some((start, key));
                    false
                }
                Event::ArrayStart { .. } => {
                    depth += 1;
                    false
                }
                Event::ArrayEnd => {
                    depth = depth.saturating_sub(1);
                    depth == 0
                }
                Event::Scalar(_) => depth == 0,
                Event::String(piece) => depth == 0 && piece.is_last(),
                Event::Scalars(_) | Event::Header(_) => false,
                Event::Tensor(_) | Event::End(_) => break,
            };
            if value_done {
                if let Some((start, key)) = open.take() {
                    pairs.push((start, parser.parser().offset(), key.to_owned()));
                }
            }
        }
        if let Some((start, key)) = open {
            pairs.push((start, u64::MAX, key.to_owned()));
        }
        Self { pairs }
    }

    /// The key whose pair (key or value) contains byte `offset`.
    pub fn key_at(&self, offset: u64) -> Option<&str> {
        let i = self.pairs.partition_point(|&(start, _, _)| start <= offset);
        let (_, end, key) = self.pairs.get(i.checked_sub(1)?)?;
        (offset < *end).then_some(key.as_str())
    }
}

/// Which count of the header a [`CountHint`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// The tensor count (bytes 8..16 of a v2/v3 header).
    Tensors,
    /// The metadata key/value count (bytes 16..24).
    Keys,
}

impl Count {
    fn offset(self) -> usize {
        match self {
            Self::Tensors => 8,
            Self::Keys => 16,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Tensors => "tensors",
            Self::Keys => "metadata keys",
        }
    }
}

/// What a header that fails to parse probably got wrong: one of its counts. Found by trying the
/// counts next to the declared one: the hint is given only if, with that count, the whole header
/// parses and the file ends where the last tensor's data ends (up to the alignment padding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountHint {
    /// The count.
    pub count: Count,
    /// What the header declares.
    pub declared: u64,
    /// The count with which the header parses and the data ends at the end of the file.
    pub fits: u64,
}

impl std::fmt::Display for CountHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (noun, declared, fits) = (self.count.noun(), self.declared, self.fits);
        let (field, section) = match self.count {
            Count::Tensors => ("tensor", "tensor directory"),
            Count::Keys => ("metadata key", "metadata"),
        };
        write!(
            f,
            "the header declares {declared} {noun}, but with {fits} the whole header parses and \
             the tensors' data ends where the file does: the {field} count (byte {}) is probably \
             off by {}, and the error above is where the parser read past the real end of the \
             {section}",
            self.count.offset(),
            declared.abs_diff(fits)
        )
    }
}

/// Counts up to this far from the declared one are tried.
pub const COUNT_SLACK: u64 = 2;

/// For a header that stopped parsing at `error` (`index` is partial), the count that makes
/// `bytes` a valid file, if one within [`COUNT_SLACK`] of a declared count does. Not for a file
/// that simply ends inside its header (a cut file is not a wrong count, though fewer keys would
/// make it parse). Re-reads the header once per candidate (at most eight times), without copying
/// the file.
pub fn count_hint(bytes: &[u8], index: &Index, error: &Error) -> Option<CountHint> {
    let order = index.byte_order()?;
    let cut = matches!(error, Error::Truncated { .. });
    if cut || index.is_complete() || index.version() < 2 || bytes.len() < 24 {
        return None;
    }
    let file_size = bytes.len() as u64;
    let read = |at: usize| {
        let field: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(match order {
            ByteOrder::Little => u64::from_le_bytes(field),
            ByteOrder::Big => u64::from_be_bytes(field),
        })
    };
    for count in [Count::Tensors, Count::Keys] {
        let declared = read(count.offset())?;
        for delta in 1..=COUNT_SLACK {
            for fits in [declared.checked_sub(delta), declared.checked_add(delta)] {
                let Some(fits) = fits else { continue };
                let mut head = [0u8; 24];
                head.copy_from_slice(bytes.get(..24)?);
                let patched = match order {
                    ByteOrder::Little => fits.to_le_bytes(),
                    ByteOrder::Big => fits.to_be_bytes(),
                };
                head[count.offset()..count.offset() + 8].copy_from_slice(&patched);
                let rest = bytes.get(24..)?;
                let Ok(candidate) = Index::from_reader(std::io::Read::chain(&head[..], rest))
                else {
                    continue;
                };
                // The file must end where that header's data ends (give or take the padding),
                // as a file ggml writes does, and hold a tensor: a count that merely parses (0
                // tensors always does, and a header of no tensors ends anywhere) is no evidence.
                let ends = candidate
                    .tensors()
                    .iter()
                    .try_fold(candidate.data_offset(), |end, t| {
                        candidate.data_range(t).ok().map(|r| end.max(r.end))
                    });
                let slack = u64::from(candidate.alignment());
                let has_data = !candidate.tensors().is_empty();
                if has_data && ends.is_some_and(|end| end <= file_size && file_size - end < slack) {
                    return Some(CountHint {
                        count,
                        declared,
                        fits,
                    });
                }
            }
        }
    }
    None
}

/// For a length field too large for the whole file: a sign the parser lost its place before it.
fn implausible_length(e: &Error, file_size: u64) -> Option<String> {
    let (found, offset) = match *e {
        Error::LimitExceeded {
            limit: Limit::KeyBytes | Limit::StringBytes,
            found,
            offset,
            ..
        } => (found, offset),
        // Not the header's own counts (bytes 8..24): nothing comes before them to be wrong.
        Error::ExceedsInput { found, offset, .. } if offset >= 24 => (found, offset),
        _ => return None,
    };
    (found > file_size).then(|| {
        format!(
            "{found} at byte {offset} is larger than the whole file ({file_size} bytes), so it is \
             not a real length: the parser probably lost its place earlier, because a count or \
             length before byte {offset} is wrong (a count off by one, or bytes cut out of the file)"
        )
    })
}

/// The `error:` and `warning:` lines for `file`'s [`report`](GgufFile::report), errors in offset
/// order, then warnings, with the context a user needs to act: a file cut short is one line (how
/// much is there, how much is needed, the first tensor cut), and an error inside a metadata pair
/// names its key. What `miniquant` prints for a broken file.
pub fn problem_lines(file: &GgufFile) -> Vec<String> {
    report_lines(file.report(), Some(file))
}

/// The lines of `report` (from [`GgufFile::validate`] or a file's own), as [`problem_lines`];
/// `file`, when given, is the file the report is about and supplies the context.
pub fn report_lines(report: &Report, file: Option<&GgufFile>) -> Vec<String> {
    let cut = &report.truncation;
    let last_offset = report.errors.iter().filter_map(Error::offset).max();
    let keys = match (file, last_offset) {
        (Some(f), Some(up_to)) => KeyRanges::scan(f.bytes(), up_to),
        _ => KeyRanges::default(),
    };
    let mut summarized = false;
    let mut lines = Vec::new();
    for e in &report.errors {
        if let (Error::TensorOutOfBounds { .. }, Some(t)) = (e, cut) {
            // One summary line, where the first of these errors was.
            if !summarized {
                lines.push(format!("error: {t}"));
                summarized = true;
            }
            continue;
        }
        match e.offset().and_then(|o| keys.key_at(o)) {
            Some(key) => lines.push(format!("error: key {key:?}: {e}")),
            None => lines.push(format!("error: {e}")),
        }
    }
    // A header that stopped parsing: say what probably went wrong.
    if let Some(f) = file.filter(|f| !f.index().is_complete()) {
        let parse_error = report.errors.iter().max_by_key(|e| e.offset());
        if let Some(hint) = parse_error.and_then(|e| count_hint(f.bytes(), f.index(), e)) {
            lines.push(format!("hint: {hint}"));
        } else if let Some(hint) =
            parse_error.and_then(|e| implausible_length(e, f.bytes().len() as u64))
        {
            lines.push(format!("hint: {hint}"));
        }
    }
    lines.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::GgufWriter;
    use miniquant::gguf::Scalar;
    use miniquant::GgmlType;

    #[test]
    fn offsets_map_to_the_key_whose_pair_holds_them() {
        let mut w = GgufWriter::new();
        w.kv("a", Scalar::U32(1))
            .kv("tokens", ["x", "yy"].into_iter().collect::<crate::Array>())
            .tensor("t", GgmlType::F32, &[8], vec![0; 32]);
        let bytes = w.to_bytes();
        // Header 24; pair "a" = 8 + 1 + 4 + 4 = 17 bytes (24..41); "tokens" starts at 41.
        let ranges = KeyRanges::scan(&bytes, u64::MAX);
        assert_eq!(ranges.key_at(23), None);
        assert_eq!(ranges.key_at(24), Some("a"));
        assert_eq!(ranges.key_at(40), Some("a"));
        assert_eq!(ranges.key_at(41), Some("tokens"));
        // tokens pair: 8 + 6 + 4 + 4 + 8 + (8 + 1) + (8 + 2) = 49 bytes: 41..90, then the tensor info.
        assert_eq!(ranges.key_at(89), Some("tokens"));
        assert_eq!(ranges.key_at(90), None);
        // Cut inside the array: the parse fails there, still inside "tokens".
        assert_eq!(KeyRanges::scan(&bytes[..80], 75).key_at(75), Some("tokens"));
        // Scanning stops at `up_to`: later pairs are unknown.
        assert_eq!(KeyRanges::scan(&bytes, 30).key_at(41), None);
    }

    #[test]
    fn a_short_file_names_its_first_cut_tensor() {
        let mut w = GgufWriter::new();
        w.tensor("a", GgmlType::F32, &[8], vec![0; 32]).tensor(
            "b",
            GgmlType::F32,
            &[8],
            vec![0; 32],
        );
        let bytes = w.to_bytes();
        let full = Index::from_bytes(&bytes).unwrap();
        assert_eq!(truncation(&full), None);
        let cut = Index::from_bytes(&bytes[..bytes.len() - 40]).unwrap();
        let t = truncation(&cut).expect("truncated");
        assert_eq!(t.first_cut.name, "a");
        assert_eq!(t.needed, bytes.len() as u64);
        assert_eq!(t.file_size, bytes.len() as u64 - 40);
    }
}
