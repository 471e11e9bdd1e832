//! Structure-aware model loading: start from a valid tiny Qwen3 file, apply
//! a list of edits the input describes to its metadata and tensor table
//! (keys set to boundary values in any integer or float type, keys of the
//! wrong type or removed, tensors removed, renamed, reshaped, retyped or
//! poisoned with NaN, an `output.weight` of any shape, and whole models
//! rebuilt with other but consistent shapes), write the result with the
//! GGUF writer and load it. Loading must give a `ModelError` or a model;
//! a model must then run a few forward steps without a panic.
#![no_main]

use std::sync::OnceLock;

use inferno_cpu::backend::Simd;
use inferno_cpu::gguf::{Array, GgmlType, Gguf, Value};
use inferno_cpu::model::layout::{keys, Role, Shape as LayoutShape};
use inferno_cpu::model::{KvDtype, ModelError, Qwen3, Qwen3Config, Session, SessionOptions};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

// The editable model file the model tests use too (`tests/common/mod.rs`).
#[path = "../../tests/support/model_file.rs"]
#[allow(dead_code)]
mod model_file;

use model_file::{tokens, Edit, Tensor};

/// Largest tensor (in bytes) an edit may create: keeps every execution
/// fast and keeps the fuzzer's own allocations far below the limit that
/// flags an allocation sized by the file.
const MAX_TENSOR_BYTES: u64 = 1 << 21;

const INT_KEYS: [&str; 9] = [
    keys::EMBEDDING_LENGTH,
    keys::VOCAB_SIZE,
    keys::BLOCK_COUNT,
    keys::FEED_FORWARD_LENGTH,
    keys::HEAD_COUNT,
    keys::HEAD_COUNT_KV,
    keys::KEY_LENGTH,
    keys::VALUE_LENGTH,
    keys::CONTEXT_LENGTH,
];
const FLOAT_KEYS: [&str; 2] = [keys::ROPE_FREQ_BASE, keys::RMS_EPSILON];
const ARCH: &str = keys::ARCHITECTURE;
const TOKENS: &str = "tokenizer.ggml.tokens";

const INTERESTING_INTS: [i128; 32] = [
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    16,
    31,
    32,
    33,
    64,
    96,
    128,
    256,
    384,
    511,
    512,
    513,
    4096,
    1 << 24,
    (1 << 24) + 1,
    1 << 30,
    1 << 31,
    u32::MAX as i128,
    1 << 32,
    i64::MAX as i128,
    u64::MAX as i128,
    -1,
    -4,
    i64::MIN as i128,
];

const INTERESTING_FLOATS: [f64; 20] = [
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    -1.0,
    1.0,
    0.5,
    1.000_000_1,
    1e-6,
    1e6,
    10_000.0,
    f32::MAX as f64,
    f32::MIN_POSITIVE as f64,
    1e-45,
    1e300,
    1e-300,
    -1e-6,
    2.0,
];

const GGML_TYPES: [GgmlType; 8] = [
    GgmlType::Q8_0,
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_K,
    GgmlType::I8,
    GgmlType::Q6_K,
];

/// An integer in any of the eight integer types (values that do not fit
/// wrap, which gives more boundary values).
fn int_value(u: &mut Unstructured<'_>, current: Option<i128>) -> Result<Value> {
    let n: i128 = match u.int_in_range(0..=5u8)? {
        0 | 1 => *u.choose(&INTERESTING_INTS)?,
        2 => current.unwrap_or(0) + i128::from(u.int_in_range(-2i8..=2)?),
        3 => current.unwrap_or(0) * 2,
        4 => current.unwrap_or(0) / 2,
        _ => i128::from(u.arbitrary::<i64>()?),
    };
    Ok(match u.int_in_range(0..=7u8)? {
        0 => Value::U8(n as u8),
        1 => Value::I8(n as i8),
        2 => Value::U16(n as u16),
        3 => Value::I16(n as i16),
        4 => Value::U32(n as u32),
        5 => Value::I32(n as i32),
        6 => Value::U64(n as u64),
        _ => Value::I64(n as i64),
    })
}

fn float_value(u: &mut Unstructured<'_>) -> Result<Value> {
    let x = if u.arbitrary()? {
        *u.choose(&INTERESTING_FLOATS)?
    } else {
        f64::from(f32::from_bits(u.arbitrary()?))
    };
    Ok(if u.arbitrary()? {
        Value::F32(x as f32)
    } else {
        Value::F64(x)
    })
}

/// A value of a type no size or float key may have.
fn wrong_value(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => Value::String("128".into()),
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Array(Array::U64(vec![128])),
        3 => Value::Array(Array::F32(vec![])),
        4 => Value::F32(128.0),
        _ => Value::F64(1e-6),
    })
}

/// Bytes of a tensor of `ty` and `dims`, if the writer accepts the shape
/// and it is small enough to build.
fn size_of(ty: GgmlType, dims: &[u64]) -> Option<usize> {
    if dims.is_empty() || dims.len() > 4 || dims.contains(&0) {
        return None;
    }
    if !dims[0].is_multiple_of(ty.block_size()) {
        return None;
    }
    let n = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d))?;
    let bytes = ty.bytes_for(n)?;
    (bytes <= MAX_TENSOR_BYTES).then_some(bytes as usize)
}

/// Plausible data for a tensor: small finite values for the float types
/// and Q8_0 (so the forward pass computes numbers, not only NaNs), a byte
/// pattern for the others.
fn fill(ty: GgmlType, len: usize, seed: u8) -> Vec<u8> {
    let mut state = 0x9e37_79b9u32 ^ u32::from(seed);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut out = Vec::with_capacity(len);
    match ty {
        GgmlType::F32 => {
            while out.len() < len {
                let v = (next() % 2001) as f32 / 1000.0 - 1.0;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        GgmlType::F16 | GgmlType::BF16 => {
            while out.len() < len {
                let v = (next() % 2001) as f32 / 1000.0 - 1.0;
                let bits = if ty == GgmlType::F16 {
                    half::f16::from_f32(v).to_bits()
                } else {
                    half::bf16::from_f32(v).to_bits()
                };
                out.extend_from_slice(&bits.to_le_bytes());
            }
        }
        GgmlType::Q8_0 => {
            while out.len() < len {
                out.extend_from_slice(&half::f16::from_f32(0.01).to_bits().to_le_bytes());
                for _ in 0..32 {
                    out.push(next() as u8);
                }
            }
        }
        _ => {
            while out.len() < len {
                out.push(next() as u8);
            }
        }
    }
    out.truncate(len);
    out
}

/// The shapes of a consistent model to rebuild.
struct Shape {
    vocab: u64,
    hidden: u64,
    layers: u64,
    ffn: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    norm: GgmlType,
    embd: GgmlType,
    /// The projections' type: a K-quant needs widths of whole 256-blocks,
    /// which only some shapes have (the others are typed errors).
    proj: GgmlType,
    output: Option<GgmlType>,
}

fn shape(u: &mut Unstructured<'_>) -> Result<Shape> {
    let hidden = 32 * u.int_in_range(1..=16u64)?;
    let head_dim = 2 * u.int_in_range(1..=64u64)?;
    // heads * head_dim must be whole Q8_0 blocks (and small).
    let unit = 32 / gcd(32, head_dim);
    let heads = unit * u.int_in_range(1..=(512 / (unit * head_dim)).max(1))?;
    let divisors: Vec<u64> = (1..=heads).filter(|d| heads % d == 0).collect();
    let kv_heads = *u.choose(&divisors)?;
    let floats = [GgmlType::F32, GgmlType::F16, GgmlType::BF16];
    let embd_types = [
        GgmlType::Q8_0,
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ];
    Ok(Shape {
        vocab: *u.choose(&[1u64, 2, 3, 17, 100, 511, 512, 513, 1000])?,
        hidden,
        layers: u.int_in_range(1..=3u64)?,
        ffn: 32 * u.int_in_range(1..=24u64)?,
        heads,
        kv_heads,
        head_dim,
        norm: *u.choose(&floats)?,
        proj: *u.choose(&[
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ])?,
        embd: *u.choose(&embd_types)?,
        output: if u.arbitrary()? {
            Some(*u.choose(&embd_types)?)
        } else {
            None
        },
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The fuzz target's own edits of the shared editable file.
impl Edit {
    fn get_int(&self, key: &str) -> Option<i128> {
        self.get(key).and_then(Value::as_int)
    }

    /// Replaces (or adds) a tensor filled with [`fill`]'s data, if
    /// [`size_of`] accepts its type and shape.
    fn put_filled(&mut self, name: &str, ty: GgmlType, dims: &[u64], seed: u8) {
        let Some(len) = size_of(ty, dims) else { return };
        self.put_tensor(name, ty, dims, fill(ty, len, seed));
    }

    /// Replaces every weight and size key by those of a consistent model
    /// of other shapes.
    fn rebuild(&mut self, s: &Shape, seed: u8) {
        self.tensors.clear();
        self.put(TOKENS, tokens(s.vocab));
        let cfg = Qwen3Config {
            vocab: s.vocab as usize,
            hidden: s.hidden as usize,
            layers: s.layers as usize,
            ffn: s.ffn as usize,
            heads: s.heads as usize,
            kv_heads: s.kv_heads as usize,
            head_dim: s.head_dim as usize,
            rope_base: 1e6,
            rms_eps: 1e-6,
            context: 64,
        };
        for (k, v) in [
            (keys::EMBEDDING_LENGTH, cfg.hidden),
            (keys::BLOCK_COUNT, cfg.layers),
            (keys::FEED_FORWARD_LENGTH, cfg.ffn),
            (keys::HEAD_COUNT, cfg.heads),
            (keys::HEAD_COUNT_KV, cfg.kv_heads),
            (keys::KEY_LENGTH, cfg.head_dim),
            (keys::VALUE_LENGTH, cfg.head_dim),
        ] {
            self.put(k, Value::U32(v as u32));
        }
        let mut n = seed;
        for t in cfg.tensors(s.output.is_none()) {
            let ty = match (t.role, t.shape) {
                (Role::Embedding, _) => s.embd,
                (Role::LmHead, _) => s.output.unwrap_or(s.embd),
                (_, LayoutShape::Vector(_)) => s.norm,
                _ => s.proj,
            };
            n = n.wrapping_add(1);
            self.put_filled(&t.name, ty, &t.shape.gguf_dims(), n);
        }
    }

    /// One edit of the metadata or the tensor table.
    fn edit(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        match u.int_in_range(0..=14u8)? {
            // A size key set to a boundary value, in any integer type.
            0 | 1 => {
                let key = *u.choose(&INT_KEYS)?;
                let v = int_value(u, self.get_int(key))?;
                self.put(key, v);
            }
            // A float key set to NaN, infinity, zero, a negative, ...
            2 => {
                let key = *u.choose(&FLOAT_KEYS)?;
                let v = float_value(u)?;
                self.put(key, v);
            }
            // A key of the wrong type.
            3 => {
                let keys: Vec<&str> = INT_KEYS.iter().chain(&FLOAT_KEYS).copied().collect();
                let key = *u.choose(&keys)?;
                let v = if key == ARCH {
                    Value::U32(3)
                } else {
                    wrong_value(u)?
                };
                self.put(key, v);
            }
            // A key removed.
            4 => {
                if !self.meta.is_empty() {
                    let i = u.choose_index(self.meta.len())?;
                    self.meta.remove(i);
                }
            }
            // A tensor removed.
            5 => {
                if !self.tensors.is_empty() {
                    let i = u.choose_index(self.tensors.len())?;
                    self.tensors.remove(i);
                }
            }
            // A tensor stored in another type (same shape where the type's
            // blocks allow it).
            6 => {
                if self.tensors.is_empty() {
                    return Ok(());
                }
                let i = u.choose_index(self.tensors.len())?;
                let ty = *u.choose(&GGML_TYPES)?;
                let mut dims = self.tensors[i].2.clone();
                let bs = ty.block_size();
                dims[0] = dims[0].div_ceil(bs) * bs;
                let name = self.tensors[i].0.clone();
                self.put_filled(&name, ty, &dims, i as u8);
            }
            // A tensor reshaped.
            7 => {
                if self.tensors.is_empty() {
                    return Ok(());
                }
                let i = u.choose_index(self.tensors.len())?;
                let (name, ty, mut dims) = {
                    let t = &self.tensors[i];
                    (t.0.clone(), t.1, t.2.clone())
                };
                match u.int_in_range(0..=4u8)? {
                    0 => dims.reverse(),
                    1 => dims.push(1),
                    2 => {
                        if dims.len() > 1 {
                            dims.pop();
                        }
                    }
                    3 => {
                        let d = u.choose_index(dims.len())?;
                        dims[d] = *u.choose(&[1u64, 2, 16, 32, 64, 96, 127, 256, 384, 513])?;
                    }
                    _ => {
                        let d = u.choose_index(dims.len())?;
                        dims[d] = dims[d].saturating_mul(2);
                    }
                }
                self.put_filled(&name, ty, &dims, i as u8);
            }
            // An output projection of any type and shape.
            8 => {
                let h = self.get_int("qwen3.embedding_length").unwrap_or(128) as u64;
                let dims: &[u64] = match u.int_in_range(0..=5u8)? {
                    0 => &[h, 512],
                    1 => &[h, 100],
                    2 => &[512, h],
                    3 => &[h, 512, 1],
                    4 => &[h.saturating_mul(2), 512],
                    _ => &[h],
                };
                let dims = dims.to_vec();
                let ty = *u.choose(&GGML_TYPES)?;
                self.put_filled("output.weight", ty, &dims, 99);
            }
            // A tensor renamed to another layer (or another tensor).
            9 => {
                if self.tensors.is_empty() {
                    return Ok(());
                }
                let i = u.choose_index(self.tensors.len())?;
                let to = match u.int_in_range(0..=2u8)? {
                    0 => {
                        let layer = u.int_in_range(0..=4u8)?;
                        let old = &self.tensors[i].0;
                        match old.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
                            Some((_, rest)) => format!("blk.{layer}.{rest}"),
                            None => return Ok(()),
                        }
                    }
                    1 => "output.weight".to_string(),
                    _ => "token_embd.weight".to_string(),
                };
                if self.tensors.iter().all(|t| t.0 != to) {
                    self.tensors[i].0 = to;
                }
            }
            // NaN, infinity or garbage written into a tensor's data.
            10 => {
                if self.tensors.is_empty() {
                    return Ok(());
                }
                let i = u.choose_index(self.tensors.len())?;
                let data = &mut self.tensors[i].3;
                if data.is_empty() {
                    return Ok(());
                }
                let at = u.choose_index(data.len())?;
                let pattern: &[u8] = match u.int_in_range(0..=3u8)? {
                    0 => &f32::NAN.to_le_bytes(),
                    1 => &f32::INFINITY.to_le_bytes(),
                    2 => &[0x00, 0x7c],
                    _ => &[0xff, 0xff, 0xff, 0xff],
                };
                let end = (at + pattern.len()).min(data.len());
                data[at..end].copy_from_slice(&pattern[..end - at]);
            }
            // A consistent model of other shapes.
            11 => {
                let s = shape(u)?;
                self.rebuild(&s, u.arbitrary()?);
            }
            // A token list of another length or type than the vocabulary.
            13 => {
                let rows = self
                    .tensors
                    .iter()
                    .find(|t| t.0 == "token_embd.weight")
                    .and_then(|t| t.2.get(1).copied())
                    .unwrap_or(512)
                    .min(4096);
                let v = match u.int_in_range(0..=4u8)? {
                    0 => tokens(rows.saturating_sub(1)),
                    1 => tokens(rows + 1),
                    2 => tokens(0),
                    3 => Value::Array(Array::U32(vec![0; rows as usize % 1024])),
                    _ => Value::String("tokens".into()),
                };
                self.put(TOKENS, v);
            }
            // Another architecture.
            12 => {
                let arch = *u.choose(&["llama", "", "Qwen3", "qwen3\0", "qwen2"])?;
                self.put(ARCH, Value::String(arch.into()));
            }
            // Layers added (copies of a layer present) or removed, with or
            // without block_count following.
            _ => {
                let n = u.int_in_range(0..=4u64)?;
                let src: Vec<Tensor> = self
                    .tensors
                    .iter()
                    .filter(|t| t.0.starts_with("blk.0."))
                    .cloned()
                    .collect();
                self.tensors.retain(|t| {
                    t.0.strip_prefix("blk.")
                        .and_then(|r| r.split_once('.'))
                        .and_then(|(l, _)| l.parse::<u64>().ok())
                        .is_none_or(|l| l < n)
                });
                for l in 1..n {
                    for t in &src {
                        let name = t.0.replacen("blk.0.", &format!("blk.{l}."), 1);
                        if self.tensors.iter().all(|x| x.0 != name) {
                            self.tensors.push((name, t.1, t.2.clone(), t.3.clone()));
                        }
                    }
                }
                if u.arbitrary()? {
                    self.put("qwen3.block_count", Value::U32(n as u32));
                }
            }
        }
        Ok(())
    }
}

/// What every accepted model must satisfy, whatever the file said.
fn check_model(gguf: &Gguf<'_>, model: &Qwen3<'_>) {
    let c = &model.config;
    assert!(c.heads > 0 && c.kv_heads > 0 && c.head_dim > 0);
    assert!(c.heads % c.kv_heads == 0, "{c:?}");
    assert!(c.head_dim % 2 == 0, "{c:?}");
    assert!(c.q_dim() % 32 == 0 && c.hidden % 32 == 0 && c.ffn % 32 == 0);
    assert!(c.rope_base.is_finite() && c.rope_base > 1.0);
    assert!(c.rms_eps.is_finite() && c.rms_eps > 0.0);
    assert!(c.context > 0);
    assert_eq!(model.weights.layers.len(), c.layers);
    let embd = gguf
        .tensor("token_embd.weight")
        .expect("loaded model has one");
    assert_eq!(embd.dims, [c.hidden as u64, c.vocab as u64]);
    let lm = model.weights.lm_head();
    assert_eq!((lm.rows(), lm.cols()), (c.vocab, c.hidden));
    std::hint::black_box(model.weights.bytes_per_token());
}

/// A couple of forward steps: every step gives logits of the vocabulary's
/// length or a typed error, never a panic.
fn run(model: &Qwen3<'_>, u: &mut Unstructured<'_>) {
    let opts = SessionOptions {
        max_positions: u.int_in_range(0..=4usize).unwrap_or(3),
        kv: if u.arbitrary().unwrap_or(false) {
            KvDtype::F32
        } else {
            KvDtype::F16
        },
        huge_pages: u.arbitrary().unwrap_or(false),
    };
    if opts.max_positions == 0 && model.config.context > 64 {
        // The default capacity (up to 4096 positions) is fine but slow here.
        return;
    }
    let mut s = match Session::new(model, Simd, opts) {
        Ok(s) => s,
        Err(ModelError::Options(_)) => return,
        Err(e) => panic!("session: {e}"),
    };
    let vocab = model.config.vocab;
    let first = u.arbitrary::<u16>().unwrap_or(0) as u32 % vocab as u32;
    let mut token = if u.arbitrary().unwrap_or(false) {
        match s.prefill(&[first, (first + 1) % vocab as u32]) {
            Ok(l) => {
                assert_eq!(l.len(), vocab);
                inferno_cpu::model::argmax(l)
            }
            Err(ModelError::ContextFull { .. }) => first,
            Err(e) => panic!("prefill: {e}"),
        }
    } else {
        first
    };
    for _ in 0..2 {
        match s.decode(token) {
            Ok(l) => {
                assert_eq!(l.len(), vocab);
                token = inferno_cpu::model::argmax(l);
                assert!((token as usize) < vocab);
            }
            Err(ModelError::ContextFull { .. }) => break,
            Err(e) => panic!("decode: {e}"),
        }
    }
    assert!(matches!(
        s.decode(vocab as u32),
        Err(ModelError::TokenOutOfRange { .. })
    ));
}

fn write_to() -> Option<&'static std::path::Path> {
    static PATH: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os("MODEL_LOAD_WRITE").map(Into::into))
        .as_deref()
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut model = Edit::tiny();
    let Ok(n) = u.int_in_range(0..=8u8) else {
        return;
    };
    for _ in 0..n {
        if model.edit(&mut u).is_err() {
            break;
        }
    }
    let Ok(bytes) = model.try_bytes() else { return };
    if let Some(path) = write_to() {
        // Replaying an artifact with MODEL_LOAD_WRITE=path keeps the model
        // file it produced, for tests/model_regressions/.
        std::fs::write(path, &bytes).expect("MODEL_LOAD_WRITE is writable");
    }
    inferno_cpu_fuzz::with_aligned(&bytes, |bytes| {
        let gguf = Gguf::parse(bytes).expect("writer output parses");
        match Qwen3::load(&gguf) {
            Ok(m) => {
                check_model(&gguf, &m);
                run(&m, &mut u);
            }
            Err(e) => {
                // Every error renders (and names what it concerns).
                assert!(!e.to_string().is_empty());
            }
        }
    });
});
