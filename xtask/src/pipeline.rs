//! Runs the steps of `ci` as a dependency graph, two at a time: each step is this program again
//! (`xtask ci-step NAME`) with its output kept in `target/ci-logs/NAME.log`, printed whole and in
//! the list's order, so the log reads as if the steps had run one after another. Two because the
//! CI machine has two cores and most steps have long single-threaded stretches (fuzzing, QEMU,
//! the Python oracles, linking): the other step fills the idle core.
//!
//! A failed step does not stop the others, only the steps after it (so one run reports every
//! failure); the run fails naming it. At the end: each step's wall and CPU seconds, and the total
//! of each.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One step of `ci`.
pub struct Step {
    pub name: &'static str,
    pub run: fn() -> Result<(), String>,
    /// Steps that must have passed before this one starts (the tools it installs, the binaries it
    /// builds); `~NAME`: a step that must only have ended, passed or not (one that locks a cargo
    /// target directory this one builds in).
    pub after: &'static [&'static str],
}

/// Steps running at once.
const AT_ONCE: usize = 2;

enum State {
    Waiting,
    Running {
        child: Child,
        started: Instant,
    },
    /// Wall and CPU seconds (CPU `None` where the OS does not say).
    Done {
        passed: bool,
        wall: f64,
        cpu: Option<f64>,
    },
    /// Not started because a step failed first.
    NotRun,
}

/// Runs `steps` (see the module docs).
pub fn run(steps: &[Step]) -> Result<(), String> {
    let logs = crate::root().join("target").join("ci-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find xtask itself: {e}"))?;
    let start = Instant::now();
    let mut states: Vec<State> = steps.iter().map(|_| State::Waiting).collect();
    let mut accounted_cpu = children_cpu_seconds();
    let mut printed = 0;
    loop {
        // Reap: the CPU time a child used is added to ours when it is waited for, and only this
        // loop waits, so the difference across one reap is that step's.
        for (i, step) in steps.iter().enumerate() {
            let State::Running { child, started } = &mut states[i] else {
                continue;
            };
            let status = match child.try_wait() {
                Ok(Some(status)) => status,
                Ok(None) => continue,
                Err(e) => return Err(format!("waiting for step {}: {e}", step.name)),
            };
            let wall = started.elapsed().as_secs_f64();
            let now_cpu = children_cpu_seconds();
            let cpu = now_cpu.zip(accounted_cpu).map(|(now, before)| now - before);
            accounted_cpu = now_cpu;
            eprintln!(
                "xtask: [{:>4.0} s] {} {} ({wall:.0} s wall, {} s cpu)",
                start.elapsed().as_secs_f64(),
                step.name,
                if status.success() { "passed" } else { "FAILED" },
                cpu.map_or("?".to_string(), |c| format!("{c:.0}"))
            );
            states[i] = State::Done {
                passed: status.success(),
                wall,
                cpu,
            };
        }
        // Start what is ready, in list order; a step after a failed one never starts.
        for (i, step) in steps.iter().enumerate() {
            let running = states
                .iter()
                .filter(|s| matches!(s, State::Running { .. }))
                .count();
            if running >= AT_ONCE {
                break;
            }
            if !matches!(states[i], State::Waiting) {
                continue;
            }
            let state_of = |name: &str| {
                steps
                    .iter()
                    .position(|s| s.name == name)
                    .map(|j| &states[j])
            };
            let blocked = step.after.iter().any(|name| match name.strip_prefix('~') {
                // Ended or never to run: either way it no longer holds anything.
                Some(_) => false,
                None => matches!(
                    state_of(name),
                    None | Some(State::NotRun | State::Done { passed: false, .. })
                ),
            });
            if blocked {
                states[i] = State::NotRun;
                continue;
            }
            let ready = step.after.iter().all(|name| match name.strip_prefix('~') {
                Some(name) => matches!(state_of(name), Some(State::Done { .. } | State::NotRun)),
                None => matches!(state_of(name), Some(State::Done { passed: true, .. })),
            });
            if ready {
                let child = spawn(&exe, step.name, &logs)?;
                eprintln!(
                    "xtask: [{:>4.0} s] {} started",
                    start.elapsed().as_secs_f64(),
                    step.name
                );
                states[i] = State::Running {
                    child,
                    started: Instant::now(),
                };
            }
        }
        // Print finished steps' logs, in list order.
        while printed < steps.len() && matches!(states[printed], State::Done { .. } | State::NotRun)
        {
            if matches!(states[printed], State::Done { .. }) {
                print_log(steps[printed].name, &logs)?;
            }
            printed += 1;
        }
        if printed == steps.len() {
            break;
        }
        // Nothing running: what still waits can never start.
        if !states.iter().any(|s| matches!(s, State::Running { .. })) {
            if !states.iter().any(|s| matches!(s, State::Waiting)) {
                break;
            }
            for state in &mut states {
                if matches!(state, State::Waiting) {
                    *state = State::NotRun;
                }
            }
            continue;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    summary(steps, &states, start.elapsed().as_secs_f64())
}

/// `xtask ci-step NAME`, its stdout and stderr into one file (in the order written).
fn spawn(exe: &Path, name: &str, logs: &Path) -> Result<Child, String> {
    let path = logs.join(format!("{name}.log"));
    let out = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Command::new(exe)
        .args(["ci-step", name])
        // The CLI the `build` step makes, for the steps that run it (new-user, firmware).
        .env("MINIQUANT", crate::ci_cli())
        // A fresh checkout's debug builds (clippy, docs, the no_std build) gain nothing from
        // incremental state, which costs time to write.
        .env("CARGO_INCREMENTAL", "0")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start step {name}: {e}"))
}

fn print_log(name: &str, logs: &Path) -> Result<(), String> {
    let path = logs.join(format!("{name}.log"));
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("xtask: ----- step {name} -----");
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    stderr
        .write_all(&text)
        .and_then(|()| stderr.flush())
        .map_err(|e| format!("printing {}: {e}", path.display()))
}

/// The times line (`.ci/run` repeats it last) and the verdict.
fn summary(steps: &[Step], states: &[State], total: f64) -> Result<(), String> {
    let mut each = Vec::new();
    let mut cpu_total = Some(0.0);
    let mut failed = Vec::new();
    let mut not_run = Vec::new();
    for (step, state) in steps.iter().zip(states) {
        match state {
            State::Done { passed, wall, cpu } => {
                let cpu_text = cpu.map_or("?".to_string(), |c| format!("{c:.0}"));
                each.push(format!("{} {wall:.0}/{cpu_text}", step.name));
                cpu_total = cpu_total.zip(*cpu).map(|(t, c)| t + c);
                if !passed {
                    failed.push(step.name);
                }
            }
            State::NotRun | State::Waiting | State::Running { .. } => not_run.push(step.name),
        }
    }
    eprintln!(
        "xtask: ci step times (s, wall/cpu, {AT_ONCE} steps at once): {}; total {total:.0} s wall ({:.1} min), {} s cpu",
        each.join(", "),
        total / 60.0,
        cpu_total.map_or("?".to_string(), |c| format!("{c:.0}")),
    );
    if failed.is_empty() && not_run.is_empty() {
        Ok(())
    } else if failed.is_empty() {
        Err(format!("steps not run: {}", not_run.join(", ")))
    } else {
        Err(format!(
            "failed: {}{}",
            failed.join(", "),
            if not_run.is_empty() {
                String::new()
            } else {
                format!(" (not run: {})", not_run.join(", "))
            }
        ))
    }
}

/// CPU seconds (user + system) of the children this process has waited for, from
/// `/proc/self/stat` (Linux; its clock ticks are USER_HZ, 100 on every Linux architecture).
pub fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces: field 3
    // (state) first, so cutime (16) and cstime (17) are at 13 and 14.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(13)? + ticks(14)?) as f64 / 100.0)
}
