//! Every backend against llama.cpp's logits for the fixture model.
//!
//! `tests/fixtures/qwen3-tiny-s7.gguf` was written by the Python `gguf`
//! package (not by this crate) and `qwen3-tiny-s7.logits.seq.npy` holds
//! llama.cpp's logits for 20 tokens fed one at a time (f16 KV cache; see
//! the fixtures' README). Each position's relative L2 error must stay below
//! [`TOLERANCE`]; missing fixtures fail the test.
//!
//! Why 1e-4: this crate rounds every activation where GGML does (Q8_0
//! product inputs with ties to even, `f16` keys, values, queries and
//! attention weights), so every backend lands far below it at every
//! position (the measured error, which these tests print with
//! `--nocapture`: README, "Logits against llama.cpp"); what is left is
//! summation order and libm's `expf` and `sinf`. The smallest real
//! mistake measured is far above 1e-4: one
//! activation tie rounded away from zero instead of to even moves a
//! position by 6e-3, full-precision activations by 1e-2, ignoring the
//! QK-norm weights by 4e-2, the wrong RoPE style by 0.35.
#![cfg(not(feature = "loom"))]

use std::path::PathBuf;

#[path = "support/npy.rs"]
mod npy;
use npy::{read_npy, rel_l2};

use inferno_cpu::backend::{AnyBackend, Backend};
use inferno_cpu::gguf::GgufFile;
use inferno_cpu::model::{KvDtype, Qwen3, Session, SessionOptions};

const TOLERANCE: f64 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const TOKENS: [u32; 20] = [
    17, 300, 5, 480, 42, 99, 7, 256, 128, 64, 32, 16, 8, 4, 2, 1, 500, 333, 222, 111,
];

fn backends() -> Vec<AnyBackend> {
    let mut v = vec![
        AnyBackend::new("scalar", 1).unwrap(),
        AnyBackend::new("simd", 1).unwrap(),
    ];
    for t in [1, 2, 3] {
        v.push(AnyBackend::new("parallel", t).unwrap());
        v.push(AnyBackend::new("pool", t).unwrap());
    }
    v
}

fn check(label: &str, logits: &[f32], want: &[f32], vocab: usize) -> f64 {
    let mut worst = 0.0f64;
    for (pos, (g, w)) in logits.chunks(vocab).zip(want.chunks(vocab)).enumerate() {
        let e = rel_l2(g, w);
        assert!(
            e < TOLERANCE,
            "{label}: position {pos}: relative L2 error {e:.2e}"
        );
        worst = worst.max(e);
    }
    worst
}

#[test]
fn every_backend_matches_llama_cpp_decode_and_prefill() {
    let (shape, want) = read_npy(&fixture("qwen3-tiny-s7.logits.seq.npy"));
    assert_eq!(shape, [20, 512]);
    let file = GgufFile::open(fixture("qwen3-tiny-s7.gguf")).expect("fixture model");
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).unwrap();
    let vocab = model.config.vocab;
    assert_eq!(vocab, 512);
    for b in backends() {
        let label = format!("{} x{}", b.name(), b.threads());
        let mut s = Session::new(&model, &b, SessionOptions::default()).unwrap();
        let mut decoded = Vec::new();
        for &t in &TOKENS {
            decoded.extend_from_slice(s.decode(t).unwrap());
        }
        let worst = check(&format!("{label} decode"), &decoded, &want, vocab);
        s.reset();
        let prefilled = s.prefill_all(&TOKENS).unwrap();
        check(&format!("{label} prefill"), &prefilled, &want, vocab);
        // Prefill's products are matmuls whose rows equal the matvecs.
        assert!(
            decoded
                .iter()
                .zip(&prefilled)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{label}: prefill and decode logits differ"
        );
        eprintln!("{label}: worst relative L2 error {worst:.2e}");
    }
}

/// `prefill` returns the logits after the last token of the prompt (what
/// `generate` and `bench` take their first token from): at every prompt
/// length, on every backend, they match llama.cpp's at the prompt's last
/// position, and `decode` then continues from there.
#[test]
fn prefill_returns_the_last_positions_logits() {
    let (_, want) = read_npy(&fixture("qwen3-tiny-s7.logits.seq.npy"));
    let file = GgufFile::open(fixture("qwen3-tiny-s7.gguf")).expect("fixture model");
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).unwrap();
    let vocab = model.config.vocab;
    let row = |pos: usize| &want[pos * vocab..(pos + 1) * vocab];
    for b in backends() {
        let label = format!("{} x{}", b.name(), b.threads());
        let mut s = Session::new(&model, &b, SessionOptions::default()).unwrap();
        for n in [1, 2, 3, 7, 19, 20] {
            s.reset();
            let last = s.prefill(&TOKENS[..n]).unwrap().to_vec();
            let e = rel_l2(&last, row(n - 1));
            assert!(
                e < TOLERANCE,
                "{label}: prefill of {n} tokens: relative L2 error {e:.2e} from position {}",
                n - 1
            );
            assert_eq!(s.logits(), &last[..], "{label}: logits() after prefill");
            assert_eq!(s.position(), n);
            if n < TOKENS.len() {
                let next = s.decode(TOKENS[n]).unwrap();
                let e = rel_l2(next, row(n));
                assert!(
                    e < TOLERANCE,
                    "{label}: decode after a prefill of {n}: {e:.2e}"
                );
            }
        }
        // A prompt prefilled in two parts: the second part's last position.
        s.reset();
        s.prefill(&TOKENS[..11]).unwrap();
        let e = rel_l2(s.prefill(&TOKENS[11..]).unwrap(), row(19));
        assert!(e < TOLERANCE, "{label}: prefill in two parts: {e:.2e}");
    }
}

#[test]
fn f32_cache_is_close_too() {
    let (_, want) = read_npy(&fixture("qwen3-tiny-s7.logits.seq.npy"));
    let file = GgufFile::open(fixture("qwen3-tiny-s7.gguf")).unwrap();
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf).unwrap();
    let opts = SessionOptions {
        kv: KvDtype::F32,
        ..SessionOptions::default()
    };
    let mut s = Session::new(&model, AnyBackend::new("simd", 1).unwrap(), opts).unwrap();
    let logits = s.prefill_all(&TOKENS).unwrap();
    // Full-precision attention leaves GGML's rounding (by the scale of
    // full-precision activations; the measured figure is in the README's
    // "Logits against llama.cpp") but no further.
    let mut worst = 0.0f64;
    for (pos, (g, w)) in logits.chunks(512).zip(want.chunks(512)).enumerate() {
        let e = rel_l2(g, w);
        assert!(e < 3e-2, "position {pos}: {e:.2e}");
        worst = worst.max(e);
    }
    eprintln!("simd x1, f32 cache: worst relative L2 error {worst:.2e}");
    // ...and it is not the f16 path under another name.
    assert!(
        worst > TOLERANCE,
        "an f32 cache should not round like GGML's f16 one"
    );
}
