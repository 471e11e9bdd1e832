//! Qwen3: configuration, weights and the forward pass with a KV cache.
//!
//! ```text
//! token -> embedding row -> 28 x [ RMSNorm -> q,k,v -> QK-norm -> RoPE -> attention
//!                                  -> output projection -> + residual
//!                                  -> RMSNorm -> SwiGLU MLP -> + residual ]
//!       -> RMSNorm -> lm_head -> logits
//! ```
//!
//! * [`Qwen3Config`]: the hyperparameters, read from the `qwen3.*`
//!   metadata keys with one typed error per missing or inconsistent value.
//! * [`Qwen3Weights`]: zero-copy [`Q8Matrix`](crate::matvec::Q8Matrix)
//!   views of the file's projections, every shape checked at load time.
//! * [`Session`]: the KV cache (`f16` by default, see [`KvDtype`]) and
//!   scratch buffers, with [`Session::prefill`] (a prompt as batched
//!   products) and [`Session::decode`] (one token, no heap allocation),
//!   on any [`Backend`](crate::backend::Backend).
//!
//! Details follow llama.cpp's `qwen3` graph: RMSNorm with the weight
//! applied after scaling; per-head RMSNorm of queries and keys before RoPE;
//! RoPE in NEOX style (the two halves of a head rotate together);
//! grouped-query attention with `1 / sqrt(head_dim)` scaling; `down(silu(gate
//! x) * up x)`; the output projection is `output.weight`, or the token
//! embedding when the file has none (tied). Activations entering a
//! product are quantized or rounded to the weight's "vec dot type" as GGML
//! does (Q8_0 for Q8_0 and Q4_0 weights, Q8_K for the K-quants, f16 and
//! bfloat16 for F16 and BF16 ones); with an `f16` cache the query and the
//! attention weights are rounded to `f16` as GGML does too.
//! So the logits stay close to llama.cpp's: `tests/llama_logits.rs`
//! checks every backend against them, and the README's "Logits against
//! llama.cpp" section gives the measured error and how it was measured.
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use inferno_cpu::backend::Simd;
//! use inferno_cpu::gguf::GgufFile;
//! use inferno_cpu::model::{argmax, Qwen3, Session, SessionOptions};
//!
//! let file = GgufFile::open("tests/fixtures/qwen3-tiny-s7.gguf")?;
//! let gguf = file.gguf();
//! let model = Qwen3::load(&gguf)?;
//! assert_eq!((model.config.layers, model.config.heads), (2, 4));
//! let mut session = Session::new(&model, Simd, SessionOptions::default())?;
//! let mut token = argmax(session.prefill(&[17, 300, 5])?);
//! for _ in 0..4 {
//!     token = argmax(session.decode(token)?);
//! }
//! assert_eq!(session.position(), 7);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod attention;
mod chat;
mod config;
mod error;
mod generate;
mod handle;
mod kv_cache;
pub mod layout;
pub(crate) mod ops;
mod session;
mod trace;
mod weights;

/// Re-exported from [`sample`](crate::sample), where it lives: greedy
/// decoding takes `argmax` of each step's logits.
pub use crate::sample::argmax;
pub use chat::{ChatTemplate, CHAT_TEMPLATE_KEY};
pub use config::Qwen3Config;
pub use error::ModelError;
pub use generate::{Stats, StopReason};
pub use handle::{pack_for_decode, Model, ModelRef};
pub use kv_cache::KvDtype;
pub use session::{Session, SessionOptions, DEFAULT_MAX_POSITIONS, PREFILL_CHUNK};
pub use trace::{Op, Trace};
pub use weights::{Embedding, LayerWeights, Qwen3Weights};

use crate::gguf::Gguf;

/// A Qwen3 model: its configuration and its weights, borrowed from a GGUF
/// file (normally memory-mapped by [`GgufFile`](crate::gguf::GgufFile)).
#[derive(Debug)]
pub struct Qwen3<'a> {
    /// The hyperparameters.
    pub config: Qwen3Config,
    /// The weights.
    pub weights: Qwen3Weights<'a>,
}

impl<'a> Qwen3<'a> {
    /// Reads the configuration and checks every weight's presence, type and
    /// shape. Copies only the small norm weights (and an F32 output
    /// projection, quantized to Q8_0).
    ///
    /// # Errors
    ///
    /// Any [`ModelError`] of [`Qwen3Config::from_gguf`]; a missing tensor
    /// ([`ModelError::Gguf`]), one of the wrong shape
    /// ([`ModelError::TensorShape`]) or of an unsupported type
    /// ([`ModelError::TensorType`]), each naming the tensor.
    pub fn load(gguf: &Gguf<'a>) -> Result<Self, ModelError> {
        let config = Qwen3Config::from_gguf(gguf)?;
        let weights = Qwen3Weights::load(gguf, &config)?;
        Ok(Self { config, weights })
    }
}
