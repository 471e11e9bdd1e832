//! `inferno inspect` on a writer-made file, in text and JSON, and on corrupt
//! files. (A `loom` build of the binary refuses to run: `tests/cli_loom.rs`.)
#![cfg(all(feature = "cli", not(feature = "loom")))]

use std::path::PathBuf;
use std::process::{Command, Output};

use inferno_cpu::gguf::{Array, Writer};
use inferno_cpu::BlockQ8_0;

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(tag: &str, bytes: &[u8]) -> Self {
        let path =
            std::env::temp_dir().join(format!("inferno-cli-{}-{tag}.gguf", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn model() -> Vec<u8> {
    let blocks = vec![BlockQ8_0::default(); 4];
    let norm = [1.0f32; 64];
    let tokens: Vec<String> = (0..100).map(|i| format!("tok{i}")).collect();
    let mut w = Writer::new();
    w.add_str("general.architecture", "qwen3")
        .unwrap()
        .add_u32("qwen3.block_count", 2)
        .unwrap()
        .add_f32("qwen3.rope.freq_base", 1.0e6)
        .unwrap()
        .add_array("tokenizer.ggml.tokens", Array::String(tokens))
        .unwrap()
        .add_tensor_q8_0("token_embd.weight", &[64, 2], &blocks)
        .unwrap()
        .add_tensor_f32("output_norm.weight", &[64], &norm)
        .unwrap();
    w.to_bytes().unwrap()
}

/// `inferno inspect --model FILE ARGS...`.
fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferno"))
        .args(["inspect", "--model"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn text_output_lists_header_metadata_and_tensors() {
    let file = TempFile::new("text", &model());
    let out = inspect(&[file.0.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("version:     3"), "{text}");
    assert!(text.contains("alignment:   32"), "{text}");
    assert!(text.contains("qwen3.block_count"), "{text}");
    assert!(
        text.contains("tensors (2, 392 bytes: 1 q8_0, 1 f32):"),
        "{text}"
    );
    assert!(text.contains("\"qwen3\""), "{text}");
    // The 100-token array is cut after 8 elements.
    assert!(text.contains("array<string>[100]"), "{text}");
    assert!(text.contains("\"tok7\", ... (92 more)"), "{text}");
    assert!(!text.contains("tok8"), "{text}");
    let embd = text
        .lines()
        .find(|l| l.contains("token_embd.weight"))
        .unwrap();
    let cols: Vec<&str> = embd.split_whitespace().collect();
    assert_eq!(
        cols,
        ["token_embd.weight", "q8_0", "[64,", "2]", "0", "136"]
    );
    let norm = text
        .lines()
        .find(|l| l.contains("output_norm.weight"))
        .unwrap();
    assert!(norm.contains("f32") && norm.ends_with(" 256"), "{norm}");
}

#[test]
fn json_output_has_every_key_and_tensor() {
    let file = TempFile::new("json", &model());
    let out = inspect(&[file.0.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], 3);
    assert_eq!(v["alignment"], 32);
    let meta = v["metadata"].as_array().unwrap();
    assert_eq!(meta.len(), 4);
    assert_eq!(meta[1]["key"], "qwen3.block_count");
    assert_eq!(meta[1]["type"], "u32");
    assert_eq!(meta[1]["value"], 2);
    assert_eq!(meta[3]["type"], "array<string>");
    // JSON carries the full array.
    assert_eq!(meta[3]["value"].as_array().unwrap().len(), 100);
    assert_eq!(meta[3]["value"][99], "tok99");
    let tensors = v["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 2);
    assert_eq!(tensors[0]["name"], "token_embd.weight");
    assert_eq!(tensors[0]["type"], "q8_0");
    assert_eq!(tensors[0]["shape"], serde_json::json!([64, 2]));
    assert_eq!(tensors[0]["bytes"], 136);
    assert_eq!(tensors[1]["offset"], 160);
}

#[test]
fn corrupt_file_exits_1_with_the_error() {
    let mut bytes = model();
    // Claim 2^60 tensors.
    bytes[8..16].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let file = TempFile::new("corrupt", &bytes);
    for json in [false, true] {
        let mut args = vec![file.0.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = inspect(&args);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("tensor count") && err.contains("offset 8"),
            "{err}"
        );
    }
    let out = inspect(&["/nonexistent/model.gguf"]);
    assert_eq!(out.status.code(), Some(1));
    let truncated = TempFile::new("short", b"GGUF\x03\x00");
    let out = inspect(&[truncated.0.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
}
