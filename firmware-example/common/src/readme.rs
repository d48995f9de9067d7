//! The README's "Using the core on firmware" snippet, compiled with the images so that it cannot
//! drift from the API (`cargo xtask firmware` also checks that the README holds these lines).

// --- README snippet begins
use miniquant::gguf::{Catalog, Limits, SliceParser};
use miniquant::quant::{k_quants::BlockQ4K, typed};
use miniquant::Error;

/// `y = W x` for the Q4_K tensor `blk.0.attn_output.weight` of a GGUF file in flash
/// (`x`: its 1024 columns, `y`: its 640 rows).
pub fn attn_output(model: &[u8], x: &[f32], y: &mut [f32]) -> Result<(), Error> {
    let name = "blk.0.attn_output.weight";
    let mut want = Catalog::of(&["general.architecture"], &[name]);
    let mut parser = SliceParser::new(model, Limits::default());
    while let Some(event) = parser.next_event()? {
        want.observe(&event, parser.event_offset());
    }
    // Type, dims, offset and size of the tensor, and where the data section starts: no heap.
    let (Some(t), Some(data)) = (want.tensor(name), want.data_offset()) else {
        return Ok(()); // not in this file
    };
    let start = data.saturating_add(t.offset);
    let end = start.saturating_add(t.bytes);
    let outside = Error::LengthMismatch {
        expected: end,
        found: model.len() as u64,
    };
    let w = model.get(start as usize..end as usize).ok_or(outside)?;
    let (cols, rows) = (t.ne[0] as usize, t.ne[1] as usize);
    // x quantized to Q8_K: 292 bytes per 256 values.
    let mut scratch = [0u8; 4 * 292];
    // Links only the Q4_K kernels and their activation quantizer; a shape mismatch is an error.
    typed::matvec::<BlockQ4K>(w, rows, cols, x, &mut scratch, y)
}
// --- README snippet ends
