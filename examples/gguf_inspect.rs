//! Open a GGUF file (memory-mapped, validated once, then read without
//! copying) and print its header, metadata and tensor table.
//!
//! ```sh
//! cargo run --release --example gguf_inspect -- model.gguf
//! cargo run --release --example gguf_inspect            # a tiny synthetic Qwen3
//! ```
//!
//! A malformed file is a typed error (`GgufError`) naming what is wrong and
//! where, never a panic.

use std::process::ExitCode;

use inferno_cpu::gguf::{Array, GgufFile, Value};
use inferno_cpu::synth::{write_model_file, SynthConfig};

/// A short, one-line rendering of a metadata value: long strings and
/// arrays are cut (a tokenizer's vocabulary is 151,936 strings).
fn show(value: &Value) -> String {
    let cut = |s: &str| {
        let mut out: String = s.chars().take(48).collect();
        if out.len() < s.len() {
            out.push('…');
        }
        format!("{out:?}")
    };
    match value {
        Value::String(s) => cut(s),
        Value::Array(a) => {
            let first = match a {
                Array::String(v) => v.first().map(|s| cut(s)),
                Array::U32(v) => v.first().map(u32::to_string),
                Array::I32(v) => v.first().map(i32::to_string),
                Array::F32(v) => v.first().map(f32::to_string),
                _ => None,
            };
            let first = first.map(|f| format!(", first {f}")).unwrap_or_default();
            format!("[{} x {}{first}]", a.len(), a.element_type().name())
        }
        Value::U8(v) => v.to_string(),
        Value::I8(v) => v.to_string(),
        Value::U16(v) => v.to_string(),
        Value::I16(v) => v.to_string(),
        Value::U32(v) => v.to_string(),
        Value::I32(v) => v.to_string(),
        Value::U64(v) => v.to_string(),
        Value::I64(v) => v.to_string(),
        Value::F32(v) => v.to_string(),
        Value::F64(v) => v.to_string(),
        Value::Bool(v) => v.to_string(),
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let given = std::env::args_os().nth(1);
    let path = match &given {
        Some(path) => path.into(),
        None => {
            // No file given: write the tiny synthetic model (2 layers, a
            // few hundred kilobytes) to a temporary directory.
            let path =
                std::env::temp_dir().join(format!("inferno-example-{}.gguf", std::process::id()));
            write_model_file(&SynthConfig::tiny(), 7, &path, |_, _| {})?;
            println!(
                "(no file given: wrote a tiny synthetic Qwen3 to {})",
                path.display()
            );
            path
        }
    };
    let file = GgufFile::open(&path)?;
    let gguf = file.gguf();
    println!(
        "{}: GGUF v{}, {} bytes, alignment {}, {} metadata keys, {} tensors",
        path.display(),
        gguf.version(),
        gguf.bytes().len(),
        gguf.alignment(),
        gguf.metadata().len(),
        gguf.tensors().len()
    );
    println!("\nmetadata:");
    for (key, value) in gguf.metadata().iter() {
        println!("  {key:<40} {}", show(value));
    }
    println!("\ntensors:");
    let mut total = 0u64;
    for t in gguf.tensors() {
        let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
        println!(
            "  {:<28} {:<5} {:<16} {:>12} bytes",
            t.name,
            t.ggml_type.to_string(),
            dims.join(" x "),
            t.n_bytes
        );
        total += t.n_bytes;
    }
    println!("\n{total} bytes of tensor data, read in place from the mapped file");
    if given.is_none() {
        drop(file);
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gguf_inspect: {e}");
            ExitCode::FAILURE
        }
    }
}
