//! Progress bars on stderr, drawn by indicatif only on a terminal.
//!
//! - [`Progress`]: for work that turns out long: nothing for the first second (most tensors take
//!   less), then a bar.
//! - [`byte_bar`]: `requantize`'s bar over the output's bytes, advanced from its worker threads.
//!
//! A bar draws from whichever thread advances it, taking the stderr lock for each frame: so no
//! thread may hold that lock for long (the binary passes `std::io::stderr()` itself, which locks
//! per write), or a worker drawing a frame would wait forever for a main thread waiting for it.
//!
//! `MINIQUANT_PROGRESS_DELAY_MS` sets the quiet period (default 1000; the pseudo-terminal tests
//! set 0 so that every bar draws).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Work shorter than this shows no bar, unless `MINIQUANT_PROGRESS_DELAY_MS` says otherwise.
const QUIET_FOR: Duration = Duration::from_secs(1);

fn quiet_period() -> Duration {
    std::env::var("MINIQUANT_PROGRESS_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(QUIET_FOR, Duration::from_millis)
}

/// Progress over `total` units (elements).
pub(super) struct Progress {
    started: Instant,
    quiet_for: Duration,
    total: u64,
    label: String,
    bar: Option<ProgressBar>,
}

impl Progress {
    pub(super) fn new(label: &str, total: u64) -> Self {
        Self {
            started: Instant::now(),
            quiet_for: quiet_period(),
            total,
            label: label.to_owned(),
            bar: None,
        }
    }

    /// `done` units are finished.
    pub(super) fn set(&mut self, done: u64) {
        if self.bar.is_none() && self.started.elapsed() >= self.quiet_for {
            let bar = ProgressBar::with_draw_target(Some(self.total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent:>3}%  {elapsed} elapsed, about {eta} left",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_message(self.label.clone());
            crate::signals::progress_bar_shown(true);
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// Removes the bar, so the summary line that follows stands alone.
    pub(super) fn finish(self) {}
}

/// The bar is removed however the work ends (an error line must not follow a bar on its line).
impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            crate::signals::progress_bar_shown(false);
        }
    }
}

/// A bar over bytes that any thread may advance, its length set as the work tells it; hidden
/// unless `show`.
pub(super) fn byte_bar(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg}")
    {
        bar.set_style(style);
    }
    bar
}
