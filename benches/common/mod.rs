//! What the benchmarks share.

/// `n` values in `[-0.5, 0.5)` from a linear congruential generator seeded
/// with `seed`: the same inputs on every run and machine.
pub fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}
