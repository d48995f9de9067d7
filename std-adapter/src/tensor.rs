//! A tensor seen as ggml sees it for matrix work: rows of `ne[0]` elements each (`cols`), every
//! other dimension folded into the row count; and the helpers of [`GgufFile`] that dequantize or
//! multiply a tensor by name.

use std::borrow::Cow;
use std::ops::Range;

use miniquant::gguf::ByteOrder;
use miniquant::quant::{self, byte_order};
use miniquant::{Error, GgmlType, Result};

use crate::parallel;

use crate::error::ErrorKind;
use crate::file::GgufFile;
use crate::index::TensorEntry;

impl TensorEntry {
    /// Elements per row: the first stored dimension (`ne[0]`, the last of [`shape`](Self::shape));
    /// 1 for a 0-d tensor.
    pub fn cols(&self) -> u64 {
        self.ne().first().copied().unwrap_or(1)
    }

    /// Rows: the product of every dimension but the first stored one (1 for a 1-d tensor).
    pub fn rows(&self) -> u64 {
        self.ne().iter().skip(1).product()
    }

    /// Bytes of one row (whole blocks: the parser checks `ne[0]` against the block size).
    pub fn row_bytes(&self) -> u64 {
        self.ggml_type.bytes_for(self.cols()).unwrap_or(0)
    }
}

impl GgufFile {
    /// Turns `native` (whole blocks of `t` in the kernels' little-endian layout) into this file's
    /// byte order, in place: the inverse of the conversion of [`rows_data`](Self::rows_data), for
    /// data written beside a header in this file's order (`requantize` keeps the input's order).
    /// Errors: for a big-endian file, a type without a big-endian layout, or partial blocks.
    pub fn native_to_file_order(&self, t: GgmlType, native: &mut [u8]) -> Result<()> {
        match self.index().byte_order() {
            // Each big-endian swap is its own inverse.
            Some(ByteOrder::Big) => byte_order::big_endian_to_native_in_place(t, native),
            Some(ByteOrder::Little) | None => Ok(()),
        }
    }

    /// The data of rows `rows` of `tensor` (an entry of this file's index) in the layout the
    /// kernels read: borrowed from the file for a little-endian file, converted for a big-endian
    /// one (as [`native_data_of`](Self::native_data_of)). Errors: rows past the tensor's end, data
    /// outside the file, or a type with no known big-endian layout.
    pub fn rows_data(&self, tensor: &TensorEntry, rows: Range<u64>) -> Result<Cow<'_, [u8]>> {
        let row_bytes = tensor.row_bytes();
        let bad_rows = Error::LengthMismatch {
            expected: tensor.rows(),
            found: rows.end,
        };
        if rows.start > rows.end || rows.end > tensor.rows() {
            return Err(bad_rows);
        }
        // Both products are at most the tensor's byte size, which lies inside the file.
        let start = usize::try_from(rows.start.saturating_mul(row_bytes)).map_err(|_| bad_rows)?;
        let end = usize::try_from(rows.end.saturating_mul(row_bytes)).map_err(|_| bad_rows)?;
        let stored = self.data_of(tensor)?.get(start..end).ok_or(bad_rows)?;
        self.native(tensor.ggml_type, stored)
    }

    /// Every element of the tensor called `name` as f32, row-major, on up to `threads` threads
    /// (0 counts as 1; [`parallel::default_threads`] is every core). Every block is dequantized
    /// alone, so the result has the same bits for any thread count.
    ///
    /// ```
    /// # let path = std::env::temp_dir().join(format!("miniquant-doc-dq-{}.gguf", std::process::id()));
    /// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
    /// let file = miniquant_std::GgufFile::open(&path)?;
    /// let w = file.dequantize_tensor("blk.0.attn_q.weight", 2)?; // Q8_0 [2, 64]
    /// assert_eq!(w.len(), 128);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dequantize_tensor(&self, name: &str, threads: usize) -> Result<Vec<f32>, crate::Error> {
        let (tensor, data) = self.whole_tensor(name)?;
        let t = tensor.ggml_type;
        let n = quant::elements_in(t, data.len()).map_err(|e| self.error(ErrorKind::Gguf(e)))?;
        let mut out = vec![0f32; n];
        // Chunks of whole rows (whole blocks), at least MIN_BYTES_PER_THREAD of data each.
        let rows = usize::try_from(tensor.rows()).unwrap_or(usize::MAX).max(1);
        let by_size = data.len() / parallel::MIN_BYTES_PER_THREAD;
        let threads = threads.min(rows).min(by_size).max(1);
        if threads == 1 {
            quant::dequantize(t, &data, &mut out).map_err(|e| self.error(ErrorKind::Gguf(e)))?;
            return Ok(out);
        }
        let rows_per_chunk = rows.div_ceil(threads);
        let row_bytes = data.len() / rows;
        let row_values = n / rows;
        let chunks = data
            .chunks(rows_per_chunk * row_bytes)
            .zip(out.chunks_mut(rows_per_chunk * row_values));
        std::thread::scope(|s| {
            let mut pending = Vec::new();
            let mut chunks = chunks.peekable();
            while let Some((src, dst)) = chunks.next() {
                if chunks.peek().is_none() {
                    // The calling thread takes the last chunk.
                    pending.push(Ok(quant::dequantize(t, src, dst)));
                } else {
                    pending.push(Err(s.spawn(move || quant::dequantize(t, src, dst))));
                }
            }
            pending.into_iter().try_for_each(|p| {
                let done = match p {
                    Ok(done) => done,
                    // A panicking kernel is a bug; report it as an error rather than abort.
                    Err(handle) => handle.join().unwrap_or(Err(Error::LengthMismatch {
                        expected: n as u64,
                        found: 0,
                    })),
                };
                done.map_err(|e| self.error(ErrorKind::Gguf(e)))
            })
        })?;
        Ok(out)
    }

    /// `y = W x` for the tensor `W` called `name`, seen as [`rows`](TensorEntry::rows) rows of
    /// [`cols`](TensorEntry::cols) elements, on up to `threads` threads (0 counts as 1; small
    /// matrices use fewer, see [`parallel::matvec`]); `x` has `cols` values. `x` is quantized to
    /// the weight type's vec-dot type first, as ggml does ([`quant::matvec::matvec`]); the result has the
    /// same bits for any thread count.
    ///
    /// ```
    /// # let path = std::env::temp_dir().join(format!("miniquant-doc-mv-{}.gguf", std::process::id()));
    /// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
    /// let file = miniquant_std::GgufFile::open(&path)?;
    /// let w = file.index().tensor("blk.0.ffn_up.weight").expect("listed"); // Q4_0 [4, 32]
    /// let x = vec![1.0f32; w.cols() as usize];
    /// let y = file.matvec_tensor("blk.0.ffn_up.weight", &x, 1)?;
    /// assert_eq!(y.len() as u64, w.rows());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn matvec_tensor(
        &self,
        name: &str,
        x: &[f32],
        threads: usize,
    ) -> Result<Vec<f32>, crate::Error> {
        let (tensor, w) = self.whole_tensor(name)?;
        let too_big = |_| {
            self.error(ErrorKind::Gguf(Error::LengthMismatch {
                expected: tensor.rows(),
                found: usize::MAX as u64,
            }))
        };
        let rows = usize::try_from(tensor.rows()).map_err(too_big)?;
        let cols = usize::try_from(tensor.cols()).map_err(too_big)?;
        if x.len() != cols {
            return Err(self.error(ErrorKind::Gguf(Error::LengthMismatch {
                expected: cols as u64,
                found: x.len() as u64,
            })));
        }
        let mut y = vec![0f32; rows];
        let level = quant::level::current();
        parallel::matvec(
            level,
            tensor.ggml_type,
            &w,
            rows,
            cols,
            x,
            threads.max(1),
            &mut y,
        )
        .map_err(|e| self.error(ErrorKind::Gguf(e)))?;
        Ok(y)
    }

    /// The entry and kernel-layout data of the tensor called `name`, which must lie wholly in
    /// the file.
    fn whole_tensor(&self, name: &str) -> Result<(&TensorEntry, Cow<'_, [u8]>), crate::Error> {
        let tensor = self
            .index()
            .tensor(name)
            .ok_or_else(|| self.error(ErrorKind::NoSuchTensor(name.to_owned())))?;
        if let Some(cut) = self.cut(tensor) {
            return Err(cut);
        }
        let data = self
            .native_data_of(tensor)
            .map_err(|e| self.error(ErrorKind::Gguf(e)))?;
        Ok((tensor, data))
    }
}

#[cfg(test)]
mod tests {
    use crate::error::ErrorKind;
    use crate::writer::GgufWriter;
    use miniquant::GgmlType;

    #[test]
    fn rows_fold_every_dimension_but_the_first() {
        let mut w = GgufWriter::new();
        w.tensor("m", GgmlType::Q8_0, &[64, 3, 2], vec![0; 6 * 2 * 34])
            .tensor("v", GgmlType::F32, &[5], vec![0; 20])
            .tensor("s", GgmlType::F32, &[], vec![0; 4]);
        let index = crate::Index::from_bytes(&w.to_bytes()).unwrap();
        let dims = |name| {
            let t = index.tensor(name).unwrap();
            (t.rows(), t.cols(), t.row_bytes())
        };
        assert_eq!(dims("m"), (6, 64, 68));
        assert_eq!(dims("v"), (1, 5, 20));
        assert_eq!(dims("s"), (1, 1, 4));
    }

    fn open_bytes(name: &str, bytes: &[u8]) -> crate::GgufFile {
        let path =
            std::env::temp_dir().join(format!("miniquant-{name}-{}.gguf", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        let file = crate::GgufFile::open_unchecked(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    /// 4096 rows of Q8_0 (278 KB): enough for four threads' shares.
    fn big_q8_0() -> Vec<u8> {
        let values: Vec<f32> = (0..4096 * 64)
            .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let mut blocks = vec![0u8; 4096 * 2 * 34];
        miniquant::quant::quantize(GgmlType::Q8_0, &values, &mut blocks).unwrap();
        let mut w = GgufWriter::new();
        w.tensor("a", GgmlType::F32, &[4], vec![0; 16]).tensor(
            "w",
            GgmlType::Q8_0,
            &[64, 4096],
            blocks,
        );
        w.to_bytes()
    }

    #[test]
    fn threads_give_the_same_bits_as_one() {
        let file = open_bytes("threads", &big_q8_0());
        let data = file.tensor_data("w").unwrap();
        let mut expected = vec![0f32; 4096 * 64];
        miniquant::quant::dequantize(GgmlType::Q8_0, data, &mut expected).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for threads in [0, 1, 2, 3, 4, 64] {
            let found = file.dequantize_tensor("w", threads).unwrap();
            assert_eq!(bits(&found), bits(&expected), "{threads} threads");
        }
        let x: Vec<f32> = (0..64).map(|i| i as f32 / 64.0 - 0.5).collect();
        let one = file.matvec_tensor("w", &x, 1).unwrap();
        assert_eq!(one.len(), 4096);
        for threads in [0, 2, 3] {
            assert_eq!(
                bits(&file.matvec_tensor("w", &x, threads).unwrap()),
                bits(&one)
            );
        }
        assert!(file.matvec_tensor("w", &x[..32], 2).is_err());
    }

    /// A partial download: the tensors wholly present are read; the cut one is named, with how
    /// much of it is there; opening it strictly fails with the one truncation line, in `Debug` too.
    #[test]
    fn a_truncated_file_reads_what_is_there() {
        let bytes = big_q8_0();
        let cut_at = bytes.len() - 1000;
        let file = open_bytes("truncated", &bytes[..cut_at]);
        assert!(file.is_only_truncated());
        assert_eq!(file.dequantize_tensor("a", 1).unwrap(), vec![0.0; 4]);
        let w = file.index().tensor("w").unwrap();
        let start = file.index().data_range(w).unwrap().start;
        let err = file.dequantize_tensor("w", 1).unwrap_err();
        let present = cut_at as u64 - start;
        assert!(
            matches!(err.kind(), ErrorKind::Cut { name, present: p, bytes }
                if name == "w" && *p == present && *bytes == w.bytes),
            "{err:?}"
        );
        assert!(err.kind().to_string().starts_with(&format!(
            "tensor \"w\" is cut at byte {present} of {}",
            w.bytes
        )));
        assert_eq!(
            file.tensor_data("w").unwrap_err().to_string(),
            err.to_string()
        );
        assert!(file.cut(file.index().tensor("a").unwrap()).is_none());

        let path = std::env::temp_dir().join(format!("miniquant-cut-{}.gguf", std::process::id()));
        std::fs::write(&path, &bytes[..cut_at]).unwrap();
        let open = crate::GgufFile::open(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        let line = format!("{open:?}");
        assert_eq!(line, open.to_string());
        let named = format!(
            "{:?}: file is truncated: it has",
            path.display().to_string()
        );
        assert!(line.starts_with(&named), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }
}
