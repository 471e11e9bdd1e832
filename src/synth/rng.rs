//! The seeded random numbers behind synthetic models.
//!
//! A synthetic model must come out byte for byte the same for a seed on
//! every machine, at any thread count, so that a file can be cached,
//! compared and regenerated. Hence:
//!
//! * every row of every tensor draws from its own stream, keyed by
//!   `(seed, stream, row)`, so rows can be generated in any order and on any
//!   thread;
//! * the generator is xoshiro256** (seeded through splitmix64), integer
//!   arithmetic only;
//! * normal deviates use the Box-Muller transform with this module's own
//!   logarithm, sine and cosine, built from `+ - * /` and nothing else,
//!   because the platform `ln`, `sin` and `cos` are not required to round
//!   the same everywhere (`sqrt` is: IEEE 754 requires it correctly
//!   rounded). Being branch-free, the transform runs over a block of values
//!   at a time in vector registers, which makes generating a 600-million
//!   weight model a matter of seconds.

/// SplitMix64: a tiny, fast generator whose outputs are fully specified
/// (the same on every platform), for deterministic test and benchmark data,
/// the sampler's draws, and seeding the crate-internal `xoshiro256**`
/// generator of the synthetic weights. Its step is a bijection of a 64-bit
/// counter, so nearby seeds give unrelated outputs. Not for cryptography.
///
/// ```
/// use inferno_cpu::synth::SplitMix64;
/// let mut g = SplitMix64::new(7);
/// let (a, b) = (g.next_u64(), g.next_u64());
/// assert_ne!(a, b);
/// assert_eq!(SplitMix64::new(7).next_u64(), a);
/// assert!((-1.0..1.0).contains(&g.next_signed_f32()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator whose first output mixes `seed + 0x9E37_79B9_7F4A_7C15`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-1, 1)`, from the top 24 bits (exact in `f32`).
    pub fn next_signed_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// xoshiro256**: fast, small state, good statistical quality; its outputs
/// are fully specified, so streams match on every platform.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// The stream for `(seed, stream, row)`: each key is folded in through
    /// splitmix64, so nearby keys give unrelated streams.
    pub(crate) fn new(seed: u64, stream: u64, row: u64) -> Self {
        let a = SplitMix64::new(seed).next_u64();
        let b = SplitMix64::new(a ^ stream).next_u64();
        let mut k = SplitMix64::new(b ^ row);
        let mut s = [0u64; 4];
        for x in &mut s {
            *x = k.next_u64();
        }
        // splitmix64 is a bijection of its counter, so four consecutive
        // outputs are never all zero (the one state xoshiro cannot leave);
        // guard anyway, since it costs nothing.
        if s == [0; 4] {
            s[0] = 1;
        }
        Self { s }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform integer in `0..n` (`n > 0`), by multiply-shift: the bias is
    /// below `n / 2^64`, far too small to matter for picking tokens.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fills `out` with `mean + std * N(0, 1)` deviates, rounded to `f32`.
    ///
    /// Box-Muller: two uniforms `u` in `(0, 1]` and `v` in `[-1/2, 1/2)`
    /// give the independent normals `r cos(2 pi v)` and `r sin(2 pi v)` with
    /// `r = sqrt(-2 ln u)`. The uniforms of a block are drawn first, then
    /// transformed without branches.
    pub(crate) fn fill_normal(&mut self, out: &mut [f32], mean: f64, std: f64) {
        const PAIRS: usize = 32;
        /// 2^-53: the weight of a 53-bit integer's unit.
        const UNIT: f64 = 1.0 / (1u64 << 53) as f64;
        let mut u = [0.0f64; PAIRS];
        let mut v = [0.0f64; PAIRS];
        let mut z = [0.0f32; 2 * PAIRS];
        for piece in out.chunks_mut(2 * PAIRS) {
            for (u, v) in u.iter_mut().zip(&mut v) {
                // (k + 1) / 2^53 for k in 0..2^53: never 0, so ln is finite.
                *u = ((self.next_u64() >> 11) + 1) as f64 * UNIT;
                *v = (self.next_u64() >> 11) as f64 * UNIT - 0.5;
            }
            for ((pair, &u), &v) in z.chunks_exact_mut(2).zip(&u).zip(&v) {
                let r = (-2.0 * ln(u)).sqrt();
                let (sin, cos) = sin_cos_2pi(v);
                pair[0] = (mean + std * r * cos) as f32;
                pair[1] = (mean + std * r * sin) as f32;
            }
            piece.copy_from_slice(&z[..piece.len()]);
        }
    }
}

/// `(sin, cos)` of `2 pi v` for `v` in `[-1/2, 1/2)`, from basic arithmetic
/// only, to about 1e-12.
///
/// The half angle `h = pi v` lies in `[-pi/2, pi/2)`, where short Taylor
/// series converge fast; the double-angle formulas then give the full turn.
#[inline(always)]
fn sin_cos_2pi(v: f64) -> (f64, f64) {
    let h = std::f64::consts::PI * v;
    let h2 = h * h;
    // sin h = h (1 - h^2/3! + h^4/5! - ...), cos h = 1 - h^2/2! + ...;
    // the first omitted terms are below (pi/2)^18 / 18! < 1e-12.
    // Horner, innermost term first: the ratios of consecutive terms are
    // -h^2 / ((2k)(2k+1)) for sine and -h^2 / ((2k-1)(2k)) for cosine.
    const SIN: [f64; 8] = [
        1.0 / (16.0 * 17.0),
        1.0 / (14.0 * 15.0),
        1.0 / (12.0 * 13.0),
        1.0 / (10.0 * 11.0),
        1.0 / (8.0 * 9.0),
        1.0 / (6.0 * 7.0),
        1.0 / (4.0 * 5.0),
        1.0 / (2.0 * 3.0),
    ];
    const COS: [f64; 8] = [
        1.0 / (15.0 * 16.0),
        1.0 / (13.0 * 14.0),
        1.0 / (11.0 * 12.0),
        1.0 / (9.0 * 10.0),
        1.0 / (7.0 * 8.0),
        1.0 / (5.0 * 6.0),
        1.0 / (3.0 * 4.0),
        1.0 / (1.0 * 2.0),
    ];
    let mut s = 1.0;
    let mut c = 1.0;
    for (rs, rc) in SIN.iter().zip(&COS) {
        s = 1.0 - h2 * rs * s;
        c = 1.0 - h2 * rc * c;
    }
    let (sin_h, cos_h) = (h * s, c);
    (2.0 * sin_h * cos_h, cos_h * cos_h - sin_h * sin_h)
}

/// Natural logarithm of a positive, normal `x`, from basic arithmetic only
/// (see the module documentation for why), to about 1e-12 relative: far
/// finer than the f32 weights, let alone their 8-bit quantization, need.
///
/// `x = m * 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, then
/// `ln m = 2 atanh(t)` with `t = (m - 1) / (m + 1)`, `|t| < 0.172`, whose
/// odd series converges by a factor `t^2 < 0.03` a term.
#[inline(always)]
fn ln(x: f64) -> f64 {
    const LN_2: f64 = std::f64::consts::LN_2;
    let bits = x.to_bits();
    // Replace the exponent to get the mantissa in [1, 2) (Box-Muller only
    // passes numbers in [2^-53, 1], all normal), then halve it when above
    // sqrt(2), without a branch.
    let e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { m * 0.5 } else { m };
    let e = e + i64::from(big);
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    // atanh(t) / t = sum t^(2k) / (2k + 1); 7 terms leave < 2e-12.
    const COEFFS: [f64; 7] = [
        1.0 / 13.0,
        1.0 / 11.0,
        1.0 / 9.0,
        1.0 / 7.0,
        1.0 / 5.0,
        1.0 / 3.0,
        1.0,
    ];
    let mut sum = 0.0;
    for c in COEFFS {
        sum = sum * t2 + c;
    }
    2.0 * t * sum + e as f64 * LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_matches_the_platform_closely() {
        let mut r = Rng::new(1, 2, 3);
        for _ in 0..10_000 {
            let x = (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64 + 1e-300;
            let (ours, std) = (ln(x), x.ln());
            assert!((ours - std).abs() <= 1e-11 * std.abs().max(1.0));
        }
        assert_eq!(ln(1.0), 0.0);
        assert!((ln(0.5) + std::f64::consts::LN_2).abs() < 1e-16);
    }

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::new(0, 0, 0).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let first = |seed, stream, row| Rng::new(seed, stream, row).next_u64();
        assert_ne!(first(0, 0, 0), first(1, 0, 0));
        assert_ne!(first(0, 0, 0), first(0, 1, 0));
        assert_ne!(first(0, 0, 0), first(0, 0, 1));
        assert_ne!(first(0, 1, 0), first(0, 0, 1));
    }

    #[test]
    fn sin_cos_match_the_platform_closely() {
        for i in -500..500 {
            let v = f64::from(i) / 1000.0;
            let (s, c) = sin_cos_2pi(v);
            let a = 2.0 * std::f64::consts::PI * v;
            assert!((s - a.sin()).abs() < 1e-10, "{v}");
            assert!((c - a.cos()).abs() < 1e-10, "{v}");
        }
    }

    #[test]
    fn normals_have_the_requested_moments() {
        let mut r = Rng::new(42, 0, 0);
        let mut z = vec![0.0f32; 200_001];
        r.fill_normal(&mut z, 1.0, 2.0);
        let n = z.len() as f64;
        let mean = z.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = z
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n;
        assert!((mean - 1.0).abs() < 0.02, "mean {mean}");
        assert!((var - 4.0).abs() < 0.08, "variance {var}");
        // About 4.55% of a normal lies beyond 2 standard deviations.
        let tails = z
            .iter()
            .filter(|&&x| (f64::from(x) - 1.0).abs() > 4.0)
            .count();
        assert!((0.04..0.051).contains(&(tails as f64 / n)), "{tails}");
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(5, 5, 5);
        assert!((0..1000).all(|_| r.below(7) < 7));
        assert_eq!(r.below(1), 0);
    }
}
