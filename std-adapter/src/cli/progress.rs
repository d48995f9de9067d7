//! Progress bars on stderr, drawn by indicatif only on a terminal.
//!
//! - [`Progress`]: for work that turns out long: nothing for the first second (most tensors take
//!   less), then a bar.
//! - [`byte_bar`]: `requantize`'s bar over the output's bytes, advanced from its worker threads.
//!
//! A bar draws from whichever thread advances it, taking the stderr lock for each write: so no
//! thread may hold that lock for long (the binary passes `std::io::stderr()` itself, which locks
//! per write), or a worker drawing a frame would wait forever for a main thread waiting for it.
//! Its writes pass through [`crate::signals::BarStderr`], so that Ctrl-C clears the bar and no
//! frame follows.
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
            let bar = ProgressBar::with_draw_target(Some(self.total), stderr_target());
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
    pub(super) fn finish(self) {}
}

/// The bar is removed however the work ends (an error line must not follow a bar on its line).
impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            clear(&bar);
        }
    }
}

/// A bar over bytes that any thread may advance, its length set as the work tells it; hidden
/// unless `show`.
pub(super) fn byte_bar(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, stderr_target());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// Removes a bar (a [`byte_bar`], or a [`Progress`]'s) from the screen.
pub(super) fn clear(bar: &ProgressBar) {
    bar.finish_and_clear();
    crate::signals::progress_bar_cleared();
}

/// Stderr at indicatif's default 20 frames a second (hidden unless it is a terminal), each frame
/// written at once through the signal handlers' gate.
fn stderr_target() -> ProgressDrawTarget {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressDrawTarget::hidden();
    }
    #[cfg(unix)]
    let target = ProgressDrawTarget::term_like_with_hz(Box::new(GatedTerminal::default()), 20);
    #[cfg(not(unix))]
    let target = ProgressDrawTarget::stderr();
    target
}

/// indicatif's terminal over [`crate::signals::BarStderr`]: a frame's pieces are gathered and
/// written by `flush`, as indicatif's own buffered stderr does, so a terminal never shows half a
/// frame.
#[cfg(unix)]
#[derive(Debug, Default)]
struct GatedTerminal {
    frame: std::sync::Mutex<Vec<u8>>,
}

#[cfg(unix)]
impl GatedTerminal {
    /// The frame being gathered (bytes only: a panic while it was held leaves nothing broken).
    fn frame(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.frame
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.frame().extend_from_slice(bytes);
        Ok(())
    }

    /// `ESC [ n <code>`, nothing for 0 (terminals read `ESC [ 0 A` as 1).
    fn move_cursor(&self, n: usize, code: char) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.push(format!("\x1b[{n}{code}").as_bytes())
    }
}

#[cfg(unix)]
impl indicatif::TermLike for GatedTerminal {
    fn width(&self) -> u16 {
        console::Term::stderr().size().1
    }

    fn height(&self) -> u16 {
        console::Term::stderr().size().0
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.move_cursor(n, 'A')
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.move_cursor(n, 'B')
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.move_cursor(n, 'C')
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.move_cursor(n, 'D')
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.push(s.as_bytes())?;
        self.push(b"\n")
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.push(s.as_bytes())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.push(b"\r\x1b[2K")
    }

    fn flush(&self) -> std::io::Result<()> {
        use std::io::Write;
        let frame = std::mem::take(&mut *self.frame());
        crate::signals::BarStderr.write_all(&frame)
    }
}
