//! `inferno tokenize` on a writer-made vocabulary: ids as text and JSON,
//! `--no-special`, `--file`, and one-line errors.
// Not under `loom`: a `--features loom` build of `inferno` refuses to run
// (its pool would use loom's atomics outside a model; `tests/cli_loom.rs`
// checks the refusal), so `cargo test --features loom` compiles these out.
#![cfg(all(feature = "cli", not(feature = "loom")))]

use std::path::PathBuf;
use std::process::{Command, Output};

use inferno_cpu::gguf::{Array, Writer};
use inferno_cpu::tokenizer::byte_level_text;

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, bytes: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("inferno-tok-{}-{tag}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Bytes 0..=255 as ids 0..=255; 256 = "he", 257 = "Ġw"; 258 =
/// `<|im_start|>` (control), 259 = `<think>` (user-defined).
fn model(pre: &str) -> Vec<u8> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_level_text(&[b])).collect();
    tokens.extend(["he", "Ġw", "<|im_start|>", "<think>"].map(String::from));
    let mut types = vec![1i32; 258];
    types.extend([3, 4]);
    let mut w = Writer::new();
    w.add_str("general.architecture", "qwen3")
        .unwrap()
        .add_str("tokenizer.ggml.model", "gpt2")
        .unwrap()
        .add_str("tokenizer.ggml.pre", pre)
        .unwrap()
        .add_array("tokenizer.ggml.tokens", Array::String(tokens))
        .unwrap()
        .add_array("tokenizer.ggml.token_type", Array::I32(types))
        .unwrap()
        .add_array(
            "tokenizer.ggml.merges",
            Array::String(vec!["h e".into(), "Ġ w".into()]),
        )
        .unwrap();
    w.to_bytes().unwrap()
}

fn tokenize(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferno"))
        .arg("tokenize")
        .args(args)
        .output()
        .unwrap()
}

fn ok_stdout(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn one_line_error(out: Output) -> String {
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("inferno tokenize: "), "{err}");
    err
}

#[test]
fn prints_ids_space_separated_and_as_json() {
    let m = TempFile::new("m.gguf", &model("qwen2"));
    // "<|im_start|>" "he" "y" " w" "e" "<think>"
    let text = "<|im_start|>hey we<think>";
    let out = ok_stdout(tokenize(&["--model", m.path(), text]));
    assert_eq!(out, "258 256 121 257 101 259\n");
    let out = ok_stdout(tokenize(&["--model", m.path(), "--json", text]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v, serde_json::json!([258, 256, 121, 257, 101, 259]));
    // --no-special: the control token is text ("<|", "im", "_start", "|>"),
    // the user-defined one is still matched.
    let out = ok_stdout(tokenize(&["--model", m.path(), "--no-special", text]));
    let ids: Vec<u32> = out.split_whitespace().map(|s| s.parse().unwrap()).collect();
    assert_eq!(&ids[..4], [60, 124, 105, 109]);
    assert!(!ids.contains(&258));
    assert_eq!(ids.last(), Some(&259));
    // Empty text: an empty line.
    assert_eq!(ok_stdout(tokenize(&["--model", m.path(), ""])), "\n");
}

#[test]
fn file_reads_the_exact_bytes() {
    let m = TempFile::new("f.gguf", &model("qwen2"));
    // A trailing newline and CRLF are kept.
    let f = TempFile::new("text.txt", b"he\r\n");
    let out = ok_stdout(tokenize(&["--model", m.path(), "--file", f.path()]));
    assert_eq!(out, "256 13 10\n");
    let bad = TempFile::new("bad.txt", b"he\xff");
    let err = one_line_error(tokenize(&["--model", m.path(), "--file", bad.path()]));
    assert!(
        err.contains("not UTF-8") && err.contains("offset 2"),
        "{err}"
    );
    let err = one_line_error(tokenize(&["--model", m.path(), "--file", "/nonexistent/x"]));
    assert!(err.contains("/nonexistent/x"), "{err}");
}

#[test]
fn bad_models_are_one_line_errors() {
    let m = TempFile::new("pre.gguf", &model("falcon"));
    let err = one_line_error(tokenize(&["--model", m.path(), "hi"]));
    assert!(err.contains("\"falcon\""), "{err}");
    let junk = TempFile::new("junk.gguf", b"not a gguf file at all");
    one_line_error(tokenize(&["--model", junk.path(), "hi"]));
    // TEXT and --file together, or neither: a usage error.
    let out = tokenize(&["--model", m.path()]);
    assert!(!out.status.success());
    let out = tokenize(&["--model", m.path(), "--file", m.path(), "x"]);
    assert!(!out.status.success());
}
