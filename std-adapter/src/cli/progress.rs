//! A progress bar on stderr for work that turns out long: nothing for the first second (most
//! tensors take less), then an indicatif bar, which draws only on a terminal.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Work shorter than this shows no bar.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Progress over `total` units (elements).
pub(super) struct Progress {
    started: Instant,
    total: u64,
    label: String,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(super) fn new(label: &str, total: u64) -> Self {
        Self {
            started: Instant::now(),
            total,
            label: label.to_owned(),
            bar: None,
        }
    }

    /// `done` units are finished.
    pub(super) fn set(&mut self, done: u64) {
        if self.bar.is_none() && self.started.elapsed() >= QUIET_FOR {
            let bar = ProgressBar::with_draw_target(Some(self.total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent:>3}%  {elapsed} elapsed, about {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_message(self.label.clone());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// Removes the bar, so the summary line that follows stands alone.
    pub(super) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
