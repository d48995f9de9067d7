//! Running statistics over f32 values (count, min, max, mean, NaN count), printed by the commands
//! that write raw f32 data.

use std::fmt;

/// Statistics of the values seen so far. NaNs are counted and otherwise left out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Values seen, NaNs included.
    pub count: u64,
    /// NaNs seen.
    pub nans: u64,
    /// Smallest value that is not NaN (`+inf` while there is none).
    pub min: f32,
    /// Largest value that is not NaN (`-inf` while there is none).
    pub max: f32,
    sum: f64,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            count: 0,
            nans: 0,
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
            sum: 0.0,
        }
    }
}

impl Stats {
    /// Adds `values`.
    pub fn add(&mut self, values: &[f32]) {
        for &v in values {
            self.count += 1;
            if v.is_nan() {
                self.nans += 1;
            } else {
                self.min = self.min.min(v);
                self.max = self.max.max(v);
                self.sum += f64::from(v);
            }
        }
    }

    /// Mean of the values that are not NaN, if there are any.
    pub fn mean(&self) -> Option<f64> {
        let n = self.count - self.nans;
        (n > 0).then(|| self.sum / n as f64)
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} elements", self.count)?;
        if let Some(mean) = self.mean() {
            write!(f, "  min {}  max {}  mean {mean}", self.min, self.max)?;
        }
        write!(f, "  NaN {}", self.nans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nans_are_counted_not_averaged() {
        let mut s = Stats::default();
        s.add(&[1.0, f32::NAN, -3.0]);
        s.add(&[4.0]);
        assert_eq!((s.count, s.nans, s.min, s.max), (4, 1, -3.0, 4.0));
        assert_eq!(s.mean(), Some(2.0 / 3.0));
        assert_eq!(
            s.to_string(),
            format!("4 elements  min -3  max 4  mean {}  NaN 1", 2.0f64 / 3.0)
        );
        assert_eq!(Stats::default().to_string(), "0 elements  NaN 0");
    }
}
