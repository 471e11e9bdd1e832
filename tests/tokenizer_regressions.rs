//! Replays every file in `tests/tokenizer_regressions/` through the
//! tokenizer fuzz harness (`tests/support/tokenizer_harness.rs`, the same
//! code the `tokenizer` fuzz target runs): inputs that once failed it, and
//! seeds covering its paths. A file named `*.ok` must build a tokenizer,
//! `*.err` must be refused; either way every check of the harness must
//! hold. To add a finding, copy the fuzzer's artifact there under a
//! descriptive name with the expected outcome.

use std::path::PathBuf;

#[path = "support/tokenizer_harness.rs"]
mod harness;

#[test]
fn replay_tokenizer_regressions() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tokenizer_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("regression directory") {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        eprintln!("replaying {}", path.display());
        let built = harness::check(&bytes);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".ok") {
            assert!(built, "{name} must build a tokenizer");
        } else if name.ends_with(".err") {
            assert!(!built, "{name} must be refused");
        } else {
            panic!("{name}: name it *.ok or *.err");
        }
        n += 1;
    }
    assert!(n >= 3, "only {n} regression inputs in {}", dir.display());
}
