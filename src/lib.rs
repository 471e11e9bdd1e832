//! `inferno-cpu`: the CPU kernel layer of an LLM inference engine.
//!
//! * [`ThreadPool`]: a persistent pool of spinning workers. While they
//!   spin, a dispatch takes no lock and makes no system call (a few atomic
//!   operations), cheap enough to split each of the ~200 small
//!   matrix-vector products of a decoded token across cores; shares are
//!   claimed by whichever threads run, so a worker the OS does not run
//!   holds no dispatch up.
//! * [`quant`]: GGML-compatible Q8_0 blocks, quantization and SIMD dot
//!   kernels with a scalar reference.
//! * [`matvec`]: single-core, pooled and rayon matvec/matmul; the pooled
//!   result is byte-identical to the single-core one at any thread count.
//! * [`gguf`]: a strictly validated, zero-copy GGUF reader and a writer.
//! * [`synth`]: deterministic synthetic Qwen3 model files (real shapes,
//!   metadata and tokenizer layout, seeded random weights).
//! * [`tokenizer`]: Qwen3's byte-level BPE tokenizer built from GGUF
//!   metadata, matching Hugging Face's ids, with a streaming decoder.
//!
//! # Example
//!
//! A Q8_0 weight matrix read from GGUF bytes without copying, multiplied by
//! a vector on the pool. The buffers (`x`, `out`) are reused from one call
//! to the next; a matvec allocates nothing.
//!
//! ```
//! use inferno_cpu::gguf::{Gguf, Writer};
//! use inferno_cpu::matvec::{matvec_q8_0, matvec_q8_0_pool, Q8Matrix};
//! use inferno_cpu::quant::{quantize_row_q8_0, QuantizedVector};
//! use inferno_cpu::ThreadPool;
//!
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! // A 4 x 64 matrix, written as a GGUF file (GGUF lists the row length first).
//! let (rows, cols) = (4, 64);
//! let weights: Vec<f32> = (0..rows * cols).map(|i| (i % 9) as f32 - 4.0).collect();
//! let blocks = quantize_row_q8_0(&weights)?;
//! let mut writer = Writer::new();
//! writer.add_str("general.architecture", "demo")?;
//! writer.add_tensor_q8_0("w", &[cols as u64, rows as u64], &blocks)?;
//! let file = writer.to_bytes()?;
//!
//! // Read it back: validated once, then zero-copy views.
//! let gguf = Gguf::parse(&file)?;
//! let w = Q8Matrix::new(gguf.tensor_q8_0("w")?, rows, cols)?;
//!
//! // Quantize the input once, then run the product on one core and on the pool.
//! let mut x = QuantizedVector::new();
//! x.quantize_from(&[0.25f32; 64])?;
//! let mut single = vec![0.0; rows];
//! matvec_q8_0(&w, &x, &mut single)?;
//! let pool = ThreadPool::new(2)?;
//! let mut pooled = vec![0.0; rows];
//! matvec_q8_0_pool(&pool, &w, &x, &mut pooled)?;
//! assert_eq!(single, pooled); // the same bytes at any thread count
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every `unsafe` line of the crate lives in one private module,
//! `unsafe_core`, checked by loom models, Miri, proptest and fuzzing; see
//! `SAFETY.md` in the repository.
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

#[allow(unsafe_code)]
mod unsafe_core;

pub mod backend;
pub mod gguf;
pub mod matvec;
pub mod model;
pub mod pool;
pub mod quant;
pub mod sample;
mod sync;
pub mod synth;
pub mod tokenizer;

pub use pool::{default_threads, split, PoolError, ThreadPool, ThreadPoolBuilder, MAX_THREADS};
pub use quant::BlockQ8_0;
