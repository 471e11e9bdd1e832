//! Helpers shared by the model tests: a tiny Qwen3 file rewritten with
//! edits, as a hostile or unusual writer would produce it. The editable
//! file itself is `tests/support/model_file.rs`, which the `model_load`
//! fuzz target shares.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use inferno_cpu::gguf::GgufFile;

#[path = "../support/model_file.rs"]
mod model_file;

pub use model_file::{tokens, Edit};

impl Edit {
    /// Writes the file and reads it back through an aligned buffer. Each
    /// call writes its own path: tests run in parallel, and two of them
    /// writing the same bytes to one path could read it half-written.
    pub fn file(&self) -> GgufFile {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let bytes = self.bytes();
        let dir = std::env::temp_dir().join(format!("inferno-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let call = CALLS.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{:016x}-{call}.gguf", hash(&bytes)));
        std::fs::write(&path, &bytes).unwrap();
        let file = GgufFile::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        file
    }
}

fn hash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
    })
}

/// f32 values of a little-endian f32 tensor.
pub fn f32s(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
