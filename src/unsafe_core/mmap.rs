//! Memory-mapping a model file read-only.
//!
//! The one `unsafe` call is [`memmap2::Mmap::map`]. It is unsafe because
//! the returned `&[u8]` is only sound while nobody else changes the file:
//! another process truncating it makes touching the lost pages raise
//! `SIGBUS`, and one writing to it changes bytes behind a shared reference.
//! No API can rule that out for a file on a shared filesystem; see
//! `SAFETY.md`, section "Memory maps", for the contract this crate states
//! instead and for the safe alternative ([`crate::gguf::GgufFile::read`]).

use std::fs::File;
use std::io;

use memmap2::Mmap;

/// Maps all of `file` read-only.
///
/// The caller's contract, documented on [`crate::gguf::GgufFile::open`]:
/// the file is not truncated or written while the map lives.
pub(crate) fn map_read_only(file: &File) -> io::Result<Mmap> {
    // SAFETY: [MMAP-IMMUTABLE] the map is read-only (`PROT_READ`), its
    // length is fixed at creation, and every access goes through the `&[u8]`
    // of that length, so no access can leave the mapping. What Rust cannot
    // check is that the file keeps its contents and length while mapped;
    // `GgufFile::open` documents that the file must not be modified or
    // truncated while open (model files are written once, then only read),
    // and `GgufFile::read` is the copy-into-memory alternative for files
    // that may change. Checked by:
    // src/unsafe_core/mmap.rs::tests::map_matches_read
    unsafe { Mmap::map(file) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot call mmap")]
    fn map_matches_read() {
        let path = std::env::temp_dir().join(format!("inferno-mmap-{}.bin", std::process::id()));
        let contents: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        File::create(&path).unwrap().write_all(&contents).unwrap();
        let map = map_read_only(&File::open(&path).unwrap()).unwrap();
        assert_eq!(&map[..], &contents[..]);
        // Page-aligned start: f32 views of aligned data sections are sound.
        assert_eq!(map.as_ptr() as usize % 4096, 0);
        drop(map);
        std::fs::remove_file(&path).unwrap();
    }
}
