//! Reading a [`FoundKey`]'s value from the file's bytes, for a program that holds the file in
//! memory (flash, a mapping) and asked a [`Catalog`](super::Catalog) for a string or an array: the
//! catalog keeps where the value is, these read it in place, without copying.

use super::catalog::FoundKey;
use super::event::Header;
use super::value::{ScalarRun, ValueType};

impl FoundKey {
    /// Width of a string length or array count in this file: 4 bytes in GGUF v1, 8 after.
    fn count_bytes(header: &Header) -> u64 {
        if header.version == 1 {
            4
        } else {
            8
        }
    }

    /// The string value, borrowed from `file` (the whole file, or at least its header), or `None`
    /// if the value is not a string or `file` does not hold it. `header` is the file's
    /// [`Header`] (the first event, or [`Parser::header`](super::Parser::header)).
    ///
    /// ```
    /// use miniquant::gguf::{Catalog, Event, SliceParser};
    /// # let file: &[u8] = miniquant::gguf::example_header();
    /// let mut want = Catalog::of(&["general.architecture"], &[]);
    /// let mut parser = SliceParser::new(file, Default::default());
    /// let mut header = None;
    /// while let Some(event) = parser.next_event()? {
    ///     if let Event::Header(h) = event {
    ///         header = Some(h);
    ///     }
    ///     want.observe(&event, parser.event_offset());
    /// }
    /// let (key, header) = (want.key("general.architecture").unwrap(), header.unwrap());
    /// assert_eq!(key.str_in(file, &header), Some("llama"));
    /// # Ok::<(), miniquant::Error>(())
    /// ```
    pub fn str_in<'a>(&self, file: &'a [u8], header: &Header) -> Option<&'a str> {
        if self.value_type != ValueType::String {
            return None;
        }
        let start = self.value_offset.checked_add(Self::count_bytes(header))?;
        let bytes = slice(file, start, self.len)?;
        core::str::from_utf8(bytes).ok()
    }

    /// The elements of a numeric or bool array value, borrowed from `file`, or `None` if the
    /// value is not such an array or `file` does not hold it. `header` as for
    /// [`str_in`](Self::str_in).
    pub fn scalars_in<'a>(&self, file: &'a [u8], header: &Header) -> Option<ScalarRun<'a>> {
        let element_type = self.element_type?;
        if self.value_type != ValueType::Array {
            return None;
        }
        let size = element_type.scalar_size()? as u64;
        // The element type (u32), the count, then the elements.
        let start = self
            .value_offset
            .checked_add(4)?
            .checked_add(Self::count_bytes(header))?;
        let raw = slice(file, start, self.len.checked_mul(size)?)?;
        Some(ScalarRun::new(element_type, header.byte_order, raw))
    }
}

/// `len` bytes of `file` from `start`, if they are there.
fn slice(file: &[u8], start: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(start).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    file.get(start..end)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)] // tests cut known files at known places
mod tests {
    use super::super::{Catalog, Event, Header, Limits, Scalar, SliceParser};
    use std::vec::Vec;

    /// v3: one string key, one u16 array key, one string array key, no tensors.
    fn file() -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(b"GGUF");
        f.extend_from_slice(&3u32.to_le_bytes());
        f.extend_from_slice(&0u64.to_le_bytes());
        f.extend_from_slice(&3u64.to_le_bytes());
        let key = |f: &mut Vec<u8>, k: &str, t: u32| {
            f.extend_from_slice(&(k.len() as u64).to_le_bytes());
            f.extend_from_slice(k.as_bytes());
            f.extend_from_slice(&t.to_le_bytes());
        };
        key(&mut f, "name", 8);
        f.extend_from_slice(&5u64.to_le_bytes());
        f.extend_from_slice(b"hello");
        key(&mut f, "ids", 9);
        f.extend_from_slice(&2u32.to_le_bytes()); // u16
        f.extend_from_slice(&3u64.to_le_bytes());
        for v in [7u16, 8, 65535] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        key(&mut f, "words", 9);
        f.extend_from_slice(&8u32.to_le_bytes()); // string
        f.extend_from_slice(&1u64.to_le_bytes());
        f.extend_from_slice(&2u64.to_le_bytes());
        f.extend_from_slice(b"hi");
        f
    }

    #[test]
    fn strings_and_numeric_arrays_are_read_in_place() {
        let file = file();
        let mut want = Catalog::of(&["name", "ids", "words"], &[]);
        let mut parser = SliceParser::new(&file, Limits::default());
        let mut header: Option<Header> = None;
        while let Some(event) = parser.next_event().unwrap() {
            if let Event::Header(h) = event {
                header = Some(h);
            }
            want.observe(&event, parser.event_offset());
        }
        let header = header.unwrap();
        let name = want.key("name").unwrap();
        assert_eq!(name.str_in(&file, &header), Some("hello"));
        assert!(name.scalars_in(&file, &header).is_none());
        let ids = want.key("ids").unwrap();
        let run = ids.scalars_in(&file, &header).unwrap();
        let values: Vec<Scalar> = run.iter().collect();
        assert_eq!(values, [Scalar::U16(7), Scalar::U16(8), Scalar::U16(65535)]);
        assert_eq!(ids.str_in(&file, &header), None);
        // A string array is neither.
        let words = want.key("words").unwrap();
        assert!(words.scalars_in(&file, &header).is_none());
        assert_eq!(words.str_in(&file, &header), None);
        // Bytes that do not hold the value give None, not a panic.
        assert_eq!(name.str_in(&file[..40], &header), None);
        assert!(ids.scalars_in(&file[..70], &header).is_none());
    }
}
