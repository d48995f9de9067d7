//! What happens when the process is stopped by a signal: nothing half-written stays behind, and an
//! input that shrinks under its memory map is a clear error, not a crash.
//!
//! [`install`] (the `miniquant` binary calls it first thing) sets handlers for:
//! - SIGINT and SIGTERM: remove the named temporaries of outputs being written (`TempName`),
//!   clear a progress bar's line on a terminal (see `BarStderr`), then die of the same signal
//!   (a shell sees 130 or 143, and a script loop stops as it should).
//! - SIGBUS: a fault inside an input's memory map (`WatchedMap`) means the file shrank while
//!   being read (another process truncated or rewrote it); the handler removes the temporaries,
//!   prints `error: input changed while reading "PATH"` and exits with 1. A SIGBUS anywhere else
//!   gets the default action.
//!
//! The handlers may only do async-signal-safe work, so the registrations are fixed tables of atomic
//! pointers to leaked, immutable records (a record is never freed, so a handler running on one
//! thread never reads memory another thread frees). Nothing is registered until [`install`] has
//! run, so a library user who does not call it leaks nothing. `signal-hook` is not used: it refuses
//! SIGBUS, and the three handlers are a few `libc` calls.

use std::path::Path;

/// Sets the handlers (see the module docs). Idempotent; without effect outside Unix.
pub fn install() {
    #[cfg(unix)]
    unix::install();
}

/// Stderr for progress bars: what they draw through it, the SIGINT/SIGTERM/SIGBUS handlers can
/// clear and stop.
///
/// A bar draws from whichever thread advances it (`requantize`'s workers), while the handler runs
/// on any thread. So each write holds a gate: the handler first closes it (later writes are
/// dropped), waits for a write in flight on another thread, and only then clears the line, which
/// no frame can follow. A write marks the bar as shown until [`progress_bar_cleared`]: the
/// handler clears the line only then, since a line of streamed text must stay.
#[cfg(all(unix, feature = "cli"))]
#[derive(Debug)]
pub(crate) struct BarStderr;

#[cfg(all(unix, feature = "cli"))]
impl std::io::Write for BarStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        unix::write_bar(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The bar drawn through [`BarStderr`] has cleared its line itself (it finished): a signal from
/// now on clears nothing.
#[cfg(feature = "cli")]
pub(crate) fn progress_bar_cleared() {
    #[cfg(unix)]
    unix::BAR_SHOWN.store(false, std::sync::atomic::Ordering::SeqCst);
}

/// A named temporary file, removed by the SIGINT/SIGTERM/SIGBUS handlers while this guard lives.
/// Register it before creating the file and drop the guard once the file has its final name (or
/// was removed), so no moment leaves it unwatched.
#[derive(Debug)]
pub(crate) struct TempName {
    #[cfg(unix)]
    slot: Option<usize>,
}

impl TempName {
    pub(crate) fn watch(path: &Path) -> Self {
        let _ = path;
        Self {
            #[cfg(unix)]
            slot: unix::watch_temp(path),
        }
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(slot) = self.slot {
            unix::forget_temp(slot);
        }
    }
}

/// A memory map of the input `path`: a SIGBUS inside it is reported as the input having changed.
/// Drop the guard before unmapping.
#[derive(Debug)]
pub(crate) struct WatchedMap {
    #[cfg(unix)]
    slot: Option<usize>,
}

impl WatchedMap {
    pub(crate) fn watch(bytes: &[u8], path: &Path) -> Self {
        let _ = (bytes, path);
        Self {
            #[cfg(unix)]
            slot: unix::watch_map(bytes, path),
        }
    }
}

impl Drop for WatchedMap {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(slot) = self.slot {
            unix::forget_map(slot);
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::ffi::{c_int, c_void, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

    /// Outputs written at once (one per command; the rest is headroom).
    const TEMP_SLOTS: usize = 8;
    /// Inputs mapped at once.
    const MAP_SLOTS: usize = 8;

    static INSTALLED: AtomicBool = AtomicBool::new(false);
    /// Whether stderr is a terminal: then the error line first clears a progress bar's line.
    static STDERR_IS_TERMINAL: AtomicBool = AtomicBool::new(false);
    /// Whether a progress bar has drawn on stderr and not cleared its line (see
    /// [`super::BarStderr`]).
    pub(super) static BAR_SHOWN: AtomicBool = AtomicBool::new(false);
    /// The thread writing a bar's bytes ([`thread_token`]), 0 if none.
    static BAR_WRITER: AtomicUsize = AtomicUsize::new(0);
    /// Set by a handler: bar writes from now on are dropped.
    static BAR_STOPPED: AtomicBool = AtomicBool::new(false);
    /// Set by the first thread that reports a fault in an input map, so the message comes once.
    static REPORTING: AtomicBool = AtomicBool::new(false);
    static TEMPS: [AtomicPtr<Temp>; TEMP_SLOTS] =
        [const { AtomicPtr::new(null_mut()) }; TEMP_SLOTS];
    static MAPS: [AtomicPtr<Map>; MAP_SLOTS] = [const { AtomicPtr::new(null_mut()) }; MAP_SLOTS];

    struct Temp {
        path: CString,
    }

    struct Map {
        start: usize,
        end: usize,
        /// The whole `error: ...` line.
        message: Box<[u8]>,
    }

    pub(super) fn install() {
        if INSTALLED.swap(true, Ordering::SeqCst) {
            return;
        }
        use std::io::IsTerminal;
        STDERR_IS_TERMINAL.store(std::io::stderr().is_terminal(), Ordering::SeqCst);
        set_handler(libc::SIGINT, on_stop);
        set_handler(libc::SIGTERM, on_stop);
        set_handler(libc::SIGBUS, on_bus);
    }

    type Handler = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

    fn set_handler(signal: c_int, handler: Handler) {
        // SAFETY: `sigaction` is zeroed (a valid bit pattern for the C struct) then filled in;
        // `handler` is an `extern "C" fn(c_int, *mut siginfo_t, *mut c_void)` as SA_SIGINFO
        // requires, and only calls async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, null_mut());
        }
    }

    /// Puts a leaked record into a free slot; `None` if handlers are not installed or all slots are
    /// taken (then the record is not leaked).
    fn publish<T>(slots: &[AtomicPtr<T>], record: T) -> Option<usize> {
        if !INSTALLED.load(Ordering::SeqCst) {
            return None;
        }
        let record = Box::into_raw(Box::new(record));
        for (i, slot) in slots.iter().enumerate() {
            if slot
                .compare_exchange(null_mut(), record, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Some(i);
            }
        }
        // SAFETY: `record` came from `Box::into_raw` above and was never published.
        drop(unsafe { Box::from_raw(record) });
        None
    }

    pub(super) fn watch_temp(path: &Path) -> Option<usize> {
        let path = CString::new(path.as_os_str().as_bytes()).ok()?;
        publish(&TEMPS, Temp { path })
    }

    pub(super) fn forget_temp(slot: usize) {
        // The record stays allocated: a handler on another thread may be reading it.
        TEMPS[slot].store(null_mut(), Ordering::SeqCst);
    }

    pub(super) fn watch_map(bytes: &[u8], path: &Path) -> Option<usize> {
        let start = bytes.as_ptr() as usize;
        let message = format!(
            "error: input changed while reading {:?}: it shrank or was rewritten while mapped \
             (MINIQUANT_NO_MMAP=1 or --no-mmap reads it into memory instead)\n",
            path.display().to_string()
        );
        let map = Map {
            start,
            end: start + bytes.len(),
            message: message.into_bytes().into_boxed_slice(),
        };
        publish(&MAPS, map)
    }

    pub(super) fn forget_map(slot: usize) {
        MAPS[slot].store(null_mut(), Ordering::SeqCst);
    }

    thread_local! {
        /// Its address names the thread. Constant and without a destructor, so reading it is a
        /// plain thread-local load, safe in a signal handler.
        static THREAD_MARK: u8 = const { 0 };
    }

    /// A nonzero number distinct for every live thread.
    fn thread_token() -> usize {
        THREAD_MARK.with(|mark| mark as *const u8 as usize)
    }

    /// Writes a bar's bytes to stderr, unless a handler has stopped the bars (then they are
    /// dropped, reported as written).
    #[cfg(feature = "cli")]
    pub(super) fn write_bar(bytes: &[u8]) -> std::io::Result<usize> {
        use std::io::Write;
        let me = thread_token();
        while BAR_WRITER
            .compare_exchange_weak(0, me, Ordering::SeqCst, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        let written = if BAR_STOPPED.load(Ordering::SeqCst) {
            Ok(bytes.len())
        } else {
            BAR_SHOWN.store(true, Ordering::SeqCst);
            std::io::stderr().write(bytes)
        };
        BAR_WRITER.store(0, Ordering::SeqCst);
        written
    }

    /// Stops the bars and, where one is shown on a terminal, clears its line; no frame can follow.
    /// Async-signal-safe: atomics, a thread-local load and `write`.
    fn stop_bars() {
        BAR_STOPPED.store(true, Ordering::SeqCst);
        // A write in flight on another thread ends by itself. One on this thread was
        // interrupted by this handler: its bytes are already out or never will be.
        let me = thread_token();
        loop {
            let writer = BAR_WRITER.load(Ordering::SeqCst);
            if writer == 0 || writer == me {
                break;
            }
            std::hint::spin_loop();
        }
        if BAR_SHOWN.load(Ordering::SeqCst) && STDERR_IS_TERMINAL.load(Ordering::SeqCst) {
            // Back to the line's start and clear it.
            write_stderr(b"\r\x1b[2K");
        }
    }

    /// Unlinks every registered temporary. Async-signal-safe: atomic loads and `unlink`.
    fn remove_temps() {
        for slot in &TEMPS {
            let temp = slot.load(Ordering::SeqCst);
            if !temp.is_null() {
                // SAFETY: published records are never freed (see `forget_temp`); `path` is a
                // NUL-terminated C string.
                unsafe { libc::unlink((*temp).path.as_ptr()) };
            }
        }
    }

    /// Writes all of `bytes` to stderr with `write` (async-signal-safe).
    fn write_stderr(bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            // SAFETY: `rest` is a valid buffer of `rest.len()` bytes.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            if n <= 0 {
                return;
            }
            rest = &rest[n as usize..];
        }
    }

    extern "C" fn on_stop(signal: c_int, _info: *mut libc::siginfo_t, _context: *mut c_void) {
        remove_temps();
        stop_bars();
        // SAFETY: `signal` and `raise` are async-signal-safe. The signal is blocked while this
        // handler runs, so the raised one is delivered, with the default action (death by that
        // signal), as the handler returns.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    extern "C" fn on_bus(signal: c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
        // SAFETY: with SA_SIGINFO the kernel passes a valid `siginfo_t`; for SIGBUS `si_addr`
        // is the faulting address.
        let address = unsafe { (*info).si_addr() } as usize;
        for slot in &MAPS {
            let map = slot.load(Ordering::SeqCst);
            if map.is_null() {
                continue;
            }
            // SAFETY: published records are never freed (see `forget_map`).
            let map = unsafe { &*map };
            if (map.start..map.end).contains(&address) {
                if REPORTING.swap(true, Ordering::SeqCst) {
                    // Another thread faulted too and is reporting: wait for its `_exit`.
                    loop {
                        // SAFETY: `pause` is async-signal-safe.
                        unsafe { libc::pause() };
                    }
                }
                remove_temps();
                stop_bars();
                write_stderr(&map.message);
                // SAFETY: `_exit` is async-signal-safe and ends the process at once.
                unsafe { libc::_exit(1) };
            }
        }
        // Not a fault in an input map: the default action, once this handler returns and the
        // instruction faults again (or at once for a SIGBUS sent with `kill`).
        // SAFETY: as in `on_stop`.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
}
