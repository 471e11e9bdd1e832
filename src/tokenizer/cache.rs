//! The BPE cache: merged ids of recently seen pieces, behind a lock that
//! `encode` only ever tries, so `encode` takes `&self` and threads never
//! wait on each other (a thread that finds it taken merges uncached).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::hash::SeededState;

/// Merged ids by piece.
type Pieces = HashMap<Box<[u8]>, Box<[u32]>, SeededState>;

/// Pieces longer than this (in bytes) are merged without the cache: rare,
/// and they would crowd it.
const CACHE_MAX_PIECE: usize = 64;
/// Cached pieces before the cache is emptied and refilled, by default.
const CACHE_CAPACITY: usize = 16_384;

/// The cache a tokenizer owns.
pub(super) struct MergeCache {
    pieces: Mutex<Pieces>,
    /// Pieces the cache holds before it is emptied; 0 disables it.
    capacity: usize,
}

/// The cache, held for one stretch of text.
pub(super) struct CacheGuard<'c> {
    pieces: MutexGuard<'c, Pieces>,
    capacity: usize,
}

impl MergeCache {
    /// An empty cache of the default capacity.
    pub(super) fn new() -> Self {
        MergeCache {
            pieces: Mutex::new(HashMap::with_hasher(SeededState::new())),
            capacity: CACHE_CAPACITY,
        }
    }

    /// Sets the capacity (0 disables the cache) and empties it.
    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        if let Ok(pieces) = self.pieces.get_mut() {
            pieces.clear();
        }
    }

    /// The cache, unless it is disabled or another thread holds it.
    pub(super) fn try_lock(&self) -> Option<CacheGuard<'_>> {
        if self.capacity == 0 {
            return None;
        }
        let pieces = self.pieces.try_lock().ok()?;
        Some(CacheGuard {
            pieces,
            capacity: self.capacity,
        })
    }
}

impl CacheGuard<'_> {
    /// The cached ids of `piece`.
    pub(super) fn get(&self, piece: &[u8]) -> Option<&[u32]> {
        if piece.len() > CACHE_MAX_PIECE {
            return None;
        }
        self.pieces.get(piece).map(|ids| &**ids)
    }

    /// Caches `ids` as the merge of `piece`, emptying a full cache first.
    pub(super) fn insert(&mut self, piece: &[u8], ids: &[u32]) {
        if piece.len() > CACHE_MAX_PIECE {
            return;
        }
        if self.pieces.len() >= self.capacity {
            self.pieces.clear();
        }
        self.pieces.insert(piece.into(), ids.into());
    }
}
