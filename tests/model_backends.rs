//! The backends agree: simd, parallel and pool give the same bytes at every
//! thread count, decode and prefill; scalar stays within its kernel's
//! rounding of them.
#![cfg(not(feature = "loom"))]

use inferno_cpu::backend::{AnyBackend, Backend};
use inferno_cpu::gguf::Gguf;
use inferno_cpu::model::{argmax, KvDtype, ModelError, Qwen3, Session, SessionOptions};
use inferno_cpu::synth::{model_bytes, SynthConfig};

fn run<B: Backend>(model: &Qwen3<'_>, b: B, kv: KvDtype, prefill: bool) -> Vec<u32> {
    let opts = SessionOptions {
        max_positions: 64,
        kv,
    };
    let mut s = Session::new(model, b, opts).unwrap();
    let prompt = [3u32, 141, 59, 265, 358, 97, 93, 238, 46];
    let mut out = Vec::new();
    let mut push = |l: &[f32]| out.extend(l.iter().map(|v| v.to_bits()));
    if prefill {
        push(&s.prefill_all(&prompt).unwrap());
    } else {
        for &t in &prompt {
            push(s.decode(t).unwrap());
        }
    }
    let mut t = argmax(s.logits());
    for _ in 0..12 {
        let l = s.decode(t).unwrap();
        t = argmax(l);
        push(l);
    }
    out
}

#[test]
fn simd_parallel_and_pool_are_byte_identical_at_every_thread_count() {
    let bytes = model_bytes(&SynthConfig::tiny(), 11).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    let model = Qwen3::load(&gguf).unwrap();
    for kv in [KvDtype::F16, KvDtype::F32] {
        let want = run(&model, AnyBackend::new("simd", 1).unwrap(), kv, false);
        assert_eq!(
            run(&model, AnyBackend::new("simd", 1).unwrap(), kv, true),
            want
        );
        for threads in 1..=5 {
            for name in ["pool", "parallel"] {
                let b = AnyBackend::new(name, threads).unwrap();
                for prefill in [false, true] {
                    assert!(
                        run(&model, &b, kv, prefill) == want,
                        "{name} x{threads} (prefill {prefill}, {kv}) differs from simd"
                    );
                }
            }
        }
    }
}

#[test]
fn scalar_is_close_to_simd() {
    let bytes = model_bytes(&SynthConfig::tiny(), 11).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    let model = Qwen3::load(&gguf).unwrap();
    let opts = SessionOptions::default();
    let mut a = Session::new(&model, AnyBackend::new("scalar", 1).unwrap(), opts).unwrap();
    let mut b = Session::new(&model, AnyBackend::new("simd", 1).unwrap(), opts).unwrap();
    let la = a.prefill_all(&[5, 6, 7, 8]).unwrap();
    let lb = b.prefill_all(&[5, 6, 7, 8]).unwrap();
    let err = la
        .iter()
        .zip(&lb)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    let scale = lb.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    assert!(
        err <= 1e-4 * scale,
        "max difference {err} at logit scale {scale}"
    );
}

#[test]
fn session_limits_are_errors() {
    let bytes = model_bytes(&SynthConfig::tiny(), 1).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    let model = Qwen3::load(&gguf).unwrap();
    let opts = SessionOptions {
        max_positions: 3,
        kv: KvDtype::F16,
    };
    let mut s = Session::new(&model, AnyBackend::new("pool", 2).unwrap(), opts).unwrap();
    assert!(matches!(s.prefill(&[]), Err(ModelError::NoTokens)));
    let vocab = model.config.vocab as u32;
    assert!(matches!(
        s.decode(vocab),
        Err(ModelError::TokenOutOfRange { id, .. }) if id == vocab
    ));
    assert!(matches!(
        s.prefill(&[1, 2, 3, 4]),
        Err(ModelError::ContextFull { .. })
    ));
    s.prefill(&[1, 2]).unwrap();
    s.decode(3).unwrap();
    assert!(matches!(
        s.decode(4),
        Err(ModelError::ContextFull {
            used: 3,
            requested: 1,
            capacity: 3
        })
    ));
    s.reset();
    s.decode(4).unwrap();
    assert_eq!(s.position(), 1);
}
