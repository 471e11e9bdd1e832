//! Synthetic Qwen3 models: deterministic, seeded GGUF files with the real
//! architecture, shapes, metadata and tokenizer layout, and random weights.
//!
//! Loaders, kernels and benchmarks need a model file of the real size and
//! layout, yet real weights are large, licensed and not always at hand. A
//! synthetic model is written in seconds from a config and a seed, is the
//! same byte for byte every time, and is a valid file for llama.cpp too:
//!
//! * tensors have llama.cpp's `qwen3` names and shapes; 2-D weights are
//!   Q8_0 (Gaussian, std 0.02), norm weights F32 near 1;
//! * metadata has the keys llama.cpp reads for `qwen3`;
//! * the vocabulary is a consistent byte-level BPE with Qwen3's added
//!   tokens ([`vocab()`]).
//!
//! ```
//! use inferno_cpu::gguf::Gguf;
//! use inferno_cpu::synth::{model_bytes, SynthConfig};
//!
//! let bytes = model_bytes(&SynthConfig::tiny(), 7)?;
//! let gguf = Gguf::parse(&bytes)?;
//! assert_eq!(gguf.get_str("general.architecture")?, "qwen3");
//! assert_eq!(gguf.tensor("blk.1.ffn_down.weight")?.dims, [384, 128]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`cached_model`] writes a configuration's file once into a per-user
//! cache directory and reuses it afterwards.

mod file;
mod ftype;
mod model;
mod rng;
pub mod vocab;

use std::path::PathBuf;

use thiserror::Error;

use crate::gguf::WriteError;
use crate::model::layout::keys;
use crate::model::{ModelError, Qwen3Config};
use crate::quant::QuantError;

pub use file::{cached_model, default_cache_dir, model_file_name, write_model_file};
pub use ftype::{FileType, UnknownFileType};
pub use model::{model_bytes, write_model};
pub use rng::SplitMix64;
pub use vocab::{vocab, Vocab};

/// Version of the generated file's contents, part of cached file names: it
/// changes whenever a change to this module changes the bytes written for
/// a config and seed, so a stale cached file is never taken for a new one.
pub const FORMAT_VERSION: u32 = 1;

/// Largest vocabulary accepted: the tokenizer's own bound (16 Mi ids, far
/// past any real model), so every synthetic vocabulary loads, and its
/// generation time and memory stay bounded.
pub use crate::tokenizer::MAX_VOCAB;

/// The shape of a synthetic Qwen3 model.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthConfig {
    /// The hyperparameters written to the file (its `vocab` is also the
    /// size of the synthetic tokenizer's vocabulary).
    pub model: Qwen3Config,
    /// Whether the output projection reuses the token embedding (no
    /// `output.weight` tensor).
    pub tied: bool,
    /// The weights' storage types.
    pub file_type: FileType,
}

/// Why a [`SynthConfig`] cannot be written.
#[derive(Clone, Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The hyperparameters fail [`Qwen3Config::validate`]: the forward
    /// pass could not run them.
    #[error("`{key}`: {reason}")]
    Invalid {
        /// The metadata key of the value at fault.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A vocabulary without room for the byte and added tokens, or past
    /// [`MAX_VOCAB`].
    #[error("vocab = {value} is outside {min}..={max}")]
    Vocab {
        /// The value.
        value: usize,
        /// Smallest accepted.
        min: usize,
        /// Largest accepted.
        max: usize,
    },
}

/// Why a synthetic model could not be written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SynthError {
    /// The configuration is invalid.
    #[error("invalid synthetic model config: {0}")]
    Config(#[from] ConfigError),
    /// No configuration has this name.
    #[error("unknown synthetic model config `{name}` (known: tiny, 0.6b)")]
    UnknownConfig {
        /// The name given.
        name: String,
    },
    /// No cache directory: neither `INFERNO_CACHE` nor the platform's
    /// cache location is set.
    #[error("no cache directory: set INFERNO_CACHE")]
    NoCacheDir,
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The GGUF writer refused the model or its sink failed.
    #[error("writing the model: {0}")]
    Write(#[from] WriteError),
    /// Quantization refused a row: not reachable for a validated config,
    /// whose row lengths are whole blocks.
    #[error("quantizing the model: {0}")]
    Quant(#[from] QuantError),
}

impl SynthConfig {
    /// A tiny 2-layer model (vocab 512, hidden 128, ffn 384, 4 query and 2
    /// key/value heads of 32): about 0.5 MB, written in milliseconds, for
    /// tests. Same shapes as the repository's tiny reference model.
    pub fn tiny() -> Self {
        Self {
            model: Qwen3Config {
                vocab: 512,
                hidden: 128,
                layers: 2,
                ffn: 384,
                heads: 4,
                kv_heads: 2,
                head_dim: 32,
                rope_base: 1e6,
                rms_eps: 1e-6,
                context: 4096,
            },
            tied: true,
            file_type: FileType::Q8_0,
        }
    }

    /// A small 2-layer model whose widths are whole K-quant blocks (vocab
    /// 512, hidden 256, ffn 768, 4 query and 2 key/value heads of 64):
    /// about 2 MB in Q8_0, the smallest shape every [`FileType`] can
    /// store, for tests of the quantized types.
    pub fn small() -> Self {
        Self {
            model: Qwen3Config {
                vocab: 512,
                hidden: 256,
                layers: 2,
                ffn: 768,
                heads: 4,
                kv_heads: 2,
                head_dim: 64,
                rope_base: 1e6,
                rms_eps: 1e-6,
                context: 4096,
            },
            tied: true,
            file_type: FileType::Q8_0,
        }
    }

    /// Qwen3-0.6B's exact shapes: vocab 151936, hidden 1024, 28 layers,
    /// ffn 3072, 16 query and 8 key/value heads of 128, RoPE base 1e6,
    /// epsilon 1e-6, context 40960, tied embeddings (about 640 MB in Q8_0).
    pub fn qwen3_0_6b() -> Self {
        Self {
            model: Qwen3Config {
                vocab: 151_936,
                hidden: 1024,
                layers: 28,
                ffn: 3072,
                heads: 16,
                kv_heads: 8,
                head_dim: 128,
                rope_base: 1e6,
                rms_eps: 1e-6,
                context: 40_960,
            },
            tied: true,
            file_type: FileType::Q8_0,
        }
    }

    /// This configuration with its weights stored as `file_type`.
    pub fn with_file_type(self, file_type: FileType) -> Self {
        Self { file_type, ..self }
    }

    /// The named configuration: `"tiny"`, `"small"` or `"0.6b"`.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "tiny" => Some(Self::tiny()),
            "small" => Some(Self::small()),
            "0.6b" => Some(Self::qwen3_0_6b()),
            _ => None,
        }
    }

    /// The size label written to `general.size_label`: the preset's name,
    /// or `custom`.
    fn label(&self) -> String {
        let plain = self.clone().with_file_type(FileType::Q8_0);
        if plain == Self::tiny() {
            "tiny".into()
        } else if plain == Self::small() {
            "small".into()
        } else if plain == Self::qwen3_0_6b() {
            "0.6B".into()
        } else {
            "custom".into()
        }
    }

    /// Checks that the model can be written and run: the
    /// hyperparameters pass [`Qwen3Config::validate`] (the loader's own
    /// check), and the vocabulary is within
    /// [`MIN_VOCAB`](vocab::MIN_VOCAB)`..=`[`MAX_VOCAB`], room for the
    /// synthetic tokenizer's byte and added tokens.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.model.validate().map_err(|e| match e {
            ModelError::InvalidValue { key, reason } => ConfigError::Invalid { key, reason },
            other => ConfigError::Invalid {
                key: String::new(),
                reason: other.to_string(),
            },
        })?;
        // A Q4_0 file stores its embedding (and output projection) as
        // Q6_K, whose rows are `hidden` wide: only that width needs blocks
        // of 256 there.
        let k_widths = if self.file_type.has_k_quants() {
            3
        } else if self.file_type == FileType::Q4_0 {
            1
        } else {
            0
        };
        {
            let m = &self.model;
            for (key, cols) in [
                (keys::EMBEDDING_LENGTH, m.hidden),
                (keys::FEED_FORWARD_LENGTH, m.ffn),
                (keys::HEAD_COUNT, m.q_dim()),
            ]
            .into_iter()
            .take(k_widths)
            {
                if !cols.is_multiple_of(crate::quant::QK_K) {
                    return Err(ConfigError::Invalid {
                        key: key.to_string(),
                        reason: format!(
                            "{cols} columns is not a whole number of the {} file type's 256-weight blocks",
                            self.file_type
                        ),
                    });
                }
            }
        }
        if !(vocab::MIN_VOCAB..=MAX_VOCAB).contains(&self.model.vocab) {
            return Err(ConfigError::Vocab {
                value: self.model.vocab,
                min: vocab::MIN_VOCAB,
                max: MAX_VOCAB,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
