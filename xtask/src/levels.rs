//! Which x86 kernel levels this machine's tests actually run. The level tests, the real-file
//! tests and the `kernels` fuzz target hold every level *the CPU has* to the scalar bits; a level
//! it lacks is compiled and linted but never executed, and nothing emulates AVX-512 here
//! (qemu-x86_64 7.2's TCG stops at AVX2). So a green run on an AVX2-only host (seen: a Zen 3
//! CI machine) says nothing about the AVX-512 VNNI kernels; `ci` prints that at its start and
//! end. The feature lists are `core`'s `level::detected` (kept dependency-free here).

/// One line naming the x86 levels run natively and those skipped (empty off x86_64).
pub fn report() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("f16c");
        let vnni =
            avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
        let vbmi = vnni && has!("avx512vbmi");
        let mut run = vec!["scalar"];
        let mut skipped = Vec::new();
        for (name, present) in [
            ("avx2", avx2),
            ("avx512vnni", vnni),
            ("avx512vnni+vbmi copies", vbmi),
        ] {
            if present {
                run.push(name);
            } else {
                skipped.push(name);
            }
        }
        let skipped = if skipped.is_empty() {
            "none".to_string()
        } else {
            format!(
                "{} (this CPU lacks them: not tested here)",
                skipped.join(", ")
            )
        };
        format!(
            "xtask: x86_64 kernel levels run natively: {}; skipped: {skipped}",
            run.join(", ")
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    String::new()
}

/// Prints [`report`] (on stderr, beside the commands' output) unless it is empty.
pub fn print() {
    let line = report();
    if !line.is_empty() {
        eprintln!("{line}");
    }
}
