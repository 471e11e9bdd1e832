//! GGUF: a strictly validated, zero-copy reader and a writer.
//!
//! Model files come from strangers, so the reader treats every byte as
//! hostile. [`Gguf::parse`] (over a byte slice) and [`GgufFile`] (over a
//! memory map or an aligned in-memory copy) validate the whole header before
//! handing anything out:
//!
//! * every read is bounds-checked, so truncation at any byte is an error;
//! * every count (keys, tensors, array and string lengths) is checked
//!   against the bytes left in the file before anything is allocated for it,
//!   so memory and time stay linear in the file's length whatever it claims;
//! * strings are UTF-8, bools are 0 or 1, arrays nest at most
//!   [`MAX_ARRAY_DEPTH`] deep, keys and tensor names are unique;
//! * keys follow the specification's rules (ASCII, dot-separated
//!   lower-case segments, at most [`MAX_KEY_LEN`] bytes), tensor names are
//!   at most [`MAX_TENSOR_NAME_LEN`] bytes, `general.alignment` is a power
//!   of two and a multiple of [`MIN_ALIGNMENT`], and the padding before the
//!   data section is zeros;
//! * tensors have 1 to [`MAX_DIMS`] nonzero dimensions of a known GGML
//!   type, sizes that fit in `u64` and `usize`, a first dimension made of
//!   whole blocks, an offset aligned to `general.alignment`, and data inside
//!   the file that overlaps no other tensor.
//!
//! Each failure is its own [`GgufError`] variant carrying the byte offset
//! and the key or tensor name. GGUF versions 2 and 3 are read; version 1,
//! unknown versions and big-endian files are refused with a clear error.
//!
//! After validation, tensor views ([`Gguf::tensor_bytes`],
//! [`Gguf::tensor_f32`], [`Gguf::tensor_f16`], [`Gguf::tensor_q8_0`]) are
//! a lookup and a slice: no copy, no further checks.
//!
//! [`Writer`] builds conformant files (tests, fuzz seeds, synthetic models).
//!
//! The table below (`src/gguf/SPEC.md`) goes through the specification
//! rule by rule: what the reader does with a file that breaks each rule,
//! where it is stricter or more lenient and why, where llama.cpp and the
//! Python `gguf` package differ, and the test that checks each rule.
//!
#![doc = include_str!("SPEC.md")]

mod error;
pub(crate) mod file;
mod parse;
mod reader;
mod types;
mod value;
mod writer;

pub use error::{GgufError, WriteError};
pub use file::GgufFile;
pub use reader::{Gguf, Header, TensorInfo, TensorLayout};
pub use types::GgmlType;
pub use value::{Array, Metadata, Value, ValueType};
pub use writer::{TensorStream, Writer};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// Metadata key holding the data alignment (a `u32` power of two).
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Alignment of the data section and tensor offsets when
/// `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Most array levels a metadata value may nest (an array of scalars is one
/// level). Real files use one; the limit bounds the parser's recursion.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// Most dimensions a tensor may have (GGML's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// Longest metadata key, in bytes (the specification's `2^16 - 1`).
pub const MAX_KEY_LEN: usize = 65_535;

/// Longest tensor name, in bytes (the specification's 64).
pub const MAX_TENSOR_NAME_LEN: usize = 64;

/// Every `general.alignment` must be a multiple of this (the
/// specification's "must be a multiple of 8"), as well as a power of two.
pub const MIN_ALIGNMENT: u32 = 8;
