//! A fast keyed hash for the merge table and the BPE cache.
//!
//! Encoding does one merge-table lookup per candidate pair, so SipHash
//! (std's default) is a large share of its time. This hash mixes each 8-byte
//! word with one 64x64->128-bit multiply folded to 64 bits. Its keys come
//! from files, so it is seeded from std's per-process random state: an
//! attacker who cannot see the seed cannot precompute colliding merges that
//! would make building the table quadratic.

use std::hash::{BuildHasher, Hasher};

const MUL: u64 = 0x9E37_79B9_7F4A_7C15;
const FINISH: u64 = 0x2D35_8DCC_AA6C_78A5;

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Builds [`FoldHasher`]s with one random seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeededState {
    seed: u64,
}

impl SeededState {
    /// A state with a fresh random seed.
    pub(crate) fn new() -> Self {
        SeededState {
            seed: std::collections::hash_map::RandomState::new().hash_one(MUL) | 1,
        }
    }
}

impl Default for SeededState {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildHasher for SeededState {
    type Hasher = FoldHasher;

    fn build_hasher(&self) -> FoldHasher {
        FoldHasher { h: self.seed }
    }
}

/// The hasher: one folded multiply per word.
pub(crate) struct FoldHasher {
    h: u64,
}

impl FoldHasher {
    fn mix(&mut self, word: u64) {
        self.h = fold(self.h ^ word, MUL);
    }
}

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word.get_mut(..rest.len())
                .unwrap_or_default()
                .copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.mix(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.mix(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.mix(value as u64);
    }

    fn finish(&self) -> u64 {
        fold(self.h, FINISH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn distinct_keys_hash_apart() {
        let state = SeededState::new();
        let hashes: HashSet<u64> = (0..10_000u64)
            .flat_map(|i| [i, i << 32, i << 48])
            .map(|k| state.hash_one(k))
            .collect();
        assert_eq!(hashes.len(), 10_000 * 3 - 2); // 0 appears three times
        assert_ne!(state.hash_one(&b"a"[..]), state.hash_one(&b"a\0"[..]));
    }
}
