//! Applying BPE merges to one pre-tokenized piece.
//!
//! A piece starts as one symbol per byte. The adjacent pair with the lowest
//! merge rank is merged (the leftmost one on ties), and so on until no
//! adjacent pair has a merge: Hugging Face's and llama.cpp's order, which
//! gives the same result as GPT-2's original loop.
//!
//! Candidate pairs sit in a binary heap, so a piece of `n` bytes costs
//! `O(n log n)` whatever its length (a naive rescan is `O(n²)`, which a
//! hostile megabyte-long "word" would turn into minutes). Symbols form a
//! linked list over the piece's byte positions; a popped pair is stale if
//! either side has since been merged into something else, which shows as a
//! changed token id (a merged token is longer than each of its parts, so it
//! never has the id of either).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::hash::SeededState;

/// What merging a pair gives: its rank (lower merges first) and the merged
/// token's id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Merge {
    pub(crate) rank: u32,
    pub(crate) id: u32,
}

/// The merge table, keyed by the pair of token ids packed into a `u64`.
pub(crate) type Merges = HashMap<u64, Merge, SeededState>;

/// The key of pair `(left, right)` in [`Merges`].
pub(crate) fn pair_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// One symbol of the piece being merged.
#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    /// Index of the previous live symbol, `usize::MAX` for none.
    prev: usize,
    /// Index of the next live symbol, `usize::MAX` for none.
    next: usize,
    /// False once merged into its left neighbour.
    live: bool,
}

const NONE: usize = usize::MAX;

/// Buffers reused from one piece to the next, so merging allocates only
/// while they grow.
#[derive(Default)]
pub(crate) struct Scratch {
    syms: Vec<Symbol>,
    /// (rank, left position, left id, right id): the ids detect staleness.
    heap: BinaryHeap<Reverse<(u32, usize, u32, u32)>>,
}

/// Merges the byte tokens `ids` (one per byte of the piece) and appends the
/// resulting token ids to `out`.
pub(crate) fn merge(ids: &[u32], merges: &Merges, scratch: &mut Scratch, out: &mut Vec<u32>) {
    if ids.len() < 2 {
        out.extend_from_slice(ids);
        return;
    }
    if let [a, b] = *ids {
        match merges.get(&pair_key(a, b)) {
            Some(m) => out.push(m.id),
            None => out.extend_from_slice(ids),
        }
        return;
    }
    let Scratch { syms, heap } = scratch;
    syms.clear();
    heap.clear();
    syms.extend(ids.iter().enumerate().map(|(i, &id)| Symbol {
        id,
        prev: if i == 0 { NONE } else { i - 1 },
        next: if i + 1 == ids.len() { NONE } else { i + 1 },
        live: true,
    }));
    for (i, pair) in ids.windows(2).enumerate() {
        if let Some(m) = merges.get(&pair_key(pair[0], pair[1])) {
            heap.push(Reverse((m.rank, i, pair[0], pair[1])));
        }
    }
    while let Some(Reverse((_, left, left_id, right_id))) = heap.pop() {
        let Some(&l) = syms.get(left) else { continue };
        if !l.live || l.id != left_id || l.next == NONE {
            continue;
        }
        let right = l.next;
        let Some(&r) = syms.get(right) else { continue };
        if r.id != right_id {
            continue;
        }
        let Some(m) = merges.get(&pair_key(left_id, right_id)).copied() else {
            continue;
        };
        // Merge `right` into `left`.
        if let Some(s) = syms.get_mut(left) {
            s.id = m.id;
            s.next = r.next;
        }
        if let Some(s) = syms.get_mut(right) {
            s.live = false;
        }
        if let Some(s) = syms.get_mut(r.next) {
            s.prev = left;
        }
        // New candidate pairs with both neighbours.
        if let Some(p) = syms.get(l.prev) {
            if let Some(pm) = merges.get(&pair_key(p.id, m.id)) {
                heap.push(Reverse((pm.rank, l.prev, p.id, m.id)));
            }
        }
        if let Some(n) = syms.get(r.next) {
            if let Some(nm) = merges.get(&pair_key(m.id, n.id)) {
                heap.push(Reverse((nm.rank, left, m.id, n.id)));
            }
        }
    }
    let mut i = 0;
    while let Some(s) = syms.get(i) {
        out.push(s.id);
        i = s.next;
    }
}
