//! `inferno inspect [--model FILE] [--json]`: what a GGUF file holds.
//!
//! The file is fully validated first (memory-mapped, nothing copied), so a
//! malformed file prints the parser's error, which names the byte offset and
//! the key or tensor at fault, and exits with status 1.

use std::fmt::Write as _;
use std::path::Path;

use inferno_cpu::gguf::{Array, Gguf, Value};
use serde_json::json;

use crate::args::ModelPath;
use crate::CliError;

/// Array elements shown in the text output before "... (N more)".
const SHOWN_ELEMENTS: usize = 8;
/// Characters of a string shown in the text output before it is cut.
const SHOWN_CHARS: usize = 120;

/// Arguments of `inferno inspect`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelPath,
    /// Print one JSON object (every key with its full value, every tensor)
    /// instead of text.
    #[arg(long)]
    json: bool,
}

/// Prints the file's contents; an error for a file that cannot be read
/// or is not valid GGUF.
pub fn run(args: &Args) -> Result<(), CliError> {
    let (path, file) = args.model.open()?;
    let gguf = file.gguf();
    if args.json {
        println!("{}", to_json(&path, &gguf));
    } else {
        print!("{}", to_text(&path, &gguf));
    }
    Ok(())
}

/// `u32`, `string`, `array<string>`, `array<array>`.
fn type_name(value: &Value) -> String {
    match value {
        Value::Array(a) => format!("array<{}>", a.element_type()),
        v => v.value_type().to_string(),
    }
}

fn short_str(s: &str) -> String {
    if s.chars().count() <= SHOWN_CHARS {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(SHOWN_CHARS).collect();
        format!("{head:?}... ({} chars)", s.chars().count())
    }
}

fn text_value(value: &Value) -> String {
    match value {
        Value::String(s) => short_str(s),
        Value::Array(a) => text_array(a),
        Value::U8(v) => v.to_string(),
        Value::I8(v) => v.to_string(),
        Value::U16(v) => v.to_string(),
        Value::I16(v) => v.to_string(),
        Value::U32(v) => v.to_string(),
        Value::I32(v) => v.to_string(),
        Value::F32(v) => v.to_string(),
        Value::Bool(v) => v.to_string(),
        Value::U64(v) => v.to_string(),
        Value::I64(v) => v.to_string(),
        Value::F64(v) => v.to_string(),
    }
}

/// The first few elements of an array, then how many were left out.
fn text_array(array: &Array) -> String {
    fn show<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
        let mut out = String::from("[");
        for (i, item) in items.iter().take(SHOWN_ELEMENTS).enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&f(item));
        }
        if items.len() > SHOWN_ELEMENTS {
            let _ = write!(out, ", ... ({} more)", items.len() - SHOWN_ELEMENTS);
        }
        out.push(']');
        out
    }
    match array {
        Array::U8(v) => show(v, u8::to_string),
        Array::I8(v) => show(v, i8::to_string),
        Array::U16(v) => show(v, u16::to_string),
        Array::I16(v) => show(v, i16::to_string),
        Array::U32(v) => show(v, u32::to_string),
        Array::I32(v) => show(v, i32::to_string),
        Array::F32(v) => show(v, f32::to_string),
        Array::Bool(v) => show(v, bool::to_string),
        Array::String(v) => show(v, |s| short_str(s)),
        Array::Array(v) => show(v, text_array),
        Array::U64(v) => show(v, u64::to_string),
        Array::I64(v) => show(v, i64::to_string),
        Array::F64(v) => show(v, f64::to_string),
    }
}

fn to_text(path: &Path, gguf: &Gguf<'_>) -> String {
    let h = gguf.header();
    let mut out = String::new();
    let _ = writeln!(out, "file:        {}", path.display());
    let _ = writeln!(out, "size:        {} bytes", h.file_len());
    let _ = writeln!(out, "version:     {}", h.version());
    let _ = writeln!(out, "alignment:   {}", h.alignment());
    let _ = writeln!(out, "data offset: {}", h.data_offset());
    let _ = writeln!(out, "\nmetadata ({} keys):", h.metadata().len());
    let key_width = h.metadata().iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in h.metadata().iter() {
        let ty = match value {
            Value::Array(a) => format!("{}[{}]", type_name(value), a.len()),
            v => type_name(v),
        };
        let _ = writeln!(out, "  {key:key_width$}  {ty:<16} {}", text_value(value));
    }
    let total: u64 = h.tensors().iter().map(|t| t.n_bytes).sum();
    let mut by_type: Vec<(&str, usize)> = Vec::new();
    for t in h.tensors() {
        match by_type
            .iter_mut()
            .find(|(name, _)| *name == t.ggml_type.name())
        {
            Some((_, n)) => *n += 1,
            None => by_type.push((t.ggml_type.name(), 1)),
        }
    }
    let types: Vec<String> = by_type.iter().map(|(t, n)| format!("{n} {t}")).collect();
    if types.is_empty() {
        let _ = writeln!(out, "\ntensors (0):");
    } else {
        let _ = writeln!(
            out,
            "\ntensors ({}, {total} bytes: {}):",
            h.tensors().len(),
            types.join(", ")
        );
    }
    let name_width = h
        .tensors()
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:name_width$}  {:<8} {:<22} {:>12} {:>12}",
        "name", "type", "shape", "offset", "bytes"
    );
    for t in h.tensors() {
        let shape = format!("{:?}", t.dims);
        let _ = writeln!(
            out,
            "  {:name_width$}  {:<8} {:<22} {:>12} {:>12}",
            t.name,
            t.ggml_type.name(),
            shape,
            t.offset,
            t.n_bytes
        );
    }
    out
}

fn json_array(array: &Array) -> serde_json::Value {
    match array {
        Array::U8(v) => json!(v),
        Array::I8(v) => json!(v),
        Array::U16(v) => json!(v),
        Array::I16(v) => json!(v),
        Array::U32(v) => json!(v),
        Array::I32(v) => json!(v),
        Array::F32(v) => json!(v),
        Array::Bool(v) => json!(v),
        Array::String(v) => json!(v),
        Array::Array(v) => v.iter().map(json_array).collect(),
        Array::U64(v) => json!(v),
        Array::I64(v) => json!(v),
        Array::F64(v) => json!(v),
    }
}

/// Full values; NaN and infinities (which JSON cannot hold) become `null`.
fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::U8(v) => json!(v),
        Value::I8(v) => json!(v),
        Value::U16(v) => json!(v),
        Value::I16(v) => json!(v),
        Value::U32(v) => json!(v),
        Value::I32(v) => json!(v),
        Value::F32(v) => json!(v),
        Value::Bool(v) => json!(v),
        Value::String(v) => json!(v),
        Value::Array(a) => json_array(a),
        Value::U64(v) => json!(v),
        Value::I64(v) => json!(v),
        Value::F64(v) => json!(v),
    }
}

fn to_json(path: &Path, gguf: &Gguf<'_>) -> serde_json::Value {
    let h = gguf.header();
    let metadata: Vec<serde_json::Value> = h
        .metadata()
        .iter()
        .map(|(key, value)| json!({ "key": key, "type": type_name(value), "value": json_value(value) }))
        .collect();
    let tensors: Vec<serde_json::Value> = h
        .tensors()
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "type": t.ggml_type.name(),
                "shape": t.dims,
                "offset": t.offset,
                "bytes": t.n_bytes,
            })
        })
        .collect();
    json!({
        "file": path.display().to_string(),
        "size": h.file_len(),
        "version": h.version(),
        "alignment": h.alignment(),
        "data_offset": h.data_offset(),
        "metadata": metadata,
        "tensors": tensors,
    })
}
