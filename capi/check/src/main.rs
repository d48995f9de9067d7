//! `capi-check CAPI_TEST WORKDIR [MODEL...]`: runs the C test program `CAPI_TEST` (built from
//! `check/c/capi_test.c` against the static library, under ASan and UBSan) over hostile headers,
//! the fuzz corpus, truncations and real model files, and compares what the C API gave, line by
//! line, with what the Rust API (`miniquant`, linked here directly) gives for the same jobs.
//!
//! The hostile headers are written into `WORKDIR` with the tests' byte-level GGUF writer
//! (`tests/src/craft.rs`, shared by path), one per kind of attack the core's hostile-header tests
//! cover. Exits 1 on any difference or any failure of the C program.

#[allow(dead_code)]
#[path = "../../../tests/src/craft.rs"]
mod craft;
mod expect;
mod hostile;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One job of the C program's batch: a line of its job list.
pub enum Job {
    /// The byte-range parser over the first `len` bytes.
    Events { path: PathBuf, len: Option<usize> },
    /// The read-callback parser, a `buffer`-byte buffer, short reads.
    Read {
        path: PathBuf,
        len: Option<usize>,
        buffer: usize,
    },
    /// `mq_catalog` over the byte-range parser.
    Catalog { path: PathBuf },
    /// The kernels on the first 2-D tensor of each type.
    Kernels { path: PathBuf },
}

impl Job {
    fn line(&self) -> String {
        let len = |l: &Option<usize>| l.map_or("all".to_owned(), |l| l.to_string());
        match self {
            Job::Events { path, len: l } => format!("events {} {}", path.display(), len(l)),
            Job::Read {
                path,
                len: l,
                buffer,
            } => format!("read {} {} {buffer}", path.display(), len(l)),
            Job::Catalog { path } => format!("catalog {} all", path.display()),
            Job::Kernels { path } => format!("kernels {}", path.display()),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: capi-check CAPI_TEST WORKDIR [MODEL...]");
        std::process::exit(2);
    }
    let program = PathBuf::from(&args[1]);
    let work = PathBuf::from(&args[2]);
    let models: Vec<PathBuf> = args[3..].iter().map(PathBuf::from).collect();
    match run(&program, &work, &models) {
        Ok(summary) => println!("{summary}"),
        Err(e) => {
            eprintln!("capi-check: {e}");
            std::process::exit(1);
        }
    }
}

fn run(program: &Path, work: &Path, models: &[PathBuf]) -> Result<String, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let misuse = Command::new(program)
        .arg("misuse")
        .status()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !misuse.success() {
        return Err(format!("`capi_test misuse` failed ({misuse})"));
    }

    let mut jobs = Vec::new();
    let hostile = hostile::write_all(&work.join("hostile"))?;
    for (path, must_fail) in &hostile {
        jobs.push(Job::Events {
            path: path.clone(),
            len: None,
        });
        for buffer in [64, 256] {
            jobs.push(Job::Read {
                path: path.clone(),
                len: None,
                buffer,
            });
        }
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        let failed = expect::events(&bytes, None)
            .lines()
            .any(|l| l.starts_with("error "));
        if *must_fail && !failed {
            return Err(format!(
                "{}: the Rust API accepted a hostile file",
                path.display()
            ));
        }
    }
    let valid = work.join("hostile/valid.gguf");
    let valid_len = std::fs::metadata(&valid).map_err(|e| e.to_string())?.len() as usize;
    for len in 0..valid_len {
        jobs.push(Job::Events {
            path: valid.clone(),
            len: Some(len),
        });
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/header");
    let mut corpus_files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .map_err(|e| format!("{}: {e}", corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    corpus_files.sort();
    for path in &corpus_files {
        jobs.push(Job::Events {
            path: path.clone(),
            len: None,
        });
        jobs.push(Job::Read {
            path: path.clone(),
            len: None,
            buffer: 256,
        });
    }
    for model in models {
        jobs.push(Job::Events {
            path: model.clone(),
            len: None,
        });
        jobs.push(Job::Read {
            path: model.clone(),
            len: None,
            buffer: 256,
        });
        jobs.push(Job::Catalog {
            path: model.clone(),
        });
        jobs.push(Job::Kernels {
            path: model.clone(),
        });
        // Truncations: 8 cuts spread over the header, and the last bytes before the data (each
        // prints the events up to the cut: the whole-file jobs compare every event already).
        let header = expect::data_offset(model)? as usize;
        let mut cuts: Vec<usize> = (0..8).map(|i| i * header / 8).collect();
        cuts.extend(header.saturating_sub(3)..header);
        for len in cuts {
            jobs.push(Job::Events {
                path: model.clone(),
                len: Some(len),
            });
            jobs.push(Job::Read {
                path: model.clone(),
                len: Some(len),
                buffer: 256,
            });
        }
    }

    let list = work.join("jobs.txt");
    let text: String = jobs.iter().fold(String::new(), |mut s, j| {
        let _ = writeln!(s, "{}", j.line());
        s
    });
    std::fs::write(&list, text).map_err(|e| e.to_string())?;
    let out = Command::new(program)
        .arg("batch")
        .arg(&list)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    // Every job's section starts with a line `== JOB` (no event line starts with `=`).
    let stdout = format!("\n{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        return Err(format!(
            "`capi_test batch` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }

    // Sections of the C program's output, one per job, in order.
    let mut sections = stdout.split("\n== ").skip(1);
    let (mut passed, mut failed) = (0usize, 0usize);
    for job in &jobs {
        let Some(section) = sections.next() else {
            return Err(format!("the C program stopped before `{}`", job.line()));
        };
        let got = section.split_once('\n').map_or("", |(_, rest)| rest);
        let got = got.strip_suffix('\n').unwrap_or(got);
        let want = expect::job(job)?;
        let want = want.strip_suffix('\n').unwrap_or(&want);
        if got == want {
            passed += 1;
        } else {
            failed += 1;
            if failed <= 5 {
                let (n, g, w) = got
                    .lines()
                    .zip(want.lines())
                    .enumerate()
                    .find(|(_, (g, w))| g != w)
                    .map_or((0, "<length differs>", ""), |(n, (g, w))| (n, g, w));
                eprintln!(
                    "capi-check: `{}` differs at line {}:\n  C API:    {g}\n  Rust API: {w}\n  ({} vs {} lines)",
                    job.line(),
                    n + 1,
                    got.lines().count(),
                    want.lines().count()
                );
            }
        }
    }
    let summary = format!(
        "capi-check: {} hostile files, {} corpus files, {} models: {passed} passed, {failed} failed",
        hostile.len(),
        corpus_files.len(),
        models.len()
    );
    if failed > 0 {
        Err(summary)
    } else {
        Ok(summary)
    }
}
