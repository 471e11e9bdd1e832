//! The quantized file types people download, against llama.cpp.
//!
//! For Q4_0, Q4_K_M, Q5_K_M and Q6_K, `inferno synth --config small
//! --type T --seed 11` writes the `small` synthetic Qwen3 quantized by this
//! crate. `tests/fixtures/quant_types/make_quant_type_cases.py` quantized
//! the same model's F32 file with llama.cpp's own quantizer and recorded:
//! a hash of llama.cpp's tensors (name, type and bytes of each), and
//! llama.cpp's logits for 12 tokens fed one at a time. Here the crate's
//! file must hold exactly llama.cpp's tensors (so its quantizers and its
//! Q4_K_M/Q5_K_M type mix are llama.cpp's), and its logits must match
//! llama.cpp's on every backend, decode and prefill.
#![cfg(not(feature = "loom"))]

#[path = "support/npy.rs"]
mod npy;

use std::path::PathBuf;

use inferno_cpu::backend::AnyBackend;
use inferno_cpu::gguf::Gguf;
use inferno_cpu::model::{Qwen3, Session, SessionOptions};
use inferno_cpu::synth::{model_bytes, FileType, SynthConfig};
use npy::rel_l2;

/// What "the same logits" means here. The weights are the same bytes and
/// the activations are rounded where GGML rounds them, so only the order
/// of float additions inside a dot product differs: most positions agree
/// to about 1e-7 (the median must stay below [`MEDIAN_TOLERANCE`]). The
/// scalar kernels sum as GGML's reference code does and stay below
/// [`TOLERANCE`] everywhere. The SIMD K-quant kernels sum in another
/// order than llama.cpp's, and a last-bit difference now and then moves
/// an activation across a rounding boundary when it is quantized to 8
/// bits: one such flip moves the logits by about 1e-2 (measured: Q6_K,
/// position 11 of 12, 1.1e-2; the other 47 SIMD positions below 3e-6).
/// So a position may reach [`FLIP_TOLERANCE`], which still catches any
/// real error (a wrong scale or a misplaced block is 1e-1 and more).
const TOLERANCE: f64 = 1e-4;
/// See [`TOLERANCE`].
const MEDIAN_TOLERANCE: f64 = 1e-6;
/// See [`TOLERANCE`].
const FLIP_TOLERANCE: f64 = 3e-2;

const TYPES: [(&str, FileType); 4] = [
    ("q4_0", FileType::Q4_0),
    ("q4_k_m", FileType::Q4KM),
    ("q5_k_m", FileType::Q5KM),
    ("q6_k", FileType::Q6K),
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quant_types")
}

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("ref.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3))
}

/// FNV-1a over each tensor's name, type id (u32 LE) and data, in name
/// order: the script's `tensors_hash`.
fn tensors_hash(gguf: &Gguf<'_>) -> u64 {
    let mut ts: Vec<_> = gguf.tensors().iter().collect();
    ts.sort_by(|a, b| a.name.cmp(&b.name));
    ts.iter().fold(0xcbf29ce484222325, |h, t| {
        let h = fnv1a(h, t.name.as_bytes());
        let h = fnv1a(h, &t.ggml_type.id().to_le_bytes());
        fnv1a(h, gguf.data_of(t))
    })
}

fn bytes_of(ft: FileType) -> Vec<u8> {
    let seed = reference()["seed"].as_u64().unwrap();
    model_bytes(&SynthConfig::small().with_file_type(ft), seed).unwrap()
}

#[test]
fn the_crate_writes_llama_cpps_tensors() {
    let r = reference();
    for (name, ft) in TYPES {
        let bytes = bytes_of(ft);
        let gguf = Gguf::parse(&bytes).unwrap();
        let want = r["types"][name]["tensors_fnv1a64"].as_str().unwrap();
        assert_eq!(format!("{:016x}", tensors_hash(&gguf)), want, "{name}");
    }
}

#[test]
fn logits_match_llama_cpp_on_every_backend() {
    let r = reference();
    let tokens: Vec<u32> = r["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect();
    for (name, ft) in TYPES {
        let (shape, want) = npy::read_npy(&dir().join(format!("small-s11-{name}.logits.npy")));
        let bytes = bytes_of(ft);
        let gguf = Gguf::parse(&bytes).unwrap();
        let model = Qwen3::load(&gguf).unwrap();
        let vocab = model.config.vocab;
        assert_eq!(shape, [tokens.len(), vocab]);
        let mut reference: Option<Vec<f32>> = None;
        for (kind, threads) in [("scalar", 1), ("simd", 1), ("pool", 2), ("parallel", 3)] {
            let backend = AnyBackend::new(kind, threads).unwrap();
            let mut s = Session::new(&model, &backend, SessionOptions::default()).unwrap();
            let mut decoded = Vec::new();
            for &t in &tokens {
                decoded.extend_from_slice(s.decode(t).unwrap());
            }
            let limit = if kind == "scalar" {
                TOLERANCE
            } else {
                FLIP_TOLERANCE
            };
            let mut errors = Vec::new();
            for (pos, (g, w)) in decoded.chunks(vocab).zip(want.chunks(vocab)).enumerate() {
                let e = rel_l2(g, w);
                assert!(e < limit, "{name} {kind}: position {pos}: {e:.2e}");
                errors.push(e);
            }
            errors.sort_by(f64::total_cmp);
            let (median, worst) = (errors[errors.len() / 2], errors[errors.len() - 1]);
            assert!(
                median < MEDIAN_TOLERANCE,
                "{name} {kind}: median {median:.2e}"
            );
            println!(
                "{name} {kind} x{threads}: relative L2 median {median:.2e}, worst {worst:.2e}"
            );
            // Prefill gives decode's bits, on every backend.
            let mut p = Session::new(&model, &backend, SessionOptions::default()).unwrap();
            assert_eq!(
                p.prefill_all(&tokens).unwrap(),
                decoded,
                "{name} {kind}: prefill"
            );
            // The SIMD backends give one another's bytes at any thread count.
            if kind != "scalar" {
                match &reference {
                    None => reference = Some(decoded),
                    Some(r) => assert_eq!(r, &decoded, "{name} {kind} x{threads}"),
                }
            }
        }
        reference = None;
        let _ = reference;
    }
}
