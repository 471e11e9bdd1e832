use super::*;
use crate::gguf::{Array, GgmlType, Gguf, Value};
use crate::quant::QK8_0;

fn tiny_bytes(seed: u64) -> Vec<u8> {
    model_bytes(&SynthConfig::tiny(), seed).unwrap()
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = tiny_bytes(7);
    assert_eq!(a, tiny_bytes(7));
    assert_ne!(a, tiny_bytes(8));
}

#[test]
fn bytes_do_not_depend_on_the_thread_count() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let single = pool.install(|| tiny_bytes(3));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    assert_eq!(single, pool.install(|| tiny_bytes(3)));
}

/// `(name, type, dims)` of every tensor `cfg` should have, in order.
fn expected_tensors(cfg: &SynthConfig) -> Vec<(String, GgmlType, Vec<u64>)> {
    let (h, f, v) = (
        cfg.model.hidden as u64,
        cfg.model.ffn as u64,
        cfg.model.vocab as u64,
    );
    let q = (cfg.model.heads * cfg.model.head_dim) as u64;
    let kv = (cfg.model.kv_heads * cfg.model.head_dim) as u64;
    let hd = cfg.model.head_dim as u64;
    let mut out = vec![("token_embd.weight".to_owned(), GgmlType::Q8_0, vec![h, v])];
    for l in 0..cfg.model.layers {
        for (t, ty, dims) in [
            ("attn_norm", GgmlType::F32, vec![h]),
            ("attn_q", GgmlType::Q8_0, vec![h, q]),
            ("attn_k", GgmlType::Q8_0, vec![h, kv]),
            ("attn_v", GgmlType::Q8_0, vec![h, kv]),
            ("attn_output", GgmlType::Q8_0, vec![q, h]),
            ("attn_q_norm", GgmlType::F32, vec![hd]),
            ("attn_k_norm", GgmlType::F32, vec![hd]),
            ("ffn_norm", GgmlType::F32, vec![h]),
            ("ffn_gate", GgmlType::Q8_0, vec![h, f]),
            ("ffn_up", GgmlType::Q8_0, vec![h, f]),
            ("ffn_down", GgmlType::Q8_0, vec![f, h]),
        ] {
            out.push((format!("blk.{l}.{t}.weight"), ty, dims));
        }
    }
    out.push(("output_norm.weight".to_owned(), GgmlType::F32, vec![h]));
    if !cfg.tied {
        out.push(("output.weight".to_owned(), GgmlType::Q8_0, vec![h, v]));
    }
    out
}

fn check_tensors(cfg: &SynthConfig, gguf: &Gguf<'_>) {
    let expected = expected_tensors(cfg);
    assert_eq!(gguf.tensors().len(), expected.len());
    for (t, (name, ty, dims)) in gguf.tensors().iter().zip(&expected) {
        assert_eq!(&t.name, name);
        assert_eq!(t.ggml_type, *ty, "{name}");
        assert_eq!(&t.dims, dims, "{name}");
    }
}

#[test]
fn tiny_model_has_the_qwen3_layout() {
    let cfg = SynthConfig::tiny();
    let bytes = tiny_bytes(7);
    let gguf = Gguf::parse(&bytes).unwrap();
    check_tensors(&cfg, &gguf);
    assert!(gguf.tensor("output.weight").is_err());
    let u32_key = |k: &str| match gguf.get(k) {
        Some(Value::U32(v)) => *v,
        other => panic!("{k}: {other:?}"),
    };
    assert_eq!(gguf.get_str("general.architecture").unwrap(), "qwen3");
    assert_eq!(u32_key("qwen3.context_length"), 4096);
    assert_eq!(u32_key("qwen3.embedding_length"), 128);
    assert_eq!(u32_key("qwen3.block_count"), 2);
    assert_eq!(u32_key("qwen3.feed_forward_length"), 384);
    assert_eq!(u32_key("qwen3.attention.head_count"), 4);
    assert_eq!(u32_key("qwen3.attention.head_count_kv"), 2);
    assert_eq!(u32_key("qwen3.attention.key_length"), 32);
    assert_eq!(u32_key("qwen3.attention.value_length"), 32);
    assert_eq!(u32_key("general.file_type"), 7);
    assert_eq!(u32_key("general.quantization_version"), 2);
    assert_eq!(u32_key("tokenizer.ggml.bos_token_id"), 480);
    assert_eq!(u32_key("tokenizer.ggml.eos_token_id"), 482);
    assert_eq!(u32_key("tokenizer.ggml.padding_token_id"), 480);
    assert_eq!(
        gguf.get("qwen3.rope.freq_base"),
        Some(&Value::F32(1_000_000.0))
    );
    assert_eq!(
        gguf.get("qwen3.attention.layer_norm_rms_epsilon"),
        Some(&Value::F32(1e-6))
    );
    assert_eq!(gguf.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(gguf.get_str("tokenizer.ggml.pre").unwrap(), "qwen2");
    assert_eq!(
        gguf.get("tokenizer.ggml.add_bos_token"),
        Some(&Value::Bool(false))
    );
    let v = vocab(512, 7);
    match gguf.get("tokenizer.ggml.tokens") {
        Some(Value::Array(Array::String(t))) => assert_eq!(t, &v.tokens),
        other => panic!("tokens: {other:?}"),
    }
    match gguf.get("tokenizer.ggml.token_type") {
        Some(Value::Array(Array::I32(t))) => assert_eq!(t, &v.types),
        other => panic!("types: {other:?}"),
    }
    match gguf.get("tokenizer.ggml.merges") {
        Some(Value::Array(Array::String(m))) => assert_eq!(m, &v.merges),
        other => panic!("merges: {other:?}"),
    }
}

/// The crate's tiny reference model (`tests/fixtures`, written by the
/// `gguf` Python package) has the same keys in the same order, and the same tensors.
#[test]
fn tiny_model_matches_the_reference_fixture_layout() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/qwen3-tiny-s7.gguf"
    );
    let fixture = std::fs::read(path).expect("the fixture ships with the crate");
    let fixture = Gguf::parse(&fixture).unwrap();
    let bytes = tiny_bytes(7);
    let ours = Gguf::parse(&bytes).unwrap();
    let keys =
        |g: &Gguf<'_>| -> Vec<String> { g.metadata().iter().map(|(k, _)| k.to_owned()).collect() };
    assert_eq!(keys(&ours), keys(&fixture));
    for (a, b) in ours.tensors().iter().zip(fixture.tensors()) {
        assert_eq!(
            (&a.name, a.ggml_type, &a.dims),
            (&b.name, b.ggml_type, &b.dims)
        );
    }
    assert_eq!(ours.tensors().len(), fixture.tensors().len());
}

#[test]
fn weights_and_norms_have_the_intended_scale() {
    let bytes = tiny_bytes(1);
    let gguf = Gguf::parse(&bytes).unwrap();
    let q = gguf.tensor_q8_0("blk.0.ffn_up.weight").unwrap();
    let weights: Vec<f32> = q
        .iter()
        .flat_map(|b| {
            let d = b.scale_f32();
            b.qs.map(|x| d * f32::from(x))
        })
        .collect();
    assert_eq!(weights.len(), 128 * 384);
    let n = weights.len() as f64;
    let var = weights.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / n;
    assert!((var.sqrt() - 0.02).abs() < 0.001, "std {}", var.sqrt());
    let norm = gguf.tensor_f32("blk.1.attn_q_norm.weight").unwrap();
    assert!(norm.iter().all(|&x| (0.7..1.3).contains(&x)));
    assert!(norm.iter().any(|&x| x != norm[0]));
    // Distinct rows and tensors draw from distinct streams.
    let k = gguf.tensor_q8_0("blk.0.attn_k.weight").unwrap();
    let v = gguf.tensor_q8_0("blk.0.attn_v.weight").unwrap();
    assert_ne!(k, v);
    let per_row = 128 / QK8_0;
    assert_ne!(k[..per_row], k[per_row..2 * per_row]);
}

#[test]
fn untied_model_has_an_output_matrix() {
    let mut cfg = SynthConfig::tiny();
    (cfg.tied, cfg.model.layers) = (false, 1);
    let bytes = model_bytes(&cfg, 0).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    check_tensors(&cfg, &gguf);
    assert_ne!(
        gguf.tensor_q8_0("output.weight").unwrap(),
        gguf.tensor_q8_0("token_embd.weight").unwrap()
    );
    assert_eq!(
        gguf.get_str("general.size_label").unwrap(),
        "custom",
        "only presets are labelled by name"
    );
}

#[test]
fn progress_reaches_the_total_and_model_len_predicts_it() {
    let cfg = SynthConfig::tiny();
    let mut calls = Vec::new();
    let mut out = Vec::new();
    let n = write_model(&cfg, 5, &mut out, |done, total| calls.push((done, total))).unwrap();
    assert_eq!(n, out.len() as u64);
    assert_eq!(model::model_len(&cfg, 5).unwrap(), n);
    assert!(calls.len() > 20);
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(calls.iter().all(|&(_, total)| total == n));
    assert_eq!(calls.last().map(|c| c.0), Some(n));
}

#[test]
fn presets_are_valid_and_named() {
    assert_eq!(SynthConfig::by_name("tiny"), Some(SynthConfig::tiny()));
    assert_eq!(
        SynthConfig::by_name("0.6b"),
        Some(SynthConfig::qwen3_0_6b())
    );
    assert_eq!(SynthConfig::by_name("7b"), None);
    SynthConfig::tiny().validate().unwrap();
    let big = SynthConfig::qwen3_0_6b();
    big.validate().unwrap();
    assert_eq!(
        (
            big.model.vocab,
            big.model.hidden,
            big.model.layers,
            big.model.ffn
        ),
        (151_936, 1024, 28, 3072)
    );
    assert_eq!(
        (big.model.heads, big.model.kv_heads, big.model.head_dim),
        (16, 8, 128)
    );
    assert_eq!((big.model.context, big.tied), (40_960, true));
}

#[test]
fn invalid_configs_are_refused_before_writing() {
    let bad = |f: fn(&mut SynthConfig)| {
        let mut cfg = SynthConfig::tiny();
        f(&mut cfg);
        let mut out = Vec::new();
        let err = write_model(&cfg, 0, &mut out, |_, _| {}).unwrap_err();
        assert!(out.is_empty());
        match err {
            SynthError::Config(e) => e,
            e => panic!("{e}"),
        }
    };
    let key_of = |e: ConfigError| match e {
        ConfigError::Invalid { key, .. } => key,
        e => panic!("{e}"),
    };
    assert_eq!(
        key_of(bad(|c| c.model.hidden = 100)),
        "qwen3.embedding_length"
    );
    assert_eq!(
        key_of(bad(|c| c.model.ffn = 390)),
        "qwen3.feed_forward_length"
    );
    assert_eq!(
        key_of(bad(|c| c.model.head_dim = 20)),
        "qwen3.attention.key_length"
    );
    assert_eq!(key_of(bad(|c| c.model.layers = 0)), "qwen3.block_count");
    assert_eq!(
        key_of(bad(|c| c.model.kv_heads = 3)),
        "qwen3.attention.head_count_kv"
    );
    assert!(matches!(
        bad(|c| c.model.vocab = 100),
        ConfigError::Vocab { .. }
    ));
    assert_eq!(
        key_of(bad(|c| c.model.rms_eps = f32::NAN)),
        "qwen3.attention.layer_norm_rms_epsilon"
    );
    assert_eq!(
        key_of(bad(|c| c.model.rope_base = -1.0)),
        "qwen3.rope.freq_base"
    );
    assert_eq!(
        key_of(bad(|c| {
            c.model.heads = 1;
            c.model.kv_heads = 1;
            c.model.head_dim = 33 * 32 + 1;
        })),
        "qwen3.attention.key_length"
    );
    assert_eq!(
        key_of(bad(|c| c.model.context = usize::MAX)),
        "qwen3.context_length"
    );
}

#[test]
fn odd_head_width_is_refused() {
    let mut cfg = SynthConfig::tiny();
    let m = &mut cfg.model;
    (m.heads, m.kv_heads, m.head_dim, m.hidden) = (32, 32, 3, 96);
    assert!(matches!(
        cfg.validate(),
        Err(ConfigError::Invalid { key, reason })
            if key == "qwen3.attention.key_length" && reason.contains("even")
    ));
}

/// A Q4_0 file stores its embedding as Q6_K: a hidden width that is not
/// whole 256-weight blocks is refused up front (naming the key), not when
/// the writer meets the embedding; its other widths need only Q4_0's 32.
#[test]
fn q4_0_needs_a_hidden_width_of_whole_k_blocks() {
    let mut cfg = SynthConfig::small().with_file_type(FileType::Q4_0);
    cfg.model.hidden = 64;
    assert!(matches!(
        cfg.validate(),
        Err(ConfigError::Invalid { key, .. }) if key == "qwen3.embedding_length"
    ));
    assert!(model_bytes(&cfg, 1).is_err());
    let mut cfg = SynthConfig::small().with_file_type(FileType::Q4_0);
    cfg.model.ffn = 96;
    cfg.validate().unwrap();
    model_bytes(&cfg, 1).unwrap();
}

/// A scratch directory under the system's temporary directory, removed on
/// drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("inferno-synth-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn model_file_is_replaced_whole_and_leaves_no_temp_file() {
    let dir = Scratch::new("file");
    let path = dir.0.join("m.gguf");
    std::fs::write(&path, b"old").unwrap();
    // A reader holding the old file keeps its contents.
    let old = std::fs::File::open(&path).unwrap();
    write_model_file(&SynthConfig::tiny(), 2, &path, |_, _| {}).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), tiny_bytes(2));
    let mut held = Vec::new();
    std::io::Read::read_to_end(&mut &old, &mut held).unwrap();
    assert_eq!(held, b"old");
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["m.gguf"]);
}

#[test]
fn model_file_error_names_the_path() {
    let dir = Scratch::new("missing");
    let path = dir.0.join("no-such-dir").join("m.gguf");
    match write_model_file(&SynthConfig::tiny(), 0, &path, |_, _| {}) {
        Err(SynthError::Io { path: p, .. }) => {
            assert!(p.starts_with(dir.0.join("no-such-dir")), "{}", p.display());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn cache_file_names_carry_config_seed_and_version() {
    assert_eq!(
        model_file_name("0.6b", FileType::Q8_0, 0),
        "qwen3-0.6b-synth-s0-v1.gguf"
    );
    assert_eq!(
        model_file_name("tiny", FileType::Q8_0, 42),
        "qwen3-tiny-synth-s42-v1.gguf"
    );
    assert_eq!(
        model_file_name("0.6b", FileType::Q4KM, 0),
        "qwen3-0.6b-q4_k_m-synth-s0-v1.gguf"
    );
}

/// Environment variables are process-wide, so every test that sets one is
/// this single test.
#[test]
fn cached_model_is_written_once_and_reused() {
    let dir = Scratch::new("cache");
    let cache = dir.0.join("c");
    // No other test reads INFERNO_CACHE.
    std::env::set_var("INFERNO_CACHE", &cache);
    assert_eq!(default_cache_dir(), Some(cache.clone()));
    assert!(matches!(
        cached_model("huge", FileType::Q8_0, 0, |_, _| {}),
        Err(SynthError::UnknownConfig { .. })
    ));
    let mut writes = 0;
    let path = cached_model("tiny", FileType::Q8_0, 9, |_, _| writes += 1).unwrap();
    assert!(writes > 0);
    assert_eq!(path, cache.join("qwen3-tiny-synth-s9-v1.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), tiny_bytes(9));
    let mut again = 0;
    assert_eq!(
        cached_model("tiny", FileType::Q8_0, 9, |_, _| again += 1).unwrap(),
        path
    );
    assert_eq!(again, 0, "a complete file is reused");
    // A truncated file is rewritten.
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() / 2]).unwrap();
    cached_model("tiny", FileType::Q8_0, 9, |_, _| again += 1).unwrap();
    assert!(again > 0);
    assert_eq!(std::fs::read(&path).unwrap(), full);
    std::env::remove_var("INFERNO_CACHE");
}
