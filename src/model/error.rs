//! What can go wrong loading or running a model.

use thiserror::Error;

use crate::gguf::{GgmlType, GgufError};
use crate::matvec::ShapeError;
use crate::quant::QuantError;

/// Why a model could not be loaded, or a forward step could not run.
///
/// Loading reads numbers and shapes from a file a stranger may have
/// written, so every inconsistency is one of these variants, naming the
/// metadata key or tensor it concerns; nothing in the loader panics or
/// indexes out of bounds whatever the file says.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A GGUF-level problem: a missing key or tensor, a value of the wrong
    /// type (the error names the key or tensor).
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// `general.architecture` is not one this crate runs.
    #[error("unsupported architecture `{found}` (supported: qwen3)")]
    Architecture {
        /// The value of `general.architecture`.
        found: String,
    },
    /// A metadata value that is present but unusable.
    #[error("metadata key `{key}`: {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A tensor whose dimensions disagree with the configuration.
    #[error("tensor `{tensor}` has shape {found:?}, expected {expected:?} ({why})")]
    TensorShape {
        /// The tensor's name.
        tensor: String,
        /// The shape the configuration implies (GGML order, row length first).
        expected: Vec<u64>,
        /// The shape in the file.
        found: Vec<u64>,
        /// Which configuration values the expected shape comes from.
        why: String,
    },
    /// A tensor stored in a type this crate cannot compute with.
    #[error(
        "tensor `{tensor}` has type {found}, which is not supported here (supported: {supported})"
    )]
    TensorType {
        /// The tensor's name.
        tensor: String,
        /// Its type.
        found: GgmlType,
        /// The types accepted for this tensor.
        supported: &'static str,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is out of range for a vocabulary of {vocab} tokens")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The session's KV cache has no room for more positions.
    #[error("the context is full: {used} positions used, {requested} more requested, capacity {capacity}")]
    ContextFull {
        /// Positions already in the cache.
        used: usize,
        /// Positions the call needed.
        requested: usize,
        /// The cache's capacity.
        capacity: usize,
    },
    /// An empty token list was given where at least one token is needed.
    #[error("no tokens given")]
    NoTokens,
    /// A session option that cannot be honoured.
    #[error("invalid session option: {0}")]
    Options(String),
    /// A shape error inside a product (a bug if it ever appears: shapes are
    /// checked at load time).
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A quantization error (a bug if it ever appears, as above).
    #[error(transparent)]
    Quant(#[from] QuantError),
    /// The file's tokenizer metadata was rejected (loading a [`Model`](super::Model)).
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),
}

impl ModelError {
    pub(crate) fn invalid(key: &str, reason: impl Into<String>) -> Self {
        ModelError::InvalidValue {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}
