//! Encoding a 511-token prompt with Qwen3's merges, with and without the
//! BPE cache.
//!
//! The vocabulary is the Qwen3 subset in `tests/fixtures` (real ids and
//! merge ranks for the texts there); with `QWEN3_TOKENIZER_GGUF` set to a
//! full vocabulary (see `tests/fixtures/make_qwen3_cases.py`) the same
//! prompt is also encoded with all 151k merges.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use inferno_cpu::gguf::GgufFile;
use inferno_cpu::tokenizer::{Tokenizer, TokenizerParts};
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/qwen3_tokenizer_cases.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn subset_tokenizer(doc: &Value) -> Tokenizer {
    let n = doc["vocab_size"].as_u64().unwrap() as usize;
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut types = vec![5i32; n];
    for e in doc["tokens"].as_array().unwrap() {
        let id = e[0].as_u64().unwrap() as usize;
        tokens[id] = e[1].as_str().unwrap().to_owned();
        types[id] = e[2].as_i64().unwrap() as i32;
    }
    let merges = doc["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    Tokenizer::from_parts(&TokenizerParts {
        pre: "qwen2".into(),
        tokens,
        token_types: types,
        merges,
        ..TokenizerParts::default()
    })
    .unwrap()
}

/// The fixture's first case, a chat prompt (prose, code, an emoji, chat
/// markers), cut to 511 tokens.
fn prompt(tok: &Tokenizer, doc: &Value) -> String {
    let mut text = doc["cases"][0]["text"].as_str().unwrap().to_owned();
    while tok.encode(&text, true).len() > 511 {
        text.pop();
    }
    text
}

fn bench(c: &mut Criterion) {
    let doc = fixture();
    let mut tok = subset_tokenizer(&doc);
    let text = prompt(&tok, &doc);
    eprintln!(
        "prompt: {} bytes, {} tokens",
        text.len(),
        tok.encode(&text, true).len()
    );
    c.bench_function("encode_511_tokens_cached", |b| {
        b.iter(|| tok.encode(black_box(&text), true))
    });
    tok.set_cache_capacity(0);
    c.bench_function("encode_511_tokens_uncached", |b| {
        b.iter(|| tok.encode(black_box(&text), true))
    });
    if let Ok(path) = std::env::var("QWEN3_TOKENIZER_GGUF") {
        let file = GgufFile::open(path).unwrap();
        let t0 = std::time::Instant::now();
        let mut full = Tokenizer::from_gguf(&file.gguf()).unwrap();
        eprintln!("full vocabulary built in {:?}", t0.elapsed());
        assert_eq!(full.encode(&text, true), tok.encode(&text, true));
        c.bench_function("full_vocab_encode_511_tokens_cached", |b| {
            b.iter(|| full.encode(black_box(&text), true))
        });
        full.set_cache_capacity(0);
        c.bench_function("full_vocab_encode_511_tokens_uncached", |b| {
            b.iter(|| full.encode(black_box(&text), true))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
