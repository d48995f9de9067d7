//! A tensor seen as ggml sees it for matrix work: rows of `ne[0]` elements each (`cols`), every
//! other dimension folded into the row count; and the helpers of [`GgufFile`] that dequantize or
//! multiply a tensor by name.

use std::borrow::Cow;
use std::ops::Range;

use miniquant::quant::{self, matvec};
use miniquant::{Error, Result};

use crate::file::{GgufFile, TensorDataError};
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
    pub fn native_to_file_order(&self, t: miniquant::GgmlType, native: &mut [u8]) -> Result<()> {
        use miniquant::{gguf::ByteOrder, quant::byte_order};
        match self.index().byte_order() {
            // Each big-endian swap is its own inverse.
            Some(ByteOrder::Big) => byte_order::big_endian_to_native_in_place(t, native),
            Some(ByteOrder::Little) | None => Ok(()),
        }
    }
}

impl GgufFile {
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

    /// Every element of the tensor called `name` as f32, row-major.
    ///
    /// ```
    /// # let path = std::env::temp_dir().join(format!("miniquant-doc-dq-{}.gguf", std::process::id()));
    /// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
    /// let file = miniquant_std::GgufFile::open(&path)?;
    /// let w = file.dequantize_tensor("blk.0.attn_q.weight")?; // Q8_0 [2, 64]
    /// assert_eq!(w.len(), 128);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dequantize_tensor(&self, name: &str) -> Result<Vec<f32>, TensorDataError> {
        let tensor = self.tensor_entry(name)?;
        let data = self.native_data_of(tensor).map_err(TensorDataError::Gguf)?;
        let n = quant::elements_in(tensor.ggml_type, data.len()).map_err(TensorDataError::Gguf)?;
        let mut out = vec![0f32; n];
        quant::dequantize(tensor.ggml_type, &data, &mut out).map_err(TensorDataError::Gguf)?;
        Ok(out)
    }

    /// `y = W x` for the tensor `W` called `name`, seen as [`rows`](TensorEntry::rows) rows of
    /// [`cols`](TensorEntry::cols) elements; `x` has `cols` values. `x` is quantized to the
    /// weight type's vec-dot type first, as ggml does ([`matvec::matvec`]).
    ///
    /// ```
    /// # let path = std::env::temp_dir().join(format!("miniquant-doc-mv-{}.gguf", std::process::id()));
    /// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
    /// let file = miniquant_std::GgufFile::open(&path)?;
    /// let w = file.index().tensor("blk.0.ffn_up.weight").expect("listed"); // Q4_0 [4, 32]
    /// let x = vec![1.0f32; w.cols() as usize];
    /// let y = file.matvec_tensor("blk.0.ffn_up.weight", &x)?;
    /// assert_eq!(y.len() as u64, w.rows());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn matvec_tensor(&self, name: &str, x: &[f32]) -> Result<Vec<f32>, TensorDataError> {
        let tensor = self.tensor_entry(name)?;
        let w = self.native_data_of(tensor).map_err(TensorDataError::Gguf)?;
        let too_big = TensorDataError::Gguf(Error::LengthMismatch {
            expected: tensor.rows(),
            found: usize::MAX as u64,
        });
        let rows = usize::try_from(tensor.rows()).map_err(|_| too_big.clone())?;
        let cols = usize::try_from(tensor.cols()).map_err(|_| too_big)?;
        let t = tensor.ggml_type;
        let mut scratch =
            vec![0u8; matvec::matvec_scratch_bytes(t, cols).map_err(TensorDataError::Gguf)?];
        let mut y = vec![0f32; rows];
        matvec::matvec(t, &w, rows, cols, x, &mut scratch, &mut y)
            .map_err(TensorDataError::Gguf)?;
        Ok(y)
    }

    fn tensor_entry(&self, name: &str) -> Result<&TensorEntry, TensorDataError> {
        self.index()
            .tensor(name)
            .ok_or_else(|| TensorDataError::NoSuchTensor(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
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
}
