//! An output file that gets its name only when complete, for every command that writes a file
//! (`requantize`, `extract`): a failure, or a kill at any point, never leaves a half-written file
//! under the output's name, and on Linux leaves no file at all.
//!
//! - Linux: the data goes to an unnamed `O_TMPFILE` file in the output's directory (the kernel
//!   frees it if the process dies); [`OutputFile::persist`] links it in with `linkat` of
//!   `/proc/self/fd/N` (`AT_SYMLINK_FOLLOW`): directly as OUT when OUT does not exist, else under a
//!   temporary name then renamed over OUT (rename replaces atomically, link does not).
//! - Elsewhere, or when the file system refuses `O_TMPFILE` (EOPNOTSUPP, EISDIR on old kernels,
//!   ...) or `/proc` is not mounted: a hidden `.OUT.<pid>.partial` beside OUT, renamed over OUT when
//!   complete and removed on failure, and by the SIGINT/SIGTERM handlers of [`crate::signals`]
//!   when those are installed (the `miniquant` binary does). Only SIGKILL can leave it behind.
//!   `MINIQUANT_NO_TMPFILE=1` takes this path on Linux too (the tests of that path use it).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::signals::TempName;

/// A file being written for `target` (see the module docs).
#[derive(Debug)]
pub struct OutputFile {
    file: File,
    target: PathBuf,
    /// The temporary name the data has now, or `None` for an unnamed (`O_TMPFILE`) file.
    temp: Option<PathBuf>,
    /// Keeps `temp` on the signal handlers' list until it is renamed or removed.
    temp_watch: Option<TempName>,
    persisted: bool,
}

impl OutputFile {
    /// Starts a file that will become `target` on [`persist`](Self::persist).
    pub fn create(target: &Path) -> io::Result<Self> {
        if target.file_name().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the output path does not name a file",
            ));
        }
        // A symlink is written through, as a shell's `>` would: the file it points to is replaced
        // and the link stays (a dangling link is replaced by the file).
        let resolved = match std::fs::symlink_metadata(target) {
            Ok(m) if m.is_symlink() => std::fs::canonicalize(target).ok(),
            _ => None,
        };
        let target = resolved.as_deref().unwrap_or(target);
        if target.is_dir() {
            // Found now rather than when renaming the finished file over it.
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        #[cfg(target_os = "linux")]
        if std::env::var_os("MINIQUANT_NO_TMPFILE").is_none_or(|v| v != "1") {
            if let Some(file) = linux::unnamed_in(&directory_of(target))? {
                return Ok(Self {
                    file,
                    target: target.to_owned(),
                    temp: None,
                    temp_watch: None,
                    persisted: false,
                });
            }
        }
        let temp = hidden_sibling(target, "partial");
        // Watched before it exists, so no moment leaves it for a signal to orphan.
        let temp_watch = TempName::watch(&temp);
        let file = File::create(&temp)?;
        Ok(Self {
            file,
            target: target.to_owned(),
            temp: Some(temp),
            temp_watch: Some(temp_watch),
            persisted: false,
        })
    }

    /// Whether the data has no name in the file system until [`persist`](Self::persist).
    pub fn is_unnamed(&self) -> bool {
        self.temp.is_none()
    }

    /// The open file, to write the content through.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Gives the complete file its name, replacing any file called `target`.
    pub fn persist(mut self) -> io::Result<()> {
        self.file.flush()?;
        match &self.temp {
            Some(temp) => {
                std::fs::rename(temp, &self.target)?;
                self.temp_watch = None;
            }
            #[cfg(target_os = "linux")]
            None => linux::link_unnamed(&self.file, &self.target)?,
            #[cfg(not(target_os = "linux"))]
            None => unreachable!("unnamed files are only made on Linux"),
        }
        self.persisted = true;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for OutputFile {
    /// An unpersisted named temporary is removed (an unnamed one vanishes with its descriptor).
    fn drop(&mut self) {
        if let (false, Some(temp)) = (self.persisted, &self.temp) {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// `.<name>.<pid>.<suffix>` beside `path` (the pid keeps concurrent runs apart).
fn hidden_sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or("out".as_ref()));
    name.push(format!(".{}.{suffix}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    use rustix::fs::{linkat, openat, AtFlags, Mode, OFlags, CWD};
    use rustix::io::Errno;

    /// An unnamed file in `dir`, or `None` where `O_TMPFILE` is not available (the caller falls
    /// back to a named temporary). Other errors (no such directory, no permission) are returned.
    pub(super) fn unnamed_in(dir: &Path) -> io::Result<Option<File>> {
        // `persist` names the file through /proc; without /proc it could never be named.
        if !Path::new("/proc/self/fd").is_dir() {
            return Ok(None);
        }
        let mode = Mode::from_raw_mode(0o666);
        match openat(
            CWD,
            dir,
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            mode,
        ) {
            Ok(fd) => Ok(Some(File::from(fd))),
            // File systems without O_TMPFILE answer EOPNOTSUPP; kernels before 3.11 EISDIR (they
            // take the flag as O_DIRECTORY); some report EINVAL.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Links the unnamed `file` in as `target`, replacing a file of that name.
    pub(super) fn link_unnamed(file: &File, target: &Path) -> io::Result<()> {
        let source = format!("/proc/self/fd/{}", file.as_raw_fd());
        let link = |to: &Path| linkat(CWD, source.as_str(), CWD, to, AtFlags::SYMLINK_FOLLOW);
        match link(target) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => {
                let temp = super::hidden_sibling(target, "new");
                let _watch = crate::signals::TempName::watch(&temp);
                let _ = std::fs::remove_file(&temp);
                link(&temp)?;
                std::fs::rename(&temp, target).inspect_err(|_| {
                    let _ = std::fs::remove_file(&temp);
                })
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name` inside a fresh directory that is removed with the returned guard.
    fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("miniquant-output-file-")
            .tempdir()
            .unwrap();
        let path = dir.path().join(name);
        (dir, path)
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_file_appears_only_when_persisted_and_replaces_an_old_one() {
        let (_dir, target) = scratch("replace/out.bin");
        let dir = target.parent().unwrap().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&target, b"old").unwrap();
        let mut out = OutputFile::create(&target).unwrap();
        out.write_all(b"new content").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        out.persist().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new content");
        assert_eq!(names_in(&dir), ["out.bin"]);
    }

    #[test]
    fn a_new_file_gets_its_name_and_nothing_else_remains() {
        let (_dir, target) = scratch("fresh/out.bin");
        let dir = target.parent().unwrap().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let _ = std::fs::remove_file(&target);
        let mut out = OutputFile::create(&target).unwrap();
        out.write_all(b"abc").unwrap();
        out.persist().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"abc");
        assert_eq!(names_in(&dir), ["out.bin"]);
    }

    #[test]
    fn a_dropped_file_leaves_nothing() {
        let (_dir, target) = scratch("dropped/out.bin");
        let dir = target.parent().unwrap().to_owned();
        std::fs::create_dir_all(&dir).unwrap();
        let mut out = OutputFile::create(&target).unwrap();
        out.write_all(b"abc").unwrap();
        drop(out);
        assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let (_dir, target) = scratch("no/such/dir/out.bin");
        assert!(OutputFile::create(&target).is_err());
    }
}
