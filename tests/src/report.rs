//! A per-type results table for tests that sweep every ggml type: each type gets a row (passed,
//! failed or skipped with a reason), the whole table is printed, and the test then fails naming
//! every failing type, so one run shows the state of all types instead of stopping at the first.

use miniquant::GgmlType;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

#[derive(Debug, Clone)]
struct Row {
    label: String,
    outcome: Outcome,
    summary: String,
    detail: Option<String>,
}

/// Rows collected by a sweep; [`Report::finish`] prints them and fails on any failure.
#[derive(Debug)]
pub struct Report {
    title: String,
    rows: Vec<Row>,
}

impl Report {
    /// An empty report under `title`.
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            rows: Vec::new(),
        }
    }

    /// Records a compared type: `passed` decides the outcome; `detail` (the first difference)
    /// is printed for failures.
    pub fn check(
        &mut self,
        t: GgmlType,
        passed: bool,
        summary: impl Into<String>,
        detail: Option<String>,
    ) {
        self.check_labelled(t.name(), passed, summary, detail);
    }

    /// Like [`check`](Self::check) with a free-form label (a file and tensor, say).
    pub fn check_labelled(
        &mut self,
        label: impl Into<String>,
        passed: bool,
        summary: impl Into<String>,
        detail: Option<String>,
    ) {
        let outcome = if passed { Outcome::Pass } else { Outcome::Fail };
        self.rows.push(Row {
            label: label.into(),
            outcome,
            summary: summary.into(),
            detail,
        });
    }

    /// Records a failure that has no comparison behind it (our kernel returned an error).
    pub fn fail(&mut self, t: GgmlType, summary: impl Into<String>) {
        self.check(t, false, summary, None);
    }

    /// Records a type that was not compared, and why.
    pub fn skip(&mut self, t: GgmlType, reason: impl Into<String>) {
        self.skip_labelled(t.name(), reason);
    }

    /// Like [`skip`](Self::skip) with a free-form label.
    pub fn skip_labelled(&mut self, label: impl Into<String>, reason: impl Into<String>) {
        self.rows.push(Row {
            label: label.into(),
            outcome: Outcome::Skip,
            summary: reason.into(),
            detail: None,
        });
    }

    /// Number of rows that compared and passed.
    pub fn passed(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.outcome == Outcome::Pass)
            .count()
    }

    /// Prints the table, then panics listing the failing rows if there are any.
    pub fn finish(self) {
        let width = self.rows.iter().map(|r| r.label.len()).max().unwrap_or(0);
        println!("\n== {} ==", self.title);
        for row in &self.rows {
            let tag = match row.outcome {
                Outcome::Pass => "ok  ",
                Outcome::Fail => "FAIL",
                Outcome::Skip => "skip",
            };
            println!("{tag} {:width$}  {}", row.label, row.summary);
            if let (Outcome::Fail, Some(detail)) = (row.outcome, &row.detail) {
                println!("     {:width$}  {detail}", "");
            }
        }
        assert!(
            self.rows.iter().any(|r| r.outcome != Outcome::Skip),
            "{}: nothing was compared",
            self.title
        );
        let failures: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.outcome == Outcome::Fail)
            .map(|r| match &r.detail {
                Some(detail) => format!("{}: {}; {detail}", r.label, r.summary),
                None => format!("{}: {}", r.label, r.summary),
            })
            .collect();
        println!(
            "{} passed, {} failed, {} skipped",
            self.passed(),
            failures.len(),
            self.rows
                .iter()
                .filter(|r| r.outcome == Outcome::Skip)
                .count()
        );
        assert!(
            failures.is_empty(),
            "{}: {} failing:\n  {}",
            self.title,
            failures.len(),
            failures.join("\n  ")
        );
    }
}
