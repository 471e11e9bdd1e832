//! Replays every file in `tests/model_regressions/`: model files that once
//! made the `model_load` fuzz target fail, and hand-made hostile ones.
//!
//! * `NAME.ok.gguf` must load, and a session on it must prefill and decode
//!   a few tokens with both cache types.
//! * `NAME--SUBJECT.err.gguf` must be refused with a [`ModelError`] whose
//!   message names `SUBJECT`, the metadata key or tensor at fault.
//!
//! Nothing may panic. To add a finding, write the model file the fuzz
//! input produced (run the target on the artifact with
//! `MODEL_LOAD_WRITE=path`) here under a descriptive name with the expected
//! outcome. The test fails when the directory is missing or holds no case.
#![cfg(not(feature = "loom"))]

mod common;

use std::path::{Path, PathBuf};

use common::{tokens, Edit};
use inferno_cpu::backend::Simd;
use inferno_cpu::gguf::{GgmlType, GgufFile, Value};
use inferno_cpu::model::{
    argmax, KvDtype, ModelError, Qwen3, Qwen3Config, Session, SessionOptions,
};
use inferno_cpu::synth::{FileType, SynthConfig};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/model_regressions")
}

/// Loads the file; on success runs a few forward steps.
fn replay(path: &Path) -> Result<(), ModelError> {
    let file = GgufFile::read(path)?;
    let gguf = file.gguf();
    let model = Qwen3::load(&gguf)?;
    let vocab = model.config.vocab;
    for kv in [KvDtype::F16, KvDtype::F32] {
        let opts = SessionOptions {
            max_positions: 4,
            kv,
            ..SessionOptions::default()
        };
        let mut s = Session::new(&model, Simd, opts)?;
        let mut token = argmax(s.prefill(&[0, (vocab as u32 - 1).min(1)])?);
        for _ in 0..2 {
            let logits = s.decode(token)?;
            assert_eq!(logits.len(), vocab);
            token = argmax(logits);
        }
        assert!(matches!(
            s.decode(token),
            Err(ModelError::ContextFull { .. })
        ));
    }
    Ok(())
}

#[test]
fn every_regression_file_gives_its_expected_outcome() {
    let entries = std::fs::read_dir(dir()).unwrap_or_else(|e| panic!("{}: {e}", dir().display()));
    let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    paths.sort();
    let mut count = 0;
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".ok.gguf") {
            if let Err(e) = replay(&path) {
                panic!("{stem}: expected to load and run, got {e}");
            }
        } else if let Some(stem) = name.strip_suffix(".err.gguf") {
            let (_, subject) = stem
                .split_once("--")
                .unwrap_or_else(|| panic!("{name}: name the key or tensor after `--`"));
            match replay(&path) {
                Ok(()) => panic!("{name}: loaded, expected an error naming {subject}"),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains(subject), "{name}: {msg}");
                }
            }
        } else {
            continue;
        }
        count += 1;
    }
    assert!(count > 0, "no regression files in {}", dir().display());
}

/// A small base for the hand-made files: one layer, one head, the
/// smallest vocabulary, no merges (a few kilobytes).
fn small() -> Edit {
    let cfg = SynthConfig {
        model: Qwen3Config {
            vocab: 300,
            hidden: 32,
            layers: 1,
            ffn: 64,
            heads: 1,
            kv_heads: 1,
            head_dim: 32,
            rope_base: 1e6,
            rms_eps: 1e-6,
            context: 64,
        },
        tied: true,
        file_type: FileType::Q8_0,
    };
    Edit::synth(&cfg)
        .remove("tokenizer.ggml.merges")
        .remove("tokenizer.ggml.token_type")
}

/// Writes the hand-made hostile files of the directory (run with
/// `--ignored` after changing them); the replay test above checks them.
#[test]
#[ignore = "regenerates tests/model_regressions/hostile-*.gguf"]
fn write_hostile_files() {
    let q8 = |blocks: usize| vec![0u8; 34 * blocks];
    let ints = [
        ("qwen3.embedding_length", Value::U8(32)),
        ("qwen3.block_count", Value::I8(1)),
        ("qwen3.feed_forward_length", Value::I16(64)),
        ("qwen3.attention.head_count", Value::U64(1)),
        ("qwen3.attention.head_count_kv", Value::I64(1)),
        ("qwen3.attention.key_length", Value::U16(32)),
        ("qwen3.attention.value_length", Value::I32(32)),
        ("qwen3.context_length", Value::U64(64)),
    ];
    let mut other_ints = small();
    for (k, v) in ints {
        other_ints = other_ints.set(k, v);
    }
    let cases: Vec<(&str, Edit)> = vec![
        ("hostile-base", small()),
        ("hostile-int-keys-of-other-types", other_ints),
        (
            "hostile-f32-output-weight",
            small().tensor(
                "output.weight",
                GgmlType::F32,
                &[32, 300],
                vec![0u8; 4 * 32 * 300],
            ),
        ),
        (
            "hostile-zero-heads--qwen3.attention.head_count",
            small().set("qwen3.attention.head_count", Value::U32(0)),
        ),
        (
            "hostile-huge-heads--qwen3.attention.head_count",
            small().set("qwen3.attention.head_count", Value::U64(1 << 40)),
        ),
        (
            "hostile-kv-heads-exceed-heads--qwen3.attention.head_count_kv",
            small().set("qwen3.attention.head_count_kv", Value::U32(2)),
        ),
        (
            "hostile-head-dim-vs-k--blk.0.attn_k.weight",
            small()
                .set("qwen3.attention.head_count", Value::U32(2))
                .set("qwen3.attention.key_length", Value::U32(16))
                .set("qwen3.attention.value_length", Value::U32(16)),
        ),
        (
            "hostile-vocab-size--qwen3.vocab_size",
            small().set("qwen3.vocab_size", Value::U32(299)),
        ),
        (
            "hostile-token-list--tokenizer.ggml.tokens",
            small().set("tokenizer.ggml.tokens", tokens(301)),
        ),
        (
            "hostile-missing-layer--blk.1.attn_norm.weight",
            small().set("qwen3.block_count", Value::U32(2)),
        ),
        (
            "hostile-zero-context--qwen3.context_length",
            small().set("qwen3.context_length", Value::U32(0)),
        ),
        (
            "hostile-nan-rope--qwen3.rope.freq_base",
            small().set("qwen3.rope.freq_base", Value::F32(f32::NAN)),
        ),
        (
            "hostile-negative-eps--qwen3.attention.layer_norm_rms_epsilon",
            small().set("qwen3.attention.layer_norm_rms_epsilon", Value::F64(-1e-6)),
        ),
        (
            "hostile-q5_0-projection--blk.0.attn_q.weight",
            small().tensor(
                "blk.0.attn_q.weight",
                GgmlType::Q5_0,
                &[32, 32],
                vec![0u8; 22 * 32],
            ),
        ),
        (
            // Q4_0 weights run: all-0xFF blocks (NaN scales, every nibble
            // 15) load and decode without a panic.
            "hostile-q4_0-projection",
            small().tensor(
                "blk.0.attn_q.weight",
                GgmlType::Q4_0,
                &[32, 32],
                vec![0xFFu8; 18 * 32],
            ),
        ),
        (
            "hostile-output-shape--output.weight",
            small().tensor("output.weight", GgmlType::Q8_0, &[32, 299], q8(299)),
        ),
        (
            "hostile-removed-key--qwen3.feed_forward_length",
            small().remove("qwen3.feed_forward_length"),
        ),
    ];
    for (name, e) in cases {
        let ext = if name.contains("--") { "err" } else { "ok" };
        std::fs::write(dir().join(format!("{name}.{ext}.gguf")), e.bytes()).unwrap();
    }
}
