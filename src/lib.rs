//! `inferno-cpu`: the CPU kernel layer of an LLM inference engine.
//!
//! * [`ThreadPool`]: a persistent pool of spinning workers whose dispatch is
//!   one atomic store, cheap enough to split each of the ~200 small
//!   matrix-vector products of a decoded token across cores.
//! * [`quant`]: GGML-compatible Q8_0 blocks, quantization and SIMD dot
//!   kernels with a scalar reference.
//! * [`matvec`]: single-core, pooled and rayon matvec/matmul; the pooled
//!   result is byte-identical to the single-core one at any thread count.
//! * [`gguf`]: a strictly validated, zero-copy GGUF reader and a writer.
//!
//! Every `unsafe` line of the crate lives in one private module,
//! `unsafe_core`, checked by loom models, Miri, proptest and fuzzing; see
//! `SAFETY.md` in the repository.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

#[allow(unsafe_code)]
mod unsafe_core;

pub mod gguf;
pub mod matvec;
pub mod pool;
pub mod quant;
mod sync;

pub use pool::{default_threads, split, PoolError, ThreadPool, ThreadPoolBuilder};
pub use quant::BlockQ8_0;
