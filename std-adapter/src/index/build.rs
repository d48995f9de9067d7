//! Turns the core parser's events into an [`Index`], one event at a time, whatever the driver.
//!
//! Arrays being read sit on an explicit stack (no recursion); a finished nested array is moved into
//! its parent. String values delivered in pieces are appended to the string they start.

use miniquant::gguf::{Event, StrPiece, DEFAULT_ALIGNMENT};
use miniquant::{Error, Result};

use super::{Index, MetadataEntry, TensorEntry};
use crate::names::Inserted;
use crate::value::{Array, Value};

/// The key whose value is being read.
struct PendingKey {
    key: String,
    key_offset: u64,
    /// Set by the value's first event.
    value_offset: u64,
}

pub(crate) struct Builder {
    index: Index,
    pending: Option<PendingKey>,
    /// Arrays being read, outermost first.
    open: Vec<Array>,
    /// A top-level string value being read.
    string: String,
}

/// An event that the parser never produces at this point (it would be a bug in the parser, not in
/// the file); reported as an invalid value type at the event's offset rather than a panic.
fn out_of_place(offset: u64) -> Error {
    Error::InvalidValueType {
        code: u32::MAX,
        offset,
    }
}

impl Builder {
    pub(crate) fn new(file_size: Option<u64>) -> Self {
        let index = Index {
            alignment: DEFAULT_ALIGNMENT,
            file_size,
            ..Index::default()
        };
        Self {
            index,
            pending: None,
            open: Vec::new(),
            string: String::new(),
        }
    }

    pub(crate) fn finish(self) -> Index {
        self.index
    }

    /// Feeds one event; `offset` is the absolute offset where its bytes start.
    pub(crate) fn observe(&mut self, event: &Event<'_>, offset: u64) -> Result<()> {
        match *event {
            Event::Header(h) => {
                self.index.version = h.version;
                self.index.byte_order = Some(h.byte_order);
                self.index.declared_tensors = h.tensor_count;
                self.index.declared_metadata = h.metadata_count;
            }
            Event::Key { key, .. } => {
                if self.pending.is_some() || !self.open.is_empty() {
                    return Err(out_of_place(offset));
                }
                // A duplicate is reported at the key, whether or not its value then parses, as
                // `validate::check_bytes` does: both validators give one answer for the same bytes.
                let metadata = &self.index.metadata;
                let seen = self
                    .index
                    .key_lookup
                    .find(key, |j| metadata.get(j).map(|e| e.key.as_str()))
                    .is_some();
                if seen {
                    self.index.duplicates.push(Error::DuplicateKey { offset });
                }
                self.pending = Some(PendingKey {
                    key: key.to_owned(),
                    key_offset: offset,
                    value_offset: offset,
                });
            }
            Event::Scalar(s) => match self.open.last_mut() {
                Some(array) => {
                    if !array.push_scalar(s) {
                        return Err(out_of_place(offset));
                    }
                }
                None => {
                    self.start_value(offset)?;
                    self.finish_value(Value::Scalar(s))?;
                }
            },
            Event::Scalars(run) => {
                let array = self.open.last_mut().ok_or(out_of_place(offset))?;
                for s in run.iter() {
                    if !array.push_scalar(s) {
                        return Err(out_of_place(offset));
                    }
                }
            }
            Event::String(piece) => self.string_piece(piece, offset)?,
            Event::ArrayStart { element_type, .. } => {
                if self.open.is_empty() {
                    self.start_value(offset)?;
                }
                // No capacity from `len`: the elements still have to arrive.
                self.open.push(Array::empty(element_type));
            }
            Event::ArrayEnd => {
                let done = self.open.pop().ok_or(out_of_place(offset))?;
                match self.open.last_mut() {
                    Some(Array::Array(parent)) => parent.push(done),
                    Some(_) => return Err(out_of_place(offset)),
                    None => self.finish_value(Value::Array(Box::new(done)))?,
                }
            }
            Event::Tensor(ref info) => {
                let Index {
                    tensors,
                    tensor_lookup,
                    duplicates,
                    ..
                } = &mut self.index;
                let i = tensors.len();
                if tensor_lookup.insert(info.name, i, |j| tensors.get(j).map(|t| t.name.as_str()))
                    == Inserted::Duplicate
                {
                    duplicates.push(Error::DuplicateTensor { offset });
                }
                tensors.push(TensorEntry {
                    name: info.name.to_owned(),
                    ggml_type: info.ggml_type,
                    n_dims: info.n_dims,
                    ne_all: info.ne,
                    offset: info.offset,
                    elements: info.elements,
                    bytes: info.bytes,
                    info_offset: offset,
                });
            }
            Event::End(d) => {
                self.index.alignment = d.alignment;
                self.index.data_offset = d.data_offset;
                self.index.complete = true;
            }
        }
        Ok(())
    }

    fn string_piece(&mut self, piece: StrPiece<'_>, offset: u64) -> Result<()> {
        match self.open.last_mut() {
            Some(Array::String(strings)) => {
                if piece.at == 0 {
                    strings.push(piece.text);
                } else {
                    strings.extend_last(piece.text);
                }
            }
            Some(_) => return Err(out_of_place(offset)),
            None => {
                if piece.at == 0 {
                    self.start_value(offset)?;
                    self.string.clear();
                }
                self.string.push_str(piece.text);
                if piece.is_last() {
                    let s = std::mem::take(&mut self.string);
                    self.finish_value(Value::String(s))?;
                }
            }
        }
        Ok(())
    }

    fn start_value(&mut self, offset: u64) -> Result<()> {
        let pending = self.pending.as_mut().ok_or(out_of_place(offset))?;
        pending.value_offset = offset;
        Ok(())
    }

    fn finish_value(&mut self, value: Value) -> Result<()> {
        let PendingKey {
            key,
            key_offset,
            value_offset,
        } = self
            .pending
            .take()
            .ok_or(out_of_place(self.index.data_offset))?;
        let Index {
            metadata,
            key_lookup,
            ..
        } = &mut self.index;
        let i = metadata.len();
        // A duplicate was reported at its key; lookups keep finding the first occurrence.
        key_lookup.insert(&key, i, |j| metadata.get(j).map(|e| e.key.as_str()));
        self.index.metadata.push(MetadataEntry {
            key,
            value,
            key_offset,
            value_offset,
        });
        Ok(())
    }
}
