//! Reads a GGUF header with candle-core's `Content::read` over `BufReader<File>`, as candle's own
//! examples do, and prints the counts: the whole-process anchor that `miniquant validate` is timed
//! against (`cargo bench -p miniquant-tests --bench validate_process`).

use std::io::BufReader;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: candle_header FILE")?;
    let mut reader = BufReader::new(std::fs::File::open(&path)?);
    let content = candle_core::quantized::gguf_file::Content::read(&mut reader)?;
    println!(
        "{} metadata keys, {} tensors, data offset {}",
        content.metadata.len(),
        content.tensor_infos.len(),
        content.tensor_data_offset
    );
    Ok(())
}
