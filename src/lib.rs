//! `inferno-cpu`: the CPU kernel layer of an LLM inference engine, and a
//! Qwen3 engine built on it.
//!
//! * [`ThreadPool`]: a persistent pool of spinning workers. While they
//!   spin, a dispatch takes no lock and makes no system call (a few atomic
//!   operations), cheap enough to split each of the ~200 small
//!   matrix-vector products of a decoded token across cores; shares are
//!   claimed by whichever threads run, so a worker the OS does not run
//!   holds no dispatch up. [`ThreadPool::for_each_chunk_mut`] gives each
//!   share a disjoint `&mut` chunk of an output, so kernels written outside
//!   this crate run on it without `unsafe`.
//! * [`quant`]: GGML-compatible Q8_0 blocks, quantization and SIMD dot
//!   kernels with a scalar reference.
//! * [`matvec`]: single-core, pooled and rayon matvec/matmul; the pooled
//!   result is byte-identical to the single-core one at any thread count.
//! * [`gguf`]: a strictly validated, zero-copy GGUF reader and a writer.
//! * [`model`]: the Qwen3 forward pass (decode and batched prefill) with a
//!   KV cache, over the swappable [`backend`]s `scalar`, `simd`, `parallel`
//!   (rayon) and `pool`; [`sample`] picks the next token.
//! * [`tokenizer`]: Qwen3's byte-level BPE tokenizer built from GGUF
//!   metadata, matching Hugging Face's ids, with a streaming decoder.
//! * [`synth`]: deterministic synthetic Qwen3 model files (real shapes,
//!   metadata and tokenizer layout, seeded random weights).
//!
//! As a library, depend on it without the command-line tool's dependencies
//! (clap, serde_json, indicatif, ctrlc):
//!
//! ```toml
//! [dependencies]
//! inferno-cpu = { version = "0.1", default-features = false }
//! ```
//!
//! # A tour: from a file on disk to a pooled matvec and a generated token
//!
//! A GGUF file is memory-mapped and validated once; after that every
//! weight is a view of the mapped bytes. Here the file is the crate's tiny
//! synthetic Qwen3 (two layers); a real `Qwen3-0.6B-Q8_0.gguf` loads the
//! same way.
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use inferno_cpu::backend::Pool;
//! use inferno_cpu::gguf::GgufFile;
//! use inferno_cpu::matvec::{matvec_q8_0, matvec_q8_0_pool};
//! use inferno_cpu::model::{argmax, Qwen3, Session, SessionOptions};
//! use inferno_cpu::quant::QuantizedVector;
//! use inferno_cpu::synth::{write_model_file, SynthConfig};
//! use inferno_cpu::tokenizer::Tokenizer;
//! use inferno_cpu::ThreadPool;
//!
//! # let dir = std::env::temp_dir().join(format!("inferno-tour-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("tiny.gguf");
//! write_model_file(&SynthConfig::tiny(), 7, &path, |_written, _total| {})?;
//!
//! // 1. Open: map, parse and validate the header and tensor table.
//! let file = GgufFile::open(&path)?;
//! let gguf = file.gguf();
//!
//! // 2. A weight as a zero-copy Q8_0 matrix, multiplied on the pool. The
//! //    input is quantized once into a reused buffer.
//! let model = Qwen3::load(&gguf)?;
//! let w = model.weights.layers[0].gate.as_q8_0().expect("the synthetic model is Q8_0");
//! let mut x = QuantizedVector::new();
//! x.quantize_from(&vec![0.5f32; w.cols()])?;
//! let pool = ThreadPool::new(2)?;
//! let (mut single, mut pooled) = (vec![0.0; w.rows()], vec![0.0; w.rows()]);
//! matvec_q8_0(w, &x, &mut single)?;
//! matvec_q8_0_pool(&pool, w, &x, &mut pooled)?;
//! assert_eq!(single, pooled); // the same bytes at any thread count
//!
//! // 3. Text to a generated token: tokenize, prefill, pick, decode.
//! let tokenizer = Tokenizer::from_gguf(&gguf)?;
//! let ids = tokenizer.encode("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", true);
//! let mut session = Session::new(&model, Pool::new(2)?, SessionOptions::default())?;
//! let next = argmax(session.prefill(&ids)?);
//! let text = tokenizer.decode_lossy(&[next])?; // noise: the weights are random
//! let logits = session.decode(next)?; // and so on, one token at a time
//! assert_eq!(logits.len(), model.config.vocab);
//! # drop(file);
//! # std::fs::remove_dir_all(&dir)?;
//! # let _ = text;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # An engine: one model, many conversations
//!
//! [`model::Model`] owns the file its weights are views of, so it can be
//! kept in an `Arc` beside its sessions and shared across threads; each
//! [`model::Session`] owns its KV cache. [`model::Session::generate_text`]
//! is the whole loop: prefill, sample, decode, stop at the end of the
//! model's turn or a limit, stream whole characters, return the timings.
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // the pool runs on loom's scheduler under `loom`
//! use std::ops::ControlFlow;
//! use std::sync::Arc;
//! use inferno_cpu::backend::Pool;
//! use inferno_cpu::model::{Model, Session, SessionOptions};
//! use inferno_cpu::sample::Sampler;
//! use inferno_cpu::synth::{model_bytes, SynthConfig};
//!
//! /// What an engine might keep: the model and its open conversations.
//! struct Engine {
//!     model: Arc<Model>,
//!     sessions: Vec<Session<Arc<Model>, Pool>>,
//! }
//!
//! // `Model::read("Qwen3-0.6B-Q8_0.gguf")?` for a real file.
//! let model = Arc::new(Model::from_bytes(&model_bytes(&SynthConfig::tiny(), 7)?)?);
//! let mut engine = Engine { sessions: Vec::new(), model };
//! engine.sessions.push(engine.model.session(Pool::new(2)?, SessionOptions::default())?);
//!
//! let prompt = engine.model.chat_template()?.user_turn("Hello!");
//! let ids = engine.model.tokenizer().encode(&prompt, true);
//! let mut reply = String::new();
//! let stats = engine.sessions[0].generate_text(
//!     engine.model.tokenizer(),
//!     &ids,
//!     8,
//!     &mut Sampler::new(0.8, 0.95, 42)?,
//!     |text| {
//!         reply.push_str(text); // noise: the weights are random
//!         ControlFlow::Continue(())
//!     },
//! )?;
//! assert!(stats.generated <= 8);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The repository's `examples/` hold the same steps as programs:
//! `gguf_inspect`, `q8_matvec`, `pool_custom_kernel` (your own kernel on
//! the pool), `generate` (streamed text from a model file) and `serve`
//! (several conversations at once on one loaded model).
//!
//! # A matvec without a file
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
