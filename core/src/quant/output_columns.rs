//! Where a matmul writes: row `r` of output column `c`, for the rows of one call. The columns are
//! either one slice with a stride (a whole `n × rows` output, or a run of rows of it) or one slice
//! per column. The second form lets threads that split the rows write their pieces straight into
//! the columns of one output (each holding its run of every column, which one slice and a stride
//! cannot hand out in safe code) instead of through a buffer and a copy.

use crate::error::{Error, Result};

/// The output columns of one matmul call: `rows` rows of each column, from row `first_row` of
/// what the view was made from. Kernels reach outputs only through it, so an output outside it is
/// never written (the getters return `None`).
#[derive(Debug)]
pub struct OutputColumns<'a, 'b> {
    columns: Columns<'a, 'b>,
    first_row: usize,
    rows: usize,
}

#[derive(Debug)]
enum Columns<'a, 'b> {
    /// Column `c` starts at `y[c * stride]`.
    Strided { y: &'a mut [f32], stride: usize },
    /// Column `c` is `columns[c]`.
    Split(&'a mut [&'b mut [f32]]),
}

impl<'a> OutputColumns<'a, 'static> {
    /// The whole of `y` as `n` columns of `rows` rows, one after another: a length error unless
    /// `y` holds exactly `rows · n` values.
    pub fn whole(y: &'a mut [f32], rows: usize, n: usize) -> Result<Self> {
        let outputs = rows.checked_mul(n).ok_or(Error::LengthMismatch {
            expected: u64::MAX,
            found: y.len() as u64,
        })?;
        if outputs != y.len() {
            return Err(Error::LengthMismatch {
                expected: outputs as u64,
                found: y.len() as u64,
            });
        }
        Ok(Self::strided(y, rows, rows))
    }

    /// Rows `0..rows` of the columns of `y` that start `stride` values apart (column `c` at
    /// `y[c * stride]`).
    pub fn strided(y: &'a mut [f32], stride: usize, rows: usize) -> Self {
        OutputColumns {
            columns: Columns::Strided { y, stride },
            first_row: 0,
            rows,
        }
    }
}

impl<'a, 'b> OutputColumns<'a, 'b> {
    /// Rows `first_row..first_row + rows` of each slice of `columns`.
    pub fn split(columns: &'a mut [&'b mut [f32]], first_row: usize, rows: usize) -> Self {
        OutputColumns {
            columns: Columns::Split(columns),
            first_row,
            rows,
        }
    }

    /// The rows of each column.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// How many of the first columns hold all of the rows (`usize::MAX` for columns 0 apart).
    pub fn columns_held(&self) -> usize {
        let Some(end) = self.first_row.checked_add(self.rows) else {
            return 0;
        };
        match &self.columns {
            Columns::Strided { y, stride } => match (y.len().checked_sub(end), *stride) {
                (None, _) => 0,
                (Some(_), 0) => usize::MAX,
                (Some(room), stride) => room / stride + 1,
            },
            Columns::Split(columns) => columns.iter().take_while(|c| c.len() >= end).count(),
        }
    }

    /// Whether every column `0..n` holds all of the rows.
    pub fn holds(&self, n: usize) -> bool {
        self.columns_held() >= n
    }

    /// The rows of column `c`, `None` where the view does not hold them.
    #[inline(always)]
    pub fn column(&mut self, c: usize) -> Option<&mut [f32]> {
        self.run(c, 0, self.rows)
    }

    /// Columns `c` and `c + 1`, `None` where the view does not hold them.
    pub fn pair(&mut self, c: usize) -> Option<(&mut [f32], &mut [f32])> {
        let (first, end) = (self.first_row, self.first_row.checked_add(self.rows)?);
        match &mut self.columns {
            Columns::Strided { y, stride } => {
                let start = c.checked_mul(*stride)?;
                let next = start.checked_add(*stride)?;
                let (before, after) = y.split_at_mut_checked(next)?;
                let left = before.get_mut(start.checked_add(first)?..start.checked_add(end)?)?;
                Some((left, after.get_mut(first..end)?))
            }
            Columns::Split(columns) => {
                let (before, after) = columns.split_at_mut_checked(c.checked_add(1)?)?;
                let left = before.get_mut(c)?.get_mut(first..end)?;
                Some((left, after.first_mut()?.get_mut(first..end)?))
            }
        }
    }

    /// Rows `r..r + len` of column `c`, `None` where the view does not hold them all.
    // Inlined always, and no closures: a call from a kernel's loop would spill its vector
    // registers around it (every one of them is the caller's to save).
    #[inline(always)]
    pub fn run(&mut self, c: usize, r: usize, len: usize) -> Option<&mut [f32]> {
        let end = r.saturating_add(len);
        if end > self.rows {
            return None;
        }
        let (first, end) = (
            self.first_row.saturating_add(r),
            self.first_row.saturating_add(end),
        );
        match &mut self.columns {
            Columns::Strided { y, stride } => {
                let start = c.saturating_mul(*stride);
                y.get_mut(start.saturating_add(first)..start.saturating_add(end))
            }
            Columns::Split(columns) => match columns.get_mut(c) {
                Some(column) => column.get_mut(first..end),
                None => None,
            },
        }
    }

    /// Rows `r..r + len` of the columns `c0..c0 + C` at once (one lookup for a tile's columns),
    /// each `None` where the view does not hold it.
    #[inline(always)]
    pub fn runs<const C: usize>(
        &mut self,
        c0: usize,
        r: usize,
        len: usize,
    ) -> [Option<&mut [f32]>; C] {
        let mut runs = [const { None }; C];
        let end = r.saturating_add(len);
        if end > self.rows {
            return runs;
        }
        let (first, end) = (
            self.first_row.saturating_add(r),
            self.first_row.saturating_add(end),
        );
        match &mut self.columns {
            Columns::Strided { y, stride } => {
                // Each column split off the front of what is left after the one before.
                let mut rest: &mut [f32] = y;
                let mut rest_start = 0usize;
                for (j, run) in runs.iter_mut().enumerate() {
                    let start = c0.saturating_add(j).saturating_mul(*stride);
                    let Some(skip) = start.saturating_add(first).checked_sub(rest_start) else {
                        break;
                    };
                    let Some((_, after)) = core::mem::take(&mut rest).split_at_mut_checked(skip)
                    else {
                        break;
                    };
                    let Some((column, after)) = after.split_at_mut_checked(end - first) else {
                        break;
                    };
                    *run = Some(column);
                    rest = after;
                    rest_start = start.saturating_add(end);
                }
            }
            Columns::Split(columns) => {
                let mut columns = columns.iter_mut().skip(c0);
                for run in runs.iter_mut() {
                    let Some(column) = columns.next() else {
                        break;
                    };
                    *run = column.get_mut(first..end);
                }
            }
        }
        runs
    }

    /// Writes a tile of outputs: `tile[r][c]` to row `r0 + r` of column `c0 + c`, for the first
    /// `columns` columns (and as many rows as the view holds).
    #[inline(always)]
    pub fn store_tile<const R: usize, const C: usize>(
        &mut self,
        c0: usize,
        r0: usize,
        tile: &[[f32; C]; R],
        columns: usize,
    ) {
        let rows = R.min(self.rows.saturating_sub(r0));
        for c in 0..C.min(columns) {
            if let Some(run) = self.run(c0.saturating_add(c), r0, rows) {
                for (out, row) in run.iter_mut().zip(tile) {
                    *out = row[c];
                }
            }
        }
    }

    /// Row `r` of column `c`, `None` where the view does not hold it.
    #[inline(always)]
    pub fn get_mut(&mut self, c: usize, r: usize) -> Option<&mut f32> {
        if r >= self.rows {
            return None;
        }
        let row = self.first_row.saturating_add(r);
        match &mut self.columns {
            Columns::Strided { y, stride } => {
                y.get_mut(c.saturating_mul(*stride).saturating_add(row))
            }
            Columns::Split(columns) => match columns.get_mut(c) {
                Some(column) => column.get_mut(row),
                None => None,
            },
        }
    }

    /// Rows `first..first + rows` of this view (as far as it holds them), as a view of its own.
    #[inline(always)]
    pub fn rows_at(&mut self, first: usize, rows: usize) -> OutputColumns<'_, 'b> {
        let first = first.min(self.rows);
        OutputColumns {
            columns: match &mut self.columns {
                Columns::Strided { y, stride } => Columns::Strided { y, stride: *stride },
                Columns::Split(columns) => Columns::Split(columns),
            },
            first_row: self.first_row.saturating_add(first),
            rows: rows.min(self.rows - first),
        }
    }

    /// This view as the [`ColumnStore`] of its form, for a kernel generic over it.
    pub fn stores(&mut self) -> Stores<'_, 'b> {
        let (first_row, rows) = (self.first_row, self.rows);
        match &mut self.columns {
            Columns::Strided { y, stride } => Stores::Strided(StridedStore {
                y,
                stride: *stride,
                first_row,
                rows,
            }),
            Columns::Split(columns) => Stores::Split(SplitStore {
                columns,
                first_row,
                rows,
            }),
        }
    }
}

/// One output at a time, with the view's form resolved once per call: a kernel generic over it
/// stores with the bounds checks of a plain slice (a hot loop that matched the form at every
/// store measured slower).
pub trait ColumnStore {
    /// Row `r` of column `c` set to `v` (nothing outside the view).
    fn set(&mut self, c: usize, r: usize, v: f32);
}

/// The columns of a strided view, as a [`ColumnStore`].
#[derive(Debug)]
pub struct StridedStore<'s> {
    y: &'s mut [f32],
    stride: usize,
    first_row: usize,
    rows: usize,
}

impl ColumnStore for StridedStore<'_> {
    #[inline(always)]
    fn set(&mut self, c: usize, r: usize, v: f32) {
        if r < self.rows {
            let at = c.saturating_mul(self.stride);
            if let Some(slot) = self.y.get_mut(at.saturating_add(self.first_row + r)) {
                *slot = v;
            }
        }
    }
}

/// The columns of a view of a slice per column, as a [`ColumnStore`].
#[derive(Debug)]
pub struct SplitStore<'s, 'b> {
    columns: &'s mut [&'b mut [f32]],
    first_row: usize,
    rows: usize,
}

impl ColumnStore for SplitStore<'_, '_> {
    #[inline(always)]
    fn set(&mut self, c: usize, r: usize, v: f32) {
        if r < self.rows {
            if let Some(column) = self.columns.get_mut(c) {
                if let Some(slot) = column.get_mut(self.first_row + r) {
                    *slot = v;
                }
            }
        }
    }
}

/// A view as the [`ColumnStore`] of its form ([`OutputColumns::stores`]).
#[derive(Debug)]
pub enum Stores<'s, 'b> {
    /// One slice with a stride.
    Strided(StridedStore<'s>),
    /// A slice per column.
    Split(SplitStore<'s, 'b>),
}

/// Whether `y` holds `rows` rows (exactly) of `n` columns: a length error if not.
pub(crate) fn check_holds(y: &OutputColumns<'_, '_>, rows: usize, n: usize) -> Result<()> {
    if y.rows() != rows {
        return Err(Error::LengthMismatch {
            expected: rows as u64,
            found: y.rows() as u64,
        });
    }
    if !y.holds(n) {
        return Err(Error::LengthMismatch {
            expected: n as u64,
            found: y.columns_held() as u64,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{ColumnStore, OutputColumns, Stores};

    #[test]
    fn strided_and_split_views_reach_the_same_outputs() {
        // Three columns of 5 rows, 7 apart; the view takes rows 1..4 of each.
        let mut y = [0.0f32; 3 * 7];
        let mut strided = OutputColumns::strided(&mut y, 7, 5);
        let mut view = strided.rows_at(1, 3);
        assert!(view.holds(3));
        assert!(!view.holds(4));
        for c in 0..3 {
            for r in 0..3 {
                *view.get_mut(c, r).unwrap() = (10 * c + r) as f32;
            }
            assert!(view.get_mut(c, 3).is_none());
        }
        let [a, b, c, d] = view.runs::<4>(0, 1, 2);
        assert_eq!(
            (a.unwrap()[1], b.unwrap()[0], c.unwrap()[1]),
            (2.0, 11.0, 22.0)
        );
        assert!(d.is_none());
        let [a, b] = view.runs::<2>(1, 2, 2);
        assert!(a.is_none() && b.is_none());
        view.store_tile::<2, 2>(1, 2, &[[-1.0, -2.0], [-3.0, -4.0]], 1);
        assert_eq!(*view.get_mut(1, 2).unwrap(), -1.0);
        assert_eq!(*view.get_mut(2, 2).unwrap(), 22.0);
        *view.get_mut(1, 2).unwrap() = 12.0;
        let (left, right) = view.pair(1).unwrap();
        assert_eq!((left[2], right[0]), (12.0, 20.0));
        assert!(view.pair(2).is_none());
        let written: [f32; 21] = y;
        let expected = |c: usize, r: usize| {
            if (1..4).contains(&r) && r < 5 {
                (10 * c + r - 1) as f32
            } else {
                0.0
            }
        };
        for (at, &value) in written.iter().enumerate() {
            assert_eq!(value, expected(at / 7, at % 7), "at {at}");
        }

        let mut storage = [[0.0f32; 6]; 3];
        let mut columns = storage.each_mut().map(|c| &mut c[..]);
        let mut split = OutputColumns::split(&mut columns, 2, 4);
        let mut view = split.rows_at(1, usize::MAX);
        assert_eq!(view.rows(), 3);
        assert!(view.holds(3));
        for c in 0..3 {
            view.column(c).unwrap().copy_from_slice(&[1.0, 2.0, 3.0]);
        }
        assert!(view.column(3).is_none());
        let [a, b, c] = view.runs::<3>(1, 1, 2);
        assert_eq!(
            (a.unwrap(), b.unwrap(), c),
            (&mut [2.0, 3.0][..], &mut [2.0, 3.0][..], None)
        );
        for column in storage {
            assert_eq!(column, [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]);
        }
    }

    #[test]
    fn stores_of_both_forms_set_the_views_outputs_only() {
        fn fill(store: &mut impl ColumnStore) {
            for c in 0..4 {
                for r in 0..4 {
                    store.set(c, r, (10 * c + r) as f32);
                }
            }
        }
        // Rows 1..3 of three columns, 5 apart; the store is asked for four of each.
        let mut y = [0.0f32; 15];
        let mut strided = OutputColumns::strided(&mut y, 5, 4);
        match strided.rows_at(1, 2).stores() {
            Stores::Strided(mut store) => fill(&mut store),
            Stores::Split(_) => panic!("a strided view's store is strided"),
        }
        let mut storage = [[0.0f32; 5]; 3];
        let mut columns = storage.each_mut().map(|c| &mut c[..]);
        match OutputColumns::split(&mut columns, 1, 2).stores() {
            Stores::Split(mut store) => fill(&mut store),
            Stores::Strided(_) => panic!("a split view's store is split"),
        }
        for c in 0..3 {
            let want = [0.0, (10 * c) as f32, (10 * c + 1) as f32, 0.0, 0.0];
            assert_eq!(y[5 * c..5 * c + 5], want, "strided column {c}");
            assert_eq!(storage[c], want, "split column {c}");
        }
    }

    #[test]
    fn a_whole_output_must_hold_every_column_exactly() {
        let mut y = [0.0f32; 12];
        assert!(OutputColumns::whole(&mut y, 4, 3).is_ok());
        assert!(OutputColumns::whole(&mut y, 4, 2).is_err());
        assert!(OutputColumns::whole(&mut y, 5, 3).is_err());
        assert!(OutputColumns::whole(&mut y, usize::MAX, 2).is_err());
        let mut view = OutputColumns::whole(&mut y, 3, 4).unwrap();
        *view.get_mut(3, 2).unwrap() = 1.0;
        assert!(view.get_mut(4, 0).is_none());
        assert_eq!(y[11], 1.0);
    }

    #[test]
    fn short_columns_are_not_held() {
        let mut storage = [[0.0f32; 6], [0.0; 6]];
        let (a, b) = storage.split_at_mut(1);
        let mut columns = [&mut a[0][..], &mut b[0][..5]];
        let view = OutputColumns::split(&mut columns, 2, 4);
        assert!(view.holds(1));
        assert!(!view.holds(2));
        // Columns at 0, 4 and 8: the third would end at 11.
        let mut y = [0.0f32; 10];
        assert_eq!(OutputColumns::strided(&mut y, 4, 3).columns_held(), 2);
        assert_eq!(OutputColumns::strided(&mut y, 4, 2).columns_held(), 3);
        assert_eq!(
            OutputColumns::strided(&mut y, 0, 3).columns_held(),
            usize::MAX
        );
        assert_eq!(OutputColumns::strided(&mut y, 4, 11).columns_held(), 0);
        assert_eq!(OutputColumns::strided(&mut y, 4, 3).rows_at(9, 1).rows(), 0);
    }
}
