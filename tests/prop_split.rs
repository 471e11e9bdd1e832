//! Property tests of the pool's work division.
#![cfg(not(feature = "loom"))]

use std::sync::OnceLock;

use inferno_cpu::{split, ThreadPool};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The `n` ranges tile `0..total` exactly, in order, contiguous, with
    /// lengths that differ by at most one.
    #[test]
    fn split_tiles_exactly(total in 0usize..1_000_000, n in 1usize..=64) {
        let mut next = 0;
        let (mut shortest, mut longest) = (usize::MAX, 0);
        for id in 0..n {
            let r = split(total, id, n);
            prop_assert_eq!(r.start, next, "share {} does not start where {} ended", id, id.wrapping_sub(1));
            prop_assert!(r.start <= r.end);
            shortest = shortest.min(r.len());
            longest = longest.max(r.len());
            next = r.end;
        }
        prop_assert_eq!(next, total);
        prop_assert!(longest - shortest <= 1, "lengths {}..={}", shortest, longest);
    }
}

/// Pools of every size used below, built once (building one per case would
/// spend the test's time spawning threads).
fn pools() -> &'static [ThreadPool] {
    static POOLS: OnceLock<Vec<ThreadPool>> = OnceLock::new();
    POOLS.get_or_init(|| {
        (1..=9)
            .map(|n| ThreadPool::new(n).expect("test pool"))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Static chunks: every element is handed to exactly one share, and the
    /// range a share is given is where its chunk lives.
    #[test]
    fn chunks_touch_each_once(len in 0usize..2_000, threads in 1usize..=9) {
        let pool = &pools()[threads - 1];
        let mut data = vec![0u32; len];
        pool.for_each_chunk_mut(&mut data, |range, chunk| {
            assert_eq!(range.len(), chunk.len());
            for (i, x) in range.zip(chunk) {
                *x += 1 + i as u32;
            }
        });
        for (i, x) in data.iter().enumerate() {
            prop_assert_eq!(*x, 1 + i as u32, "element {}", i);
        }
    }

    /// Dynamic chunks: the same, for any chunk length (0 means 1).
    #[test]
    fn dynamic_chunks_touch_each_once(len in 0usize..2_000, threads in 1usize..=9, chunk in 0usize..300) {
        let pool = &pools()[threads - 1];
        let mut data = vec![0u32; len];
        pool.for_each_chunk_mut_dynamic(&mut data, chunk, |range, piece| {
            assert_eq!(range.len(), piece.len());
            assert!(range.len() <= chunk.max(1));
            for (i, x) in range.zip(piece) {
                *x += 1 + i as u32;
            }
        });
        for (i, x) in data.iter().enumerate() {
            prop_assert_eq!(*x, 1 + i as u32, "element {}", i);
        }
    }
}
