//! The layout of a Qwen3 GGUF file, written once: its metadata keys, and
//! every tensor's name and shape as a function of the configuration.
//!
//! The loader checks files against it, `synth` writes files from it, and
//! the benches and the fuzz target build their models from it, so a name
//! or a shape cannot differ between them.

use crate::gguf::{WriteError, Writer};

use super::Qwen3Config;

/// The metadata keys of the Qwen3 hyperparameters, as llama.cpp's
/// converter writes them.
pub mod keys {
    /// `"qwen3"` for every file this crate runs.
    pub const ARCHITECTURE: &str = "general.architecture";
    /// Width of the residual stream.
    pub const EMBEDDING_LENGTH: &str = "qwen3.embedding_length";
    /// Transformer blocks.
    pub const BLOCK_COUNT: &str = "qwen3.block_count";
    /// Width of the MLP.
    pub const FEED_FORWARD_LENGTH: &str = "qwen3.feed_forward_length";
    /// Query heads.
    pub const HEAD_COUNT: &str = "qwen3.attention.head_count";
    /// Key/value heads (optional: defaults to the query heads).
    pub const HEAD_COUNT_KV: &str = "qwen3.attention.head_count_kv";
    /// Width of a key head (optional: `embedding_length / head_count`).
    pub const KEY_LENGTH: &str = "qwen3.attention.key_length";
    /// Width of a value head (optional: `embedding_length / head_count`).
    pub const VALUE_LENGTH: &str = "qwen3.attention.value_length";
    /// Context length the model was trained for.
    pub const CONTEXT_LENGTH: &str = "qwen3.context_length";
    /// RoPE base frequency (required).
    pub const ROPE_FREQ_BASE: &str = "qwen3.rope.freq_base";
    /// RMSNorm epsilon.
    pub const RMS_EPSILON: &str = "qwen3.attention.layer_norm_rms_epsilon";
    /// Vocabulary size (optional; checked against the embedding).
    pub const VOCAB_SIZE: &str = "qwen3.vocab_size";
}

/// What a tensor is, in a layer or around the layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// `token_embd.weight`: `vocab` rows of `hidden`.
    Embedding,
    /// `blk.N.attn_norm.weight`: `hidden`.
    AttnNorm,
    /// `blk.N.attn_q.weight`: `heads * head_dim` rows of `hidden`.
    Q,
    /// `blk.N.attn_k.weight`: `kv_heads * head_dim` rows of `hidden`.
    K,
    /// `blk.N.attn_v.weight`: `kv_heads * head_dim` rows of `hidden`.
    V,
    /// `blk.N.attn_output.weight`: `hidden` rows of `heads * head_dim`.
    Output,
    /// `blk.N.attn_q_norm.weight`: `head_dim`.
    QNorm,
    /// `blk.N.attn_k_norm.weight`: `head_dim`.
    KNorm,
    /// `blk.N.ffn_norm.weight`: `hidden`.
    FfnNorm,
    /// `blk.N.ffn_gate.weight`: `ffn` rows of `hidden`.
    Gate,
    /// `blk.N.ffn_up.weight`: `ffn` rows of `hidden`.
    Up,
    /// `blk.N.ffn_down.weight`: `hidden` rows of `ffn`.
    Down,
    /// `output_norm.weight`: `hidden`.
    OutputNorm,
    /// `output.weight`: `vocab` rows of `hidden` (absent when tied to the
    /// embedding).
    LmHead,
}

impl Role {
    /// A layer's tensors, in the order llama.cpp's converter writes them.
    pub const LAYER: [Role; 11] = [
        Role::AttnNorm,
        Role::Q,
        Role::K,
        Role::V,
        Role::Output,
        Role::QNorm,
        Role::KNorm,
        Role::FfnNorm,
        Role::Gate,
        Role::Up,
        Role::Down,
    ];

    /// A layer's seven matrices, in the order a decode step reads them.
    pub const PROJECTIONS: [Role; 7] = [
        Role::Q,
        Role::K,
        Role::V,
        Role::Output,
        Role::Gate,
        Role::Up,
        Role::Down,
    ];

    /// The name's stem (`attn_q`), as in `blk.N.attn_q.weight`.
    pub fn stem(self) -> &'static str {
        match self {
            Role::Embedding => "token_embd",
            Role::AttnNorm => "attn_norm",
            Role::Q => "attn_q",
            Role::K => "attn_k",
            Role::V => "attn_v",
            Role::Output => "attn_output",
            Role::QNorm => "attn_q_norm",
            Role::KNorm => "attn_k_norm",
            Role::FfnNorm => "ffn_norm",
            Role::Gate => "ffn_gate",
            Role::Up => "ffn_up",
            Role::Down => "ffn_down",
            Role::OutputNorm => "output_norm",
            Role::LmHead => "output",
        }
    }

    /// Whether this is a layer's tensor (named `blk.N.*`).
    pub fn in_layer(self) -> bool {
        Role::LAYER.contains(&self)
    }

    /// The tensor's name: `blk.{layer}.{stem}.weight` in a layer (the
    /// `layer` is ignored otherwise).
    pub fn name(self, layer: usize) -> String {
        if self.in_layer() {
            format!("blk.{layer}.{}.weight", self.stem())
        } else {
            format!("{}.weight", self.stem())
        }
    }
}

/// A tensor's shape: a vector, or `rows` rows of `cols` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A 1-D weight (the norms).
    Vector(usize),
    /// A matrix; GGUF lists its dimensions as `[cols, rows]`.
    Matrix {
        /// Output width.
        rows: usize,
        /// Input width.
        cols: usize,
    },
}

impl Shape {
    /// The dimensions as a GGUF tensor table lists them (innermost first).
    pub fn gguf_dims(self) -> Vec<u64> {
        match self {
            Shape::Vector(n) => vec![n as u64],
            Shape::Matrix { rows, cols } => vec![cols as u64, rows as u64],
        }
    }

    /// Values the tensor holds.
    pub fn len(self) -> usize {
        match self {
            Shape::Vector(n) => n,
            Shape::Matrix { rows, cols } => rows * cols,
        }
    }

    /// Whether the tensor holds no values.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// One tensor of a Qwen3 file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// What it is.
    pub role: Role,
    /// Its layer, for a layer's tensor.
    pub layer: Option<usize>,
    /// Its name in the file.
    pub name: String,
    /// Its shape.
    pub shape: Shape,
    /// The metadata keys its shape comes from, for error messages.
    pub why: &'static str,
}

impl Qwen3Config {
    /// The shape of the tensor `role`, and which keys it comes from.
    pub fn shape_of(&self, role: Role) -> (Shape, &'static str) {
        let (h, q, kv, f, hd) = (
            self.hidden,
            self.q_dim(),
            self.kv_dim(),
            self.ffn,
            self.head_dim,
        );
        let m = |rows, cols| Shape::Matrix { rows, cols };
        match role {
            Role::Embedding | Role::LmHead => (m(self.vocab, h), "vocabulary by embedding_length"),
            Role::AttnNorm | Role::FfnNorm | Role::OutputNorm => {
                (Shape::Vector(h), "embedding_length")
            }
            Role::QNorm | Role::KNorm => (Shape::Vector(hd), "key_length"),
            Role::Q => (m(q, h), "head_count x key_length by embedding_length"),
            Role::K => (m(kv, h), "head_count_kv x key_length by embedding_length"),
            Role::V => (m(kv, h), "head_count_kv x value_length by embedding_length"),
            Role::Output => (m(h, q), "embedding_length by head_count x key_length"),
            Role::Gate | Role::Up => (m(f, h), "feed_forward_length by embedding_length"),
            Role::Down => (m(h, f), "embedding_length by feed_forward_length"),
        }
    }

    /// The tensor `role` of layer `layer` (ignored outside the layers).
    pub fn tensor(&self, role: Role, layer: usize) -> TensorSpec {
        let (shape, why) = self.shape_of(role);
        TensorSpec {
            role,
            layer: role.in_layer().then_some(layer),
            name: role.name(layer),
            shape,
            why,
        }
    }

    /// Every tensor of a file of this configuration, in the order
    /// llama.cpp's converter writes them; `output.weight` only if the
    /// output projection is not `tied` to the embedding.
    pub fn tensors(&self, tied: bool) -> Vec<TensorSpec> {
        let mut all = vec![self.tensor(Role::Embedding, 0)];
        for l in 0..self.layers {
            all.extend(Role::LAYER.map(|r| self.tensor(r, l)));
        }
        all.push(self.tensor(Role::OutputNorm, 0));
        if !tied {
            all.push(self.tensor(Role::LmHead, 0));
        }
        all
    }

    /// Writes the hyperparameter keys (`qwen3.*`) as llama.cpp's converter
    /// does: sizes as `u32`, the two floats as `f32`. The file also needs
    /// [`keys::ARCHITECTURE`] set to `"qwen3"`, which writers put first.
    /// The configuration should be [`validate`](Self::validate)d: its
    /// sizes then fit in `u32` (a larger one would be written as
    /// `u32::MAX`).
    ///
    /// # Errors
    ///
    /// [`WriteError::DuplicateKey`] if one of the keys is already written.
    pub fn write_metadata(&self, w: &mut Writer<'_>) -> Result<(), WriteError> {
        for (key, value) in [
            (keys::CONTEXT_LENGTH, self.context),
            (keys::EMBEDDING_LENGTH, self.hidden),
            (keys::BLOCK_COUNT, self.layers),
            (keys::FEED_FORWARD_LENGTH, self.ffn),
            (keys::HEAD_COUNT, self.heads),
            (keys::HEAD_COUNT_KV, self.kv_heads),
            (keys::KEY_LENGTH, self.head_dim),
            (keys::VALUE_LENGTH, self.head_dim),
        ] {
            w.add_u32(key, u32::try_from(value).unwrap_or(u32::MAX))?;
        }
        w.add_f32(keys::ROPE_FREQ_BASE, self.rope_base)?
            .add_f32(keys::RMS_EPSILON, self.rms_eps)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_shapes_follow_the_config() {
        let c = crate::synth::SynthConfig::tiny().model;
        let t = c.tensors(true);
        assert_eq!(t.len(), 2 + 11 * c.layers);
        assert_eq!(t[0].name, "token_embd.weight");
        assert_eq!(t[2].name, "blk.0.attn_q.weight");
        assert_eq!(t[2].shape.gguf_dims(), [128, 128]);
        assert_eq!(
            t[3].shape,
            Shape::Matrix {
                rows: 64,
                cols: 128
            }
        );
        assert_eq!(t.last().unwrap().name, "output_norm.weight");
        assert_eq!(c.tensors(false).last().unwrap().name, "output.weight");
        for r in Role::PROJECTIONS {
            assert!(matches!(c.shape_of(r).0, Shape::Matrix { .. }));
        }
    }
}
