//! Writes the seed corpus of the GGUF fuzz targets: small, valid files made
//! by the writer, covering every metadata type, nested arrays, versions 2
//! and 3, several alignments and tensors of many GGML types.
//!
//! ```text
//! cargo run --example gguf_fuzz_seeds -- fuzz/corpus/gguf_parse
//! ```

use std::path::PathBuf;

use inferno_cpu::gguf::{Array, GgmlType, Value, Writer};
use inferno_cpu::BlockQ8_0;

fn bytes_of(len: u64, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37) ^ salt)
        .collect()
}

/// A seed's file name stem and its bytes.
type Seed = (String, Vec<u8>);

fn seeds() -> Result<Vec<Seed>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();

    out.push(("empty_v3".into(), Writer::new().to_bytes()?));
    let mut v2 = Writer::new();
    v2.version(2).add_str("general.name", "v2")?;
    out.push(("metadata_only_v2".into(), v2.to_bytes()?));

    let mut all = Writer::new();
    all.add_u8("t.u8", 7)?
        .add_i8("t.i8", -7)?
        .add_u16("t.u16", 700)?
        .add_i16("t.i16", -700)?
        .add_u32("t.u32", 70_000)?
        .add_i32("t.i32", -70_000)?
        .add_f32("t.f32", 0.5)?
        .add_bool("t.bool", true)?
        .add_str("t.str", "héllo")?
        .add_u64("t.u64", 1 << 40)?
        .add_i64("t.i64", -(1 << 40))?
        .add_f64("t.f64", -0.25)?
        .add_array("t.strs", Array::String(vec!["a".into(), "bc".into()]))?
        .add_array("t.bools", Array::Bool(vec![true, false]))?
        .add_array("t.f32s", Array::F32(vec![1.0, 2.0]))?
        .add_array(
            "t.nested",
            Array::Array(vec![
                Array::U8(vec![1, 2]),
                Array::Array(vec![Array::I64(vec![3])]),
            ]),
        )?;
    out.push(("all_value_types".into(), all.to_bytes()?));

    // A miniature model: Q8_0 weights, F32 norms, tokenizer arrays.
    let blocks: Vec<BlockQ8_0> = (0..8)
        .map(|i| BlockQ8_0::new(half::f16::from_f32(0.01 * i as f32), [i as i8; 32]))
        .collect();
    let norm = [1.0f32; 32];
    let mut model = Writer::new();
    model
        .add_str("general.architecture", "qwen3")?
        .add_u32("qwen3.block_count", 1)?
        .add_f32("qwen3.rope.freq_base", 1.0e6)?
        .add(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(vec!["a".into(); 4])),
        )?
        .add_array("tokenizer.ggml.token_type", Array::I32(vec![1; 4]))?
        .add_tensor_q8_0("token_embd.weight", &[64, 4], &blocks)?
        .add_tensor_f32("output_norm.weight", &[32], &norm)?;
    out.push(("tiny_model".into(), model.to_bytes()?));

    for (i, alignment) in [8u32, 64, 4096].into_iter().enumerate() {
        let mut w = Writer::new();
        w.alignment(alignment)?
            .add_tensor_f32("a", &[3], &norm[..3])?
            .add_tensor_f32("b", &[5], &norm[..5])?;
        out.push((format!("alignment_{alignment}_{i}"), w.to_bytes()?));
    }

    let types = [
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::IQ2_XXS,
        GgmlType::BF16,
        GgmlType::MXFP4,
        GgmlType::I32,
    ];
    let mut many = Writer::new();
    let datas: Vec<(GgmlType, Vec<u8>)> = types
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, bytes_of(t.type_size() * 2, i as u8)))
        .collect();
    for (i, (t, data)) in datas.iter().enumerate() {
        many.add_tensor(&format!("w{i}"), *t, &[t.block_size(), 2], data.as_slice())?;
    }
    out.push(("many_types".into(), many.to_bytes()?));

    let mut dims4 = Writer::new();
    let data = bytes_of(2 * 3 * 4 * 5 * 4, 1);
    dims4.add_tensor("x", GgmlType::F32, &[2, 3, 4, 5], data.as_slice())?;
    out.push(("four_dims".into(), dims4.to_bytes()?));
    Ok(out)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        eprintln!("usage: gguf_fuzz_seeds DIR...");
        std::process::exit(2);
    }
    let seeds = seeds()?;
    for dir in &dirs {
        std::fs::create_dir_all(dir)?;
        for (name, bytes) in &seeds {
            // Every seed must be a valid file, or it seeds nothing useful.
            inferno_cpu::gguf::Gguf::parse(bytes)?;
            std::fs::write(dir.join(format!("seed_{name}.gguf")), bytes)?;
        }
        println!("wrote {} seeds to {}", seeds.len(), dir.display());
    }
    Ok(())
}
