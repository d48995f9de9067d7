//! The README's "Using the core on firmware" snippet, compiled with the images so that it cannot
//! drift from the API.

use miniquant::gguf::{Catalog, FoundTensor, Limits, SliceParser};

/// Finds `general.architecture` and one tensor in a GGUF file held in flash.
pub fn find_attn_q(model: &'static [u8]) -> Result<Option<FoundTensor>, miniquant::Error> {
    // --- README snippet begins
    let mut want = Catalog::<1, 1>::new(&["general.architecture"], &["blk.0.attn_q.weight"]);
    let mut parser = SliceParser::new(model, Limits::default());
    while let Some(event) = parser.next_event()? {
        want.observe(&event, parser.event_offset());
    }
    let q = want.tensor("blk.0.attn_q.weight"); // type, dims, offset, bytes: no heap
                                                // --- README snippet ends
    Ok(q.copied())
}
