//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) and any saved findings
//! (`fuzz/artifacts/<target>/`) through the same checks the fuzz targets run, on stable, so every
//! input the fuzzer kept stays a regression test.

use std::path::Path;

use miniquant_fuzz_checks::TARGETS;

#[test]
fn the_fuzz_corpus_passes_every_check() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut replayed = 0;
    for (target, check) in TARGETS {
        let mut inputs = 0;
        for dir in ["corpus", "artifacts"] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
                continue;
            };
            let mut paths: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
            paths.sort();
            for path in paths {
                let data = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| check(&data));
                assert!(
                    outcome.is_ok(),
                    "{target}: {} fails its check",
                    path.display()
                );
                inputs += 1;
            }
        }
        assert!(inputs > 0, "no corpus for the {target} target");
        replayed += inputs;
    }
    println!("{replayed} inputs replayed");
}
