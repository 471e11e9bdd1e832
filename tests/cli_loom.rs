//! Under `--features loom` the `inferno` binary is built with loom's
//! atomics, which work only inside a loom model: it must refuse to run,
//! with a message that says why, instead of panicking inside the pool.
#![cfg(all(feature = "cli", feature = "loom"))]

use std::process::Command;

#[test]
fn loom_build_refuses_to_run() {
    for args in [
        &["bench", "--skip-decode"][..],
        &[][..],
        &["inspect", "--model", "x.gguf"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_inferno"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("`loom` feature"), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
