//! The library's generation loop: limits, stop reasons, streamed text and
//! the timings it reports.

#![cfg(not(feature = "loom"))]

use std::ops::ControlFlow;
use std::sync::Arc;

use inferno_cpu::backend::Simd;
use inferno_cpu::model::{Model, ModelError, SessionOptions, StopReason};
use inferno_cpu::sample::Sampler;
use inferno_cpu::synth::{model_bytes, SynthConfig};

fn tiny() -> Arc<Model> {
    Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 5).unwrap()).unwrap())
}

#[test]
fn generate_hands_over_max_tokens_and_decodes_all_but_the_last() {
    let model = tiny();
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let mut ids = Vec::new();
    let stats = s
        .generate(&[5, 6, 7], 6, &mut Sampler::greedy(), |id| {
            ids.push(id);
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(
        (stats.generated, stats.stop, stats.prompt_tokens),
        (6, StopReason::Limit, 3)
    );
    assert_eq!(stats.steps.len(), 5);
    assert_eq!(s.position(), 3 + 5);
    // The same tokens, step by step by hand.
    let mut t = model.session(Simd, SessionOptions::default()).unwrap();
    let mut want = vec![inferno_cpu::model::argmax(t.prefill(&[5, 6, 7]).unwrap())];
    for _ in 0..5 {
        let last = *want.last().unwrap();
        want.push(inferno_cpu::model::argmax(t.decode(last).unwrap()));
    }
    assert_eq!(ids, want);
    assert!(stats.prefill_tokens_per_second() > 0.0);
    assert!(stats.decode_tokens_per_second().unwrap() > 0.0);
    let (min, mean, max) = stats.step_ms().unwrap();
    assert!(min <= mean && mean <= max);
}

#[test]
fn a_break_stops_before_the_token_is_counted() {
    let model = tiny();
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let mut seen = 0;
    let stats = s
        .generate(&[9, 8], 50, &mut Sampler::greedy(), |_| {
            seen += 1;
            if seen == 3 {
                ControlFlow::Break(StopReason::EndOfGeneration)
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!(
        (stats.generated, stats.stop),
        (2, StopReason::EndOfGeneration)
    );
    assert_eq!(stats.steps.len(), 2);
    // Zero tokens: the prompt is prefilled and nothing is handed over.
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let stats = s
        .generate(&[1], 0, &mut Sampler::greedy(), |_| {
            panic!("no token expected")
        })
        .unwrap();
    assert_eq!(
        (stats.generated, stats.stop, s.position()),
        (0, StopReason::Limit, 1)
    );
}

#[test]
fn a_reply_that_cannot_fit_is_refused_before_the_prefill() {
    let model = tiny();
    let opts = SessionOptions {
        max_positions: 10,
        ..SessionOptions::default()
    };
    let mut s = model.session(Simd, opts).unwrap();
    let err = s
        .generate(&[1, 2, 3, 4], 8, &mut Sampler::greedy(), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(matches!(
        err,
        ModelError::ContextFull {
            used: 0,
            requested: 11,
            capacity: 10
        }
    ));
    assert_eq!(s.position(), 0);
    // Exactly full is fine: 4 prompt positions and 6 decoded tokens.
    let stats = s
        .generate(&[1, 2, 3, 4], 7, &mut Sampler::greedy(), |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!((stats.generated, s.position()), (7, 10));
}

#[test]
fn streamed_text_is_the_decoded_tokens_and_a_break_stops_it() {
    let model = tiny();
    let tok = model.tokenizer();
    let prompt = tok.encode(&model.chat_template().unwrap().user_turn("Hi"), true);
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let mut ids = Vec::new();
    s.generate(&prompt, 12, &mut Sampler::new(0.9, 0.9, 3).unwrap(), |id| {
        if tok.is_end_of_generation(id) {
            return ControlFlow::Break(StopReason::EndOfGeneration);
        }
        ids.push(id);
        ControlFlow::Continue(())
    })
    .unwrap();
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let mut text = String::new();
    let stats = s
        .generate_text(
            tok,
            &prompt,
            12,
            &mut Sampler::new(0.9, 0.9, 3).unwrap(),
            |piece| {
                text.push_str(piece);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    assert_eq!(stats.generated, ids.len());
    assert_eq!(text, tok.decode_lossy(&ids).unwrap());
    // Stop after the first piece of text.
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    let mut pieces = 0;
    let stats = s
        .generate_text(tok, &prompt, 12, &mut Sampler::greedy(), |_| {
            pieces += 1;
            ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!((stats.generated, stats.stop), (0, StopReason::Stopped));
    assert!(pieces >= 1);
}

/// `usize::MAX` as the token limit ("no limit") is refused before the
/// prefill like any other limit that cannot fit, never an overflow of the
/// room the reply needs (a panic in debug builds, and in release a sum that
/// wraps below the capacity, passes the check and fails mid-generation).
#[test]
fn an_unbounded_limit_is_refused_before_the_prefill() {
    let model = tiny();
    let mut s = model.session(Simd, SessionOptions::default()).unwrap();
    for prompt in [&[1u32][..], &[1, 2], &[1, 2, 3]] {
        let mut handed = 0;
        let err = s
            .generate(prompt, usize::MAX, &mut Sampler::greedy(), |_| {
                handed += 1;
                ControlFlow::Continue(())
            })
            .unwrap_err();
        assert!(
            matches!(err, ModelError::ContextFull { used: 0, .. }),
            "{prompt:?}: {err:?}"
        );
        assert_eq!((handed, s.position()), (0, 0), "{prompt:?}");
    }
}
