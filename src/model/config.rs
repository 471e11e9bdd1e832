//! The hyperparameters of a Qwen3 model, read from GGUF metadata.

use crate::gguf::{Gguf, GgufError, Metadata, Value, ValueType};
use crate::quant::QK8_0;

use super::layout::keys;
use super::ModelError;

/// Largest dimension accepted for any size read from metadata. Real Qwen3
/// sizes are far below it; the cap keeps every product of two sizes well
/// inside `usize` on 64-bit targets and rejects absurd values early.
const MAX_DIM: u64 = 1 << 24;

/// The shape of a Qwen3 model: everything the forward pass needs that is
/// not a weight.
///
/// Built by [`Qwen3Config::from_gguf`] from the `qwen3.*` metadata keys
/// that llama.cpp's converter writes. The vocabulary size comes from the
/// token embedding's shape, since that is what the forward pass indexes.
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen3Config {
    /// Tokens in the vocabulary (rows of `token_embd.weight`).
    pub vocab: usize,
    /// Width of the residual stream (`qwen3.embedding_length`).
    pub hidden: usize,
    /// Transformer blocks (`qwen3.block_count`).
    pub layers: usize,
    /// Width of the MLP (`qwen3.feed_forward_length`).
    pub ffn: usize,
    /// Query heads (`qwen3.attention.head_count`).
    pub heads: usize,
    /// Key/value heads (`qwen3.attention.head_count_kv`), dividing `heads`.
    pub kv_heads: usize,
    /// Width of one head (`qwen3.attention.key_length`, equal to
    /// `value_length`).
    pub head_dim: usize,
    /// RoPE base frequency (`qwen3.rope.freq_base`).
    pub rope_base: f32,
    /// RMSNorm epsilon (`qwen3.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Context length the model was trained for (`qwen3.context_length`).
    pub context: usize,
}

impl Qwen3Config {
    /// Reads and checks the configuration of a Qwen3 GGUF file.
    ///
    /// Optional keys take the GGUF specification's defaults:
    /// `head_count_kv` defaults to `head_count`, `key_length` and
    /// `value_length` each to `embedding_length / head_count` (so a file
    /// that states `key_length` 128 but not `value_length`, where
    /// `embedding_length / head_count` is 64, is refused rather than
    /// guessed). `rope.freq_base` is required: the specification defines
    /// no default, and every Qwen3 uses a base (1e6) far from the 10000
    /// other engines fall back to, so a guess would give wrong logits
    /// without an error.
    ///
    /// # Errors
    ///
    /// [`ModelError::Architecture`] unless `general.architecture` is
    /// `qwen3`; [`ModelError::Gguf`] for a missing key (`rope.freq_base`
    /// included) or one of a
    /// non-numeric type; [`ModelError::InvalidValue`] for a value out of
    /// range or inconsistent with another (zero sizes, `head_count_kv` not
    /// dividing `head_count`, an odd head width, widths that are not whole
    /// Q8_0 blocks, a non-finite or non-positive epsilon or RoPE base, a
    /// `qwen3.vocab_size` or a `tokenizer.ggml.tokens` list that disagrees
    /// with the embedding's row count);
    /// [`ModelError::TensorShape`] if `token_embd.weight` is not
    /// `[embedding_length, vocab]`.
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<Self, ModelError> {
        let meta = gguf.metadata();
        let arch = meta.get_str(keys::ARCHITECTURE)?;
        if arch != "qwen3" {
            return Err(ModelError::Architecture {
                found: arch.to_string(),
            });
        }
        let hidden = dim(meta, keys::EMBEDDING_LENGTH)?;
        let layers = dim(meta, keys::BLOCK_COUNT)?;
        let ffn = dim(meta, keys::FEED_FORWARD_LENGTH)?;
        let heads = dim(meta, keys::HEAD_COUNT)?;
        let kv_heads = optional_dim(meta, keys::HEAD_COUNT_KV)?.unwrap_or(heads);
        // Without `key_length` the head width is derived from the head
        // count, so an unusable width is that key's fault.
        let (head_dim, hd_key) = match optional_dim(meta, keys::KEY_LENGTH)? {
            Some(d) => (d, keys::KEY_LENGTH),
            None => (hidden / heads, keys::HEAD_COUNT),
        };
        let v_dim = optional_dim(meta, keys::VALUE_LENGTH)?.unwrap_or(hidden / heads);
        let context = dim(meta, keys::CONTEXT_LENGTH)?;
        let required = |key: &str| {
            optional_float(meta, key)?.ok_or_else(|| {
                ModelError::from(GgufError::KeyNotFound {
                    key: key.to_string(),
                })
            })
        };
        let rope_base = required(keys::ROPE_FREQ_BASE)?;
        let rms_eps = required(keys::RMS_EPSILON)?;

        let embd = gguf.tensor("token_embd.weight")?;
        let vocab = match embd.dims.as_slice() {
            [cols, rows] if *cols == hidden as u64 && (1..=MAX_DIM * 64).contains(rows) => {
                *rows as usize
            }
            _ => {
                return Err(ModelError::TensorShape {
                    tensor: embd.name.clone(),
                    expected: vec![hidden as u64, embd.dims.last().copied().unwrap_or(0)],
                    found: embd.dims.clone(),
                    why: "embedding_length x vocabulary".to_string(),
                })
            }
        };
        let config = Self {
            vocab,
            hidden,
            layers,
            ffn,
            heads,
            kv_heads,
            head_dim,
            rope_base,
            rms_eps,
            context,
        };
        config.check(hd_key)?;
        if v_dim != head_dim {
            return Err(ModelError::invalid(
                keys::VALUE_LENGTH,
                format!("value width {v_dim} differs from key width {head_dim}"),
            ));
        }
        check_vocab(meta, keys::VOCAB_SIZE, vocab)?;
        Ok(config)
    }

    /// Checks that the forward pass can run this configuration: every size
    /// in `1..=2^24` (the vocabulary up to `2^30`), key/value heads
    /// dividing the query heads, an even head width, the widths that feed
    /// a Q8_0 product (`hidden`, `ffn`, `heads * head_dim`) in whole
    /// 32-value blocks, and a finite RoPE base above 1 and epsilon above 0.
    /// [`from_gguf`](Self::from_gguf) runs it on what it reads; `synth`
    /// runs it before writing a file.
    ///
    /// # Errors
    ///
    /// [`ModelError::InvalidValue`] naming the metadata key of the first
    /// value at fault.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.check(keys::KEY_LENGTH)
    }

    /// [`validate`](Self::validate), blaming an unusable head width on
    /// `hd_key`.
    fn check(&self, hd_key: &str) -> Result<(), ModelError> {
        for (key, v) in [
            (keys::EMBEDDING_LENGTH, self.hidden),
            (keys::BLOCK_COUNT, self.layers),
            (keys::FEED_FORWARD_LENGTH, self.ffn),
            (keys::HEAD_COUNT, self.heads),
            (keys::HEAD_COUNT_KV, self.kv_heads),
            (hd_key, self.head_dim),
            (keys::CONTEXT_LENGTH, self.context),
        ] {
            if !(1..=MAX_DIM as usize).contains(&v) {
                return Err(ModelError::invalid(
                    key,
                    format!("{v} is outside the accepted range 1..={MAX_DIM}"),
                ));
            }
        }
        if !(1..=(MAX_DIM * 64) as usize).contains(&self.vocab) {
            return Err(ModelError::invalid(
                keys::VOCAB_SIZE,
                format!("{} tokens is outside 1..={}", self.vocab, MAX_DIM * 64),
            ));
        }
        let (heads, kv_heads, head_dim) = (self.heads, self.kv_heads, self.head_dim);
        if kv_heads > heads || !heads.is_multiple_of(kv_heads) {
            return Err(ModelError::invalid(
                keys::HEAD_COUNT_KV,
                format!("{kv_heads} key/value heads must divide the {heads} query heads"),
            ));
        }
        if !head_dim.is_multiple_of(2) {
            return Err(ModelError::invalid(
                hd_key,
                format!("head width {head_dim} must be even and nonzero (RoPE rotates pairs)"),
            ));
        }
        for (k, v) in [
            (keys::EMBEDDING_LENGTH, self.hidden),
            (keys::FEED_FORWARD_LENGTH, self.ffn),
        ] {
            if !v.is_multiple_of(QK8_0) {
                return Err(ModelError::invalid(
                    k,
                    format!("{v} is not a multiple of the Q8_0 block size {QK8_0}"),
                ));
            }
        }
        // The attention output (heads * head_dim values) is the input of a
        // Q8_0 product, so it must be whole blocks too.
        if !(heads * head_dim).is_multiple_of(QK8_0) {
            return Err(ModelError::invalid(
                hd_key,
                format!(
                    "{heads} heads x {head_dim} = {} is not a multiple of the Q8_0 block size {QK8_0}",
                    heads * head_dim
                ),
            ));
        }
        if !(self.rope_base.is_finite() && self.rope_base > 1.0) {
            return Err(ModelError::invalid(
                keys::ROPE_FREQ_BASE,
                format!("{} is not a finite base above 1", self.rope_base),
            ));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps > 0.0) {
            return Err(ModelError::invalid(
                keys::RMS_EPSILON,
                format!("{} is not a finite positive epsilon", self.rms_eps),
            ));
        }
        Ok(())
    }

    /// Width of all query heads together (`heads * head_dim`).
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of all key (or value) heads together (`kv_heads * head_dim`).
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}

/// Key of the tokenizer's vocabulary, one string per token id.
const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

/// The vocabulary the metadata states (`vocab_size`, and the tokenizer's
/// token list), where it states one, must be the embedding's row count:
/// otherwise the tokenizer produces ids the embedding has no row for, or
/// the logits name tokens the tokenizer cannot decode.
fn check_vocab(meta: &Metadata, size_key: &str, vocab: usize) -> Result<(), ModelError> {
    if let Some(n) = optional_int(meta, size_key)? {
        if n != vocab as i128 {
            return Err(ModelError::invalid(
                size_key,
                format!("{n} differs from the {vocab} rows of token_embd.weight"),
            ));
        }
    }
    match meta.get(TOKENS_KEY) {
        None => Ok(()),
        Some(Value::Array(tokens)) if tokens.element_type() == ValueType::String => {
            if tokens.len() != vocab {
                return Err(ModelError::invalid(
                    TOKENS_KEY,
                    format!(
                        "{} tokens, but token_embd.weight has {vocab} rows",
                        tokens.len()
                    ),
                ));
            }
            Ok(())
        }
        Some(other) => Err(ModelError::invalid(
            TOKENS_KEY,
            format!(
                "expected an array of strings, found {}",
                match other {
                    Value::Array(a) => format!("an array of {}", a.element_type()),
                    v => v.value_type().to_string(),
                }
            ),
        )),
    }
}

/// A size: a required non-negative integer in `1..=MAX_DIM`.
fn dim(meta: &Metadata, key: &str) -> Result<usize, ModelError> {
    optional_dim(meta, key)?.ok_or_else(|| {
        GgufError::KeyNotFound {
            key: key.to_string(),
        }
        .into()
    })
}

/// A size if the key is present. Any integer type is accepted (writers
/// differ: llama.cpp writes `u32`, some tools `u64` or `i32`).
fn optional_dim(meta: &Metadata, key: &str) -> Result<Option<usize>, ModelError> {
    let Some(n) = optional_int(meta, key)? else {
        return Ok(None);
    };
    if !(1..=i128::from(MAX_DIM)).contains(&n) {
        return Err(ModelError::invalid(
            key,
            format!("{n} is outside the accepted range 1..={MAX_DIM}"),
        ));
    }
    // In range, so it fits in usize (MAX_DIM < 2^32).
    Ok(Some(n as usize))
}

/// An integer of any integer type if the key is present.
fn optional_int(meta: &Metadata, key: &str) -> Result<Option<i128>, ModelError> {
    Ok(meta.get(key).map(|_| meta.get_int(key)).transpose()?)
}

/// A float if the key is present, as `f32` or `f64`.
fn optional_float(meta: &Metadata, key: &str) -> Result<Option<f32>, ModelError> {
    match meta.get(key) {
        None => Ok(None),
        Some(Value::F32(v)) => Ok(Some(*v)),
        Some(Value::F64(v)) => Ok(Some(*v as f32)),
        Some(other) => Err(GgufError::TypeMismatch {
            key: key.to_string(),
            expected: ValueType::F32,
            found: other.value_type(),
        }
        .into()),
    }
}
