//! What the Rust API gives for each job, printed in the C program's format.

use std::fmt::Write as _;
use std::path::Path;

use miniquant::gguf::{ByteOrder, Catalog, Event, Limits, ReadParser, Scalar, SliceParser};
use miniquant::quant::{self, matvec};
use miniquant::{Error, GgmlType};

use crate::Job;

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn text(out: &mut String, t: &[u8]) {
    if t.len() > 64 {
        let _ = write!(out, "#{}:{:016x}", t.len(), fnv(t));
        return;
    }
    for &b in t {
        if b > 0x20 && b < 0x7f && b != b'\\' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

fn bits(s: Scalar) -> u64 {
    match s {
        Scalar::U8(v) => v.into(),
        Scalar::I8(v) => (v as u8).into(),
        Scalar::U16(v) => v.into(),
        Scalar::I16(v) => (v as u16).into(),
        Scalar::U32(v) => v.into(),
        Scalar::I32(v) => (v as u32).into(),
        Scalar::F32(v) => v.to_bits().into(),
        Scalar::Bool(v) => v.into(),
        Scalar::U64(v) => v,
        Scalar::I64(v) => v as u64,
        Scalar::F64(v) => v.to_bits(),
    }
}

fn event(out: &mut String, e: &Event<'_>, offset: u64) {
    match *e {
        Event::Header(h) => {
            let _ = write!(
                out,
                "header v={} be={} tensors={} metadata={}",
                h.version,
                u8::from(h.byte_order == ByteOrder::Big),
                h.tensor_count,
                h.metadata_count
            );
        }
        Event::Key { key, value_type } => {
            out.push_str("key ");
            text(out, key.as_bytes());
            let _ = write!(out, " type={}", value_type.code());
        }
        Event::Scalar(s) => {
            let _ = write!(
                out,
                "scalar type={} bits={:x}",
                s.value_type().code(),
                bits(s)
            );
        }
        Event::Scalars(run) => {
            let _ = write!(
                out,
                "scalars type={} n={} raw={} fnv={:016x}",
                run.element_type().code(),
                run.len(),
                run.raw().len(),
                fnv(run.raw())
            );
        }
        Event::String(p) => {
            let _ = write!(out, "string at={} len={} ", p.at, p.len);
            text(out, p.text.as_bytes());
        }
        Event::ArrayStart { element_type, len } => {
            let _ = write!(out, "array type={} len={len}", element_type.code());
        }
        Event::ArrayEnd => out.push_str("array_end"),
        Event::Tensor(t) => {
            out.push_str("tensor ");
            text(out, t.name.as_bytes());
            let mut ne = [1u64; 4];
            ne[..t.ne().len()].copy_from_slice(t.ne());
            let _ = write!(
                out,
                " type={} dims={} ne={},{},{},{} offset={} elements={} bytes={}",
                t.ggml_type.code(),
                t.n_dims,
                ne[0],
                ne[1],
                ne[2],
                ne[3],
                t.offset,
                t.elements,
                t.bytes
            );
        }
        Event::End(d) => {
            let _ = write!(out, "end align={} data={}", d.alignment, d.data_offset);
        }
    }
    let _ = writeln!(out, " @{offset}");
}

/// The error's variant name, as the core's `Debug` spells it.
fn name(e: &Error) -> String {
    let debug = format!("{e:?}");
    debug
        .split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn error(out: &mut String, e: &Error) {
    let limit = match e {
        Error::LimitExceeded { limit, .. } => limit.as_str(),
        _ => "",
    };
    let _ = write!(out, "error {} limit={limit}", name(e));
    match e.offset() {
        Some(o) => {
            let _ = writeln!(out, " @{o}");
        }
        None => out.push_str(" @-\n"),
    }
}

fn prefix(bytes: &[u8], len: Option<usize>) -> &[u8] {
    &bytes[..len.unwrap_or(usize::MAX).min(bytes.len())]
}

/// The byte-range parser's events over the first `len` bytes of `bytes`.
pub fn events(bytes: &[u8], len: Option<usize>) -> String {
    let mut out = String::new();
    let mut parser = SliceParser::new(prefix(bytes, len), Limits::DEFAULT);
    let mut n = 0;
    loop {
        match parser.next_event() {
            Ok(Some(e)) => {
                event(&mut out, &e, parser.event_offset());
                n += 1;
            }
            Ok(None) => {
                let _ = writeln!(out, "done events={n}");
                break;
            }
            Err(e) => {
                error(&mut out, &e);
                break;
            }
        }
    }
    out
}

/// The read sizes of the C program's callback.
const READ_SIZES: [usize; 7] = [1, 7, 61, 13, 200, 3, 97];

struct ShortReads<'a> {
    data: &'a [u8],
    reads: usize,
}

impl embedded_io::ErrorType for ShortReads<'_> {
    type Error = core::convert::Infallible;
}

impl embedded_io::Read for ShortReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = READ_SIZES[self.reads % 7]
            .min(buf.len())
            .min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.reads += 1;
        Ok(n)
    }
}

fn read(bytes: &[u8], len: Option<usize>, buffer: usize) -> String {
    let data = prefix(bytes, len);
    let mut out = String::new();
    let mut buf = vec![0u8; buffer];
    let reader = ShortReads { data, reads: 0 };
    let mut parser = match ReadParser::new(reader, &mut buf, Limits::DEFAULT) {
        Ok(p) => p.with_total_len(data.len() as u64),
        Err(e) => {
            error(&mut out, &e);
            return out;
        }
    };
    let mut n = 0;
    loop {
        let offset = parser.parser().offset();
        match parser.next_event() {
            Ok(Some(e)) => {
                event(&mut out, &e, offset);
                n += 1;
            }
            Ok(None) => {
                let _ = writeln!(out, "done events={n}");
                break;
            }
            Err(e) => {
                error(&mut out, &e);
                break;
            }
        }
    }
    out
}

const CATALOG_KEYS: [&str; 4] = [
    "general.architecture",
    "general.alignment",
    "tokenizer.ggml.tokens",
    "no.such.key",
];
const CATALOG_TENSORS: [&str; 4] = [
    "token_embd.weight",
    "blk.0.attn_q.weight",
    "output_norm.weight",
    "no.such.tensor",
];

fn catalog(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut found = Catalog::of(&CATALOG_KEYS, &CATALOG_TENSORS);
    let mut parser = SliceParser::new(bytes, Limits::DEFAULT);
    loop {
        match parser.next_event() {
            Ok(Some(e)) => found.observe(&e, parser.event_offset()),
            Ok(None) => break,
            Err(e) => {
                error(&mut out, &e);
                return out;
            }
        }
    }
    for k in CATALOG_KEYS {
        let _ = write!(out, "found key {k}: ");
        match found.key(k) {
            Some(f) => {
                let _ = write!(
                    out,
                    "1 type={} element={} at={} len={} scalar={}:{:x}",
                    f.value_type.code(),
                    f.element_type.map_or(-1, |t| t.code() as i64),
                    f.value_offset,
                    f.len,
                    u8::from(f.scalar.is_some()),
                    f.scalar.map_or(0, bits)
                );
            }
            None => out.push('0'),
        }
        out.push('\n');
    }
    for t in CATALOG_TENSORS {
        let _ = write!(out, "found tensor {t}: ");
        match found.tensor(t) {
            Some(f) => {
                let mut ne = [1u64; 4];
                let dims = f.n_dims as usize;
                ne[..dims].copy_from_slice(&f.ne[..dims]);
                let _ = write!(
                    out,
                    "1 type={} dims={} ne={},{},{},{} offset={} bytes={}",
                    f.ggml_type.code(),
                    f.n_dims,
                    ne[0],
                    ne[1],
                    ne[2],
                    ne[3],
                    f.offset,
                    f.bytes
                );
            }
            None => out.push('0'),
        }
        out.push('\n');
    }
    let _ = writeln!(out, "found data={}", found.data_offset().unwrap_or(0));
    out
}

/// The C program's activations: exact in f32.
fn input(i: usize) -> f32 {
    let h = (i as u32).wrapping_mul(2_654_435_761);
    ((h >> 8) & 0xffff) as f32 / 32768.0 - 1.0
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

const MAX_ROWS: usize = 8;

fn status(out: &mut String, what: &str, e: &Error) {
    let _ = writeln!(out, "{what} {}", name(e));
}

fn kernels_of(out: &mut String, w: &[u8], t: GgmlType, cols: usize, rows: usize) {
    let rows = rows.min(MAX_ROWS);
    let row_bytes = match quant::bytes_for(t, cols) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(
                out,
                "kernels type={} cols={cols} rows={rows} row_bytes=0",
                t.code()
            );
            status(out, "row_bytes", &e);
            return;
        }
    };
    let _ = writeln!(
        out,
        "kernels type={} cols={cols} rows={rows} row_bytes={row_bytes}",
        t.code()
    );
    let x: Vec<f32> = (0..cols).map(input).collect();
    let mut deq = vec![0f32; rows * cols];
    let dequantized = quant::dequantize(t, &w[..rows * row_bytes], &mut deq);
    match dequantized {
        Ok(()) => {
            let _ = writeln!(out, "dequantize fnv={:016x}", fnv(&f32_bytes(&deq)));
        }
        Err(e) => status(out, "dequantize", &e),
    }
    let mut requant = vec![0u8; row_bytes];
    match dequantized.and_then(|()| quant::quantize(t, &deq[..cols], &mut requant)) {
        Ok(()) => {
            let _ = writeln!(out, "requantize fnv={:016x}", fnv(&requant));
        }
        Err(e) => status(out, "requantize", &e),
    }
    let vd = quant::vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: miniquant::error::Op::VecDot,
    });
    let scratch_len = vd.and_then(|_| matvec::matvec_scratch_bytes(t, cols));
    let (vd, scratch_len) = match (vd, scratch_len) {
        (Ok(vd), Ok(s)) => (vd, s),
        (Err(e), _) | (_, Err(e)) => {
            status(out, "vec_dot_type", &e);
            return;
        }
    };
    let mut xq = vec![0u8; scratch_len];
    match quant::quantize(vd, &x, &mut xq) {
        Ok(()) => {
            let _ = writeln!(out, "activations type={} fnv={:016x}", vd.code(), fnv(&xq));
            match quant::vec_dot(t, &w[..row_bytes], &xq) {
                Ok(d) => {
                    let _ = writeln!(out, "vec_dot {:08x}", d.to_bits());
                }
                Err(e) => status(out, "vec_dot", &e),
            }
        }
        Err(e) => status(out, "activations", &e),
    }
    let mut y = vec![0f32; rows];
    match matvec::matvec(t, &w[..rows * row_bytes], rows, cols, &x, &mut xq, &mut y) {
        Ok(()) => {
            out.push_str("matvec");
            for v in &y {
                let _ = write!(out, " {:08x}", v.to_bits());
            }
            out.push('\n');
        }
        Err(e) => status(out, "matvec", &e),
    }
}

fn kernels(bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut parser = SliceParser::new(bytes, Limits::DEFAULT);
    let mut seen: Vec<(GgmlType, usize, usize, u64)> = Vec::new();
    let mut data_offset = 0;
    loop {
        match parser.next_event() {
            Ok(Some(Event::Tensor(t))) if t.n_dims == 2 && seen.len() < 64 => {
                if !seen.iter().any(|s| s.0 == t.ggml_type) {
                    seen.push((
                        t.ggml_type,
                        t.ne()[0] as usize,
                        t.ne()[1] as usize,
                        t.offset,
                    ));
                }
            }
            Ok(Some(Event::End(d))) => data_offset = d.data_offset,
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                status(&mut out, "parse", &e);
                return out;
            }
        }
    }
    // Both sides detect the same level (x86_64: cpuid in every build; elsewhere the target
    // features); the bits are the same at every level.
    let _ = writeln!(out, "level {}", quant::level::current());
    for (t, cols, rows, offset) in seen {
        let start = (data_offset + offset) as usize;
        kernels_of(&mut out, &bytes[start..], t, cols, rows);
    }
    out
}

/// Where a model's tensor data starts (the header's length).
pub fn data_offset(path: &Path) -> Result<u64, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut parser = SliceParser::new(&bytes, Limits::DEFAULT);
    loop {
        match parser.next_event() {
            Ok(Some(Event::End(d))) => return Ok(d.data_offset),
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("{}: no end of header", path.display())),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
}

/// The Rust API's output for `job`.
pub fn job(job: &Job) -> Result<String, String> {
    thread_local! {
        /// The last file read: the model jobs come in runs on one file of hundreds of MB.
        static LAST: std::cell::RefCell<(std::path::PathBuf, std::rc::Rc<Vec<u8>>)> = Default::default();
    }
    let read_file = |p: &Path| -> Result<std::rc::Rc<Vec<u8>>, String> {
        LAST.with_borrow_mut(|(path, bytes)| {
            if path.as_path() != p {
                *bytes = std::rc::Rc::new(
                    std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?,
                );
                *path = p.to_path_buf();
            }
            Ok(bytes.clone())
        })
    };
    Ok(match job {
        Job::Events { path, len } => events(&read_file(path)?, *len),
        Job::Read { path, len, buffer } => read(&read_file(path)?, *len, *buffer),
        Job::Catalog { path } => catalog(&read_file(path)?),
        Job::Kernels { path } => kernels(&read_file(path)?),
    })
}
