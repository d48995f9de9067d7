//! Rewriting each real file through the core writer, its header copied event by event and its
//! tensors' data copied in directory order, gives the original file byte for byte.

use miniquant::gguf::{Event, GgufWriter, Limits, SliceParser, TensorSpec, WriteOptions};
use miniquant::GgmlType;
use miniquant_tests::cache::{model_path, MODEL_FILES};

/// A sink that compares what it is given with the original file instead of storing it.
struct CompareSink<'a> {
    expected: &'a [u8],
    at: usize,
}

impl embedded_io::ErrorType for CompareSink<'_> {
    type Error = core::convert::Infallible;
}

impl embedded_io::Write for CompareSink<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        let end = self.at + buf.len();
        assert!(
            end <= self.expected.len(),
            "the copy runs past the original's {} bytes",
            self.expected.len()
        );
        if let Some(i) = (0..buf.len()).find(|&i| buf[i] != self.expected[self.at + i]) {
            panic!(
                "first difference at byte {}: wrote {:#04x}, original has {:#04x}",
                self.at + i,
                buf[i],
                self.expected[self.at + i]
            );
        }
        self.at = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

struct OwnedTensor {
    name: String,
    ggml_type: GgmlType,
    ne: Vec<u64>,
    offset: u64,
    bytes: u64,
}

#[test]
fn rewriting_the_real_files_gives_identical_bytes() {
    for name in MODEL_FILES {
        let path = model_path(name);
        let file = std::fs::read(&path).unwrap();
        let mut tensors = Vec::new();
        let mut header = None;
        let mut data_offset = 0;
        for event in SliceParser::new(&file, Limits::DEFAULT) {
            match event.unwrap() {
                Event::Header(h) => header = Some(h),
                Event::Tensor(t) => tensors.push(OwnedTensor {
                    name: t.name.to_owned(),
                    ggml_type: t.ggml_type,
                    ne: t.ne().to_vec(),
                    offset: t.offset,
                    bytes: t.bytes,
                }),
                Event::End(d) => data_offset = d.data_offset,
                _ => {}
            }
        }
        let header = header.unwrap();
        let specs: Vec<TensorSpec<'_>> = tensors
            .iter()
            .map(|t| TensorSpec {
                name: &t.name,
                ggml_type: t.ggml_type,
                ne: &t.ne,
            })
            .collect();
        let options = WriteOptions {
            version: header.version,
            byte_order: header.byte_order,
            ..WriteOptions::DEFAULT
        };
        let sink = CompareSink {
            expected: &file,
            at: 0,
        };
        let mut w = GgufWriter::new(sink, options, header.metadata_count, &specs).unwrap();
        for event in SliceParser::new(&file, Limits::DEFAULT) {
            w.event(&event.unwrap()).unwrap();
        }
        assert_eq!(w.written(), data_offset, "{name}: header length");
        for t in &tensors {
            let start = (data_offset + t.offset) as usize;
            // Two pieces, to copy the way a streaming program would.
            let data = &file[start..start + t.bytes as usize];
            let (a, b) = data.split_at(data.len() / 2);
            w.tensor_data(a).unwrap();
            w.tensor_data(b).unwrap();
        }
        let sink = w.finish().unwrap();
        assert_eq!(
            sink.at,
            file.len(),
            "{name}: the copy is shorter than the original"
        );
        println!("{name}: {} bytes rewritten identically", file.len());
    }
}
