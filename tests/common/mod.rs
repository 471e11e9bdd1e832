//! Helpers shared by the model tests: a tiny Qwen3 file rewritten with
//! edits, as a hostile or unusual writer would produce it. The editable
//! file itself is `tests/support/model_file.rs`, which the `model_load`
//! fuzz target shares.
#![allow(dead_code)]

use inferno_cpu::gguf::GgufFile;

#[path = "../support/model_file.rs"]
mod model_file;

pub use model_file::{tokens, Edit};

impl Edit {
    /// The file in an aligned buffer, as a model file read from disk is
    /// (no file is written, so tests running in parallel cannot race on
    /// one).
    pub fn file(&self) -> GgufFile {
        GgufFile::from_bytes(&self.bytes()).unwrap()
    }
}

/// f32 values of a little-endian f32 tensor.
pub fn f32s(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
