//! `inferno synth`: writes the library's bytes to `--out` or the cache,
//! reuses a cached file, and fails with one line and status 1.
// Not under `loom`: a `--features loom` build of `inferno` refuses to run
// (its pool would use loom's atomics outside a model; `tests/cli_loom.rs`
// checks the refusal), so `cargo test --features loom` compiles these out.
#![cfg(all(feature = "cli", not(feature = "loom")))]

use std::path::PathBuf;
use std::process::{Command, Output};

use inferno_cpu::synth::{model_bytes, model_file_name, FileType, SynthConfig};

/// A directory in the temp directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("inferno-cli-synth-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn synth(args: &[&str], cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferno"))
        .arg("synth")
        .args(args)
        .env("INFERNO_CACHE", cache)
        .output()
        .unwrap()
}

#[test]
fn writes_the_library_bytes_to_out() {
    let dir = TempDir::new("out");
    let out = dir.0.join("m.gguf");
    let o = synth(
        &[
            "--config",
            "tiny",
            "--seed",
            "4",
            "--out",
            out.to_str().unwrap(),
        ],
        &dir.0.join("cache"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        out.to_str().unwrap()
    );
    let expected = model_bytes(&SynthConfig::tiny(), 4).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), expected);
    assert!(
        !dir.0.join("cache").exists(),
        "--out does not touch the cache"
    );
}

#[test]
fn default_out_is_the_cache_and_is_reused() {
    let dir = TempDir::new("cache");
    let o = synth(&["--config", "tiny"], &dir.0);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let path = dir.0.join(model_file_name("tiny", FileType::Q8_0, 0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        path.to_str().unwrap()
    );
    let written = std::fs::metadata(&path).unwrap().modified().unwrap();
    let o = synth(&["--config", "tiny"], &dir.0);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("reused"));
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        written
    );
}

#[test]
fn unwritable_out_fails_with_one_line() {
    let dir = TempDir::new("fail");
    let out = dir.0.join("missing").join("m.gguf");
    let o = synth(
        &["--config", "tiny", "--out", out.to_str().unwrap()],
        &dir.0,
    );
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("inferno synth: "), "{stderr}");
    assert!(o.stdout.is_empty());
}
