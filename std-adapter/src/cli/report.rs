//! The `error:` and `warning:` lines of a broken file, with the context a user needs to act: a
//! file cut short is one line (how much is there, how much is needed, the first tensor cut), and
//! an error inside a metadata pair names its key.

use miniquant::Error;

use crate::diagnose::{truncation, KeyRanges};
use crate::file::GgufFile;
use crate::validate::Report;

/// Every line for `file`'s report: errors in offset order, then warnings.
pub(super) fn problem_lines(file: &GgufFile) -> Vec<String> {
    report_lines(file.report(), Some(file))
}

/// The lines of `report`; `file`, when given, supplies the context.
pub(super) fn report_lines(report: &Report, file: Option<&GgufFile>) -> Vec<String> {
    let cut = file.and_then(|f| truncation(f.index()));
    let last_offset = report.errors.iter().filter_map(Error::offset).max();
    let keys = match (file, last_offset) {
        (Some(f), Some(up_to)) => KeyRanges::scan(f.bytes(), up_to),
        _ => KeyRanges::default(),
    };
    let mut summarized = false;
    let mut lines = Vec::new();
    for e in &report.errors {
        if let (Error::TensorOutOfBounds { .. }, Some(t)) = (e, &cut) {
            // One summary line, where the first of these errors was.
            if !summarized {
                lines.push(format!("error: {t}"));
                summarized = true;
            }
            continue;
        }
        match e.offset().and_then(|o| keys.key_at(o)) {
            Some(key) => lines.push(format!("error: key {key:?}: {e}")),
            None => lines.push(format!("error: {e}")),
        }
    }
    lines.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
    lines
}
