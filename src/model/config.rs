//! The hyperparameters of a Qwen3 model, read from GGUF metadata.

use crate::gguf::{Gguf, GgufError, Metadata, Value, ValueType};
use crate::quant::QK8_0;

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
        let arch = meta.get_str("general.architecture")?;
        if arch != "qwen3" {
            return Err(ModelError::Architecture {
                found: arch.to_string(),
            });
        }
        let key = |k: &str| format!("qwen3.{k}");
        let hidden = dim(meta, &key("embedding_length"))?;
        let layers = dim(meta, &key("block_count"))?;
        let ffn = dim(meta, &key("feed_forward_length"))?;
        let heads = dim(meta, &key("attention.head_count"))?;
        let kv_key = key("attention.head_count_kv");
        let kv_heads = optional_dim(meta, &kv_key)?.unwrap_or(heads);
        // Without `key_length` the head width is derived from the head
        // count, so an unusable width is that key's fault.
        let k_key = key("attention.key_length");
        let (head_dim, hd_key) = match optional_dim(meta, &k_key)? {
            Some(d) => (d, k_key.clone()),
            None => (hidden / heads, key("attention.head_count")),
        };
        let v_key = key("attention.value_length");
        let v_dim = optional_dim(meta, &v_key)?.unwrap_or(hidden / heads);
        let context = dim(meta, &key("context_length"))?;
        let rope_key = key("rope.freq_base");
        let rope_base = optional_float(meta, &rope_key)?.ok_or_else(|| GgufError::KeyNotFound {
            key: rope_key.clone(),
        })?;
        let eps_key = key("attention.layer_norm_rms_epsilon");
        let rms_eps = optional_float(meta, &eps_key)?.ok_or_else(|| GgufError::KeyNotFound {
            key: eps_key.clone(),
        })?;

        if kv_heads > heads || !heads.is_multiple_of(kv_heads) {
            return Err(ModelError::invalid(
                &kv_key,
                format!("{kv_heads} key/value heads must divide the {heads} query heads"),
            ));
        }
        if head_dim == 0 || !head_dim.is_multiple_of(2) {
            return Err(ModelError::invalid(
                &hd_key,
                format!("head width {head_dim} must be even and nonzero (RoPE rotates pairs)"),
            ));
        }
        if v_dim != head_dim {
            return Err(ModelError::invalid(
                &v_key,
                format!("value width {v_dim} differs from key width {head_dim}"),
            ));
        }
        for (k, v) in [
            (key("embedding_length"), hidden),
            (key("feed_forward_length"), ffn),
        ] {
            if !v.is_multiple_of(QK8_0) {
                return Err(ModelError::invalid(
                    &k,
                    format!("{v} is not a multiple of the Q8_0 block size {QK8_0}"),
                ));
            }
        }
        // The attention output (heads * head_dim values) is the input of a
        // Q8_0 product, so it must be whole blocks too.
        if !(heads * head_dim).is_multiple_of(QK8_0) {
            return Err(ModelError::invalid(
                &hd_key,
                format!(
                    "{heads} heads x {head_dim} = {} is not a multiple of the Q8_0 block size {QK8_0}",
                    heads * head_dim
                ),
            ));
        }
        if !(rope_base.is_finite() && rope_base > 1.0) {
            return Err(ModelError::invalid(
                &rope_key,
                format!("{rope_base} is not a finite base above 1"),
            ));
        }
        if !(rms_eps.is_finite() && rms_eps > 0.0) {
            return Err(ModelError::invalid(
                &eps_key,
                format!("{rms_eps} is not a finite positive epsilon"),
            ));
        }

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
        check_vocab(meta, &key("vocab_size"), vocab)?;
        Ok(Self {
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
        })
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
    let Some(value) = meta.get(key) else {
        return Ok(None);
    };
    let n: i128 = match *value {
        Value::U8(v) => v.into(),
        Value::I8(v) => v.into(),
        Value::U16(v) => v.into(),
        Value::I16(v) => v.into(),
        Value::U32(v) => v.into(),
        Value::I32(v) => v.into(),
        Value::U64(v) => v.into(),
        Value::I64(v) => v.into(),
        _ => {
            return Err(GgufError::TypeMismatch {
                key: key.to_string(),
                expected: ValueType::U32,
                found: value.value_type(),
            }
            .into())
        }
    };
    Ok(Some(n))
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
