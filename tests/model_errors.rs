//! Loading a model file that lies: every inconsistency is a typed error
//! naming the key or tensor, never a panic.
#![cfg(not(feature = "loom"))]

mod common;

use common::{f32s, Edit};
use half::{bf16, f16};
use inferno_cpu::backend::Simd;
use inferno_cpu::gguf::{GgmlType, GgufError, Value};
use inferno_cpu::model::{ModelError, Qwen3, Session, SessionOptions};

fn load(e: &Edit) -> Result<(), ModelError> {
    let file = e.file();
    let gguf = file.gguf();
    Qwen3::load(&gguf).map(|_| ())
}

fn invalid_key(e: Edit, key: &str) {
    match load(&e) {
        Err(ModelError::InvalidValue { key: k, reason }) => {
            assert_eq!(k, key, "{reason}");
            let msg = ModelError::InvalidValue { key: k, reason }.to_string();
            assert!(msg.contains(key), "{msg}");
        }
        other => panic!("{key}: expected InvalidValue, got {other:?}"),
    }
}

const P: &str = "qwen3.";

#[test]
fn the_unedited_file_loads() {
    load(&Edit::tiny()).unwrap();
}

#[test]
fn zero_or_huge_head_counts() {
    for v in [0u32, 1 << 30] {
        invalid_key(
            Edit::tiny().set("qwen3.attention.head_count", Value::U32(v)),
            "qwen3.attention.head_count",
        );
        invalid_key(
            Edit::tiny().set("qwen3.attention.head_count_kv", Value::U32(v)),
            "qwen3.attention.head_count_kv",
        );
    }
    invalid_key(
        Edit::tiny().set("qwen3.attention.head_count", Value::I64(-4)),
        "qwen3.attention.head_count",
    );
}

#[test]
fn kv_heads_must_divide_heads() {
    invalid_key(
        Edit::tiny().set("qwen3.attention.head_count_kv", Value::U32(3)),
        "qwen3.attention.head_count_kv",
    );
    invalid_key(
        Edit::tiny().set("qwen3.attention.head_count_kv", Value::U32(8)),
        "qwen3.attention.head_count_kv",
    );
}

#[test]
fn head_dim_not_matching_the_projections() {
    let e = Edit::tiny()
        .set("qwen3.attention.key_length", Value::U32(16))
        .set("qwen3.attention.value_length", Value::U32(16));
    match load(&e) {
        Err(ModelError::TensorShape { tensor, .. }) => assert_eq!(tensor, "blk.0.attn_q.weight"),
        other => panic!("{other:?}"),
    }
    invalid_key(
        Edit::tiny().set("qwen3.attention.key_length", Value::U32(33)),
        "qwen3.attention.key_length",
    );
    invalid_key(
        Edit::tiny().set("qwen3.attention.value_length", Value::U32(64)),
        "qwen3.attention.value_length",
    );
}

#[test]
fn vocab_and_embedding_disagree() {
    let e = Edit::tiny().set("qwen3.embedding_length", Value::U32(256));
    match load(&e) {
        Err(ModelError::TensorShape { tensor, .. }) => assert_eq!(tensor, "token_embd.weight"),
        other => panic!("{other:?}"),
    }
    // An output projection of another vocabulary than the embedding.
    let embd = Edit::tiny();
    let data = embd.data("token_embd.weight")[..34 * 4 * 100].to_vec();
    let e = embd.tensor("output.weight", GgmlType::Q8_0, &[128, 100], data);
    match load(&e) {
        Err(ModelError::TensorShape { tensor, .. }) => assert_eq!(tensor, "output.weight"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_layers_and_tensors() {
    let e = Edit::tiny().set("qwen3.block_count", Value::U32(3));
    match load(&e) {
        Err(ModelError::Gguf(GgufError::TensorNotFound { tensor })) => {
            assert_eq!(tensor, "blk.2.attn_norm.weight")
        }
        other => panic!("{other:?}"),
    }
    let e = Edit::tiny().drop_tensor("blk.1.ffn_down.weight");
    match load(&e) {
        Err(ModelError::Gguf(GgufError::TensorNotFound { tensor })) => {
            assert_eq!(tensor, "blk.1.ffn_down.weight")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn zero_context_and_bad_floats() {
    invalid_key(
        Edit::tiny().set("qwen3.context_length", Value::U32(0)),
        "qwen3.context_length",
    );
    for v in [f32::NAN, -1.0, 0.0, f32::INFINITY] {
        invalid_key(
            Edit::tiny().set("qwen3.rope.freq_base", Value::F32(v)),
            "qwen3.rope.freq_base",
        );
        invalid_key(
            Edit::tiny().set("qwen3.attention.layer_norm_rms_epsilon", Value::F32(v)),
            "qwen3.attention.layer_norm_rms_epsilon",
        );
    }
}

#[test]
fn missing_and_mistyped_keys() {
    let key = "qwen3.attention.layer_norm_rms_epsilon";
    match load(&Edit::tiny().remove(key)) {
        Err(ModelError::Gguf(GgufError::KeyNotFound { key: k })) => assert_eq!(k, key),
        other => panic!("{other:?}"),
    }
    let key = "qwen3.block_count";
    match load(&Edit::tiny().set(key, Value::String("28".into()))) {
        Err(e @ ModelError::Gguf(GgufError::TypeMismatch { .. })) => {
            assert!(e.to_string().contains(key), "{e}")
        }
        other => panic!("{other:?}"),
    }
    match load(&Edit::tiny().set("general.architecture", Value::String("llama".into()))) {
        Err(e @ ModelError::Architecture { .. }) => assert!(e.to_string().contains("llama")),
        other => panic!("{other:?}"),
    }
    let _ = P;
}

#[test]
fn unsupported_weight_type_names_tensor_and_type() {
    let e = Edit::tiny();
    let n = 128 * 128;
    let data: Vec<u8> = (0..n).flat_map(|_| 0.01f32.to_le_bytes()).collect();
    let e = e.tensor("blk.0.attn_q.weight", GgmlType::F32, &[128, 128], data);
    match load(&e) {
        Err(err @ ModelError::TensorType { .. }) => {
            let msg = err.to_string();
            assert!(
                msg.contains("blk.0.attn_q.weight") && msg.contains("f32"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
}

fn logits(e: &Edit) -> Vec<f32> {
    let file = e.file();
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).unwrap();
    let mut s = Session::new(&model, Simd, SessionOptions::default()).unwrap();
    s.prefill_all(&[1, 2, 3, 4]).unwrap()
}

fn rel(a: &[f32], b: &[f32]) -> f64 {
    let n: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
    let d: f64 = b.iter().map(|y| f64::from(*y).powi(2)).sum();
    (n / d).sqrt()
}

#[test]
fn f16_and_bf16_norms_load_and_agree() {
    let base = Edit::tiny();
    let want = logits(&base);
    let norms: Vec<(String, Vec<u64>, Vec<f32>)> = base
        .tensors
        .iter()
        .filter(|t| t.0.contains("norm"))
        .map(|t| (t.0.clone(), t.2.clone(), f32s(&t.3)))
        .collect();
    let mut h = Edit::tiny();
    let mut b = Edit::tiny();
    for (name, dims, vals) in &norms {
        let hd: Vec<u8> = vals
            .iter()
            .flat_map(|v| f16::from_f32(*v).to_le_bytes())
            .collect();
        let bd: Vec<u8> = vals
            .iter()
            .flat_map(|v| bf16::from_f32(*v).to_le_bytes())
            .collect();
        h = h.tensor(name, GgmlType::F16, dims, hd);
        b = b.tensor(name, GgmlType::BF16, dims, bd);
    }
    // The tiny random model's logits are small, and a norm weight moved
    // by an ulp can flip an activation's Q8_0 rounding: measured 1.2e-2
    // (f16) and 1.5e-2 (bf16); a norm read as garbage lands near 1.
    assert!(rel(&logits(&h), &want) < 5e-2);
    assert!(rel(&logits(&b), &want) < 5e-2);
}

#[test]
fn untied_output_and_float_embeddings_load() {
    let base = Edit::tiny();
    let want = logits(&base);
    // The same Q8_0 table as an explicit output.weight: identical logits.
    let embd = base.data("token_embd.weight").to_vec();
    let untied = Edit::tiny().tensor("output.weight", GgmlType::Q8_0, &[128, 512], embd.clone());
    assert_eq!(logits(&untied), want);
    // An F16 token embedding (tied, so the output is quantized at load).
    let vals = inferno_cpu::quant::dequantize_row_q8_0(bytemuck_blocks(&embd));
    let hd: Vec<u8> = vals
        .iter()
        .flat_map(|v| f16::from_f32(*v).to_le_bytes())
        .collect();
    let f16e = Edit::tiny().tensor("token_embd.weight", GgmlType::F16, &[128, 512], hd);
    assert!(rel(&logits(&f16e), &want) < 2e-2);
}

fn bytemuck_blocks(b: &[u8]) -> &[inferno_cpu::BlockQ8_0] {
    bytemuck::cast_slice(b)
}
