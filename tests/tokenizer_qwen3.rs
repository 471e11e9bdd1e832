//! The tokenizer against Qwen3's own (Hugging Face `tokenizers`).
//!
//! `tests/fixtures/qwen3_tokenizer_cases.json` holds texts with the ids
//! Hugging Face gives them (`encode(text, add_special_tokens=False)`), and
//! the part of Qwen3's vocabulary and merges those texts can reach (every
//! token whose bytes occur in one of them; BPE only ever forms tokens that
//! are substrings of the piece it merges). Ids keep their real values; the
//! rest of the 151936 ids are unused placeholders. It is written by
//! `tests/fixtures/make_qwen3_cases.py` from Qwen3's `tokenizer.json`.

use std::path::PathBuf;

use inferno_cpu::gguf::GgufFile;
use inferno_cpu::tokenizer::{Tokenizer, TokenizerParts};
use serde_json::Value;

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3_tokenizer_cases.json")
}

fn load(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).expect("fixture present");
    serde_json::from_str(&text).expect("fixture is JSON")
}

fn cases(doc: &Value) -> Vec<(String, Vec<u32>)> {
    doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| {
            let text = c["text"].as_str().expect("text").to_owned();
            let ids = c["ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|v| v.as_u64().expect("id") as u32)
                .collect();
            (text, ids)
        })
        .collect()
}

/// Encodes every case; returns the number that match, printing the others.
fn compare(tok: &Tokenizer, cases: &[(String, Vec<u32>)]) -> usize {
    let mut ok = 0;
    for (text, expected) in cases {
        let got = tok.encode(text, true);
        if &got == expected {
            ok += 1;
        } else {
            eprintln!("MISMATCH {text:?}\n  expected {expected:?}\n  got      {got:?}");
        }
        // Whatever the ids, decoding gives the normalized text back.
        let back = tok.decode(&got).unwrap();
        assert_eq!(back, tok.normalize(text, true).as_bytes(), "{text:?}");
    }
    ok
}

fn subset_tokenizer(doc: &Value) -> Tokenizer {
    let n = doc["vocab_size"].as_u64().expect("vocab_size") as usize;
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut types = vec![5i32; n];
    for entry in doc["tokens"].as_array().expect("tokens") {
        let id = entry[0].as_u64().expect("id") as usize;
        tokens[id] = entry[1].as_str().expect("text").to_owned();
        types[id] = entry[2].as_i64().expect("type") as i32;
    }
    let merges = doc["merges"]
        .as_array()
        .expect("merges")
        .iter()
        .map(|m| m.as_str().expect("merge").to_owned())
        .collect();
    Tokenizer::from_parts(&TokenizerParts {
        pre: "qwen2".into(),
        tokens,
        token_types: types,
        merges,
        bos: Some(151643),
        eos: Some(151645),
        eot: None,
        pad: Some(151643),
    })
    .expect("the fixture builds")
}

#[test]
fn qwen3_vocabulary_subset_matches_hugging_face() {
    let doc = load(&fixture_path());
    let tok = subset_tokenizer(&doc);
    let cases = cases(&doc);
    assert!(cases.len() >= 200, "fixture has {} cases", cases.len());
    let ok = compare(&tok, &cases);
    assert_eq!(ok, cases.len(), "{ok} of {} cases match", cases.len());
    assert_eq!(tok.eot(), Some(151645));
    assert!(tok.is_end_of_generation(151645));
    assert!(tok.is_end_of_generation(151643));
    assert!(!tok.is_end_of_generation(151644));
}

/// The same texts (or `QWEN3_TOKENIZER_CASES`) on the whole vocabulary, read
/// from a GGUF file made by `make_qwen3_cases.py`.
#[test]
#[ignore = "needs Qwen3's full vocabulary: set QWEN3_TOKENIZER_GGUF (see tests/fixtures/make_qwen3_cases.py)"]
fn qwen3_full_vocabulary_matches_hugging_face() {
    let gguf_path = std::env::var("QWEN3_TOKENIZER_GGUF").expect("QWEN3_TOKENIZER_GGUF set");
    let cases_path = std::env::var("QWEN3_TOKENIZER_CASES")
        .map(PathBuf::from)
        .unwrap_or_else(|_| fixture_path());
    let file = GgufFile::open(&gguf_path).expect("GGUF opens");
    let t0 = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(&file.gguf()).expect("tokenizer builds");
    eprintln!("built in {:?}: {tok:?}", t0.elapsed());
    let cases = cases(&load(&cases_path));
    let ok = compare(&tok, &cases);
    eprintln!("{ok} of {} cases match Hugging Face", cases.len());
    assert_eq!(ok, cases.len());
}
