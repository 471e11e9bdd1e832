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
//! * normal deviates use Marsaglia's polar method with this module's own
//!   logarithm, built from `+ - * /` and nothing else, because the platform
//!   `ln`, `sin` and `cos` are not required to round the same everywhere
//!   (`sqrt` is: IEEE 754 requires it correctly rounded).

/// splitmix64's step: a bijective mix of a 64-bit counter, used to seed
/// xoshiro and to combine stream keys.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256**: fast, small state, good statistical quality; its outputs
/// are fully specified, so streams match on every platform.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    s: [u64; 4],
    /// The second deviate of the last polar pair, returned next.
    spare: Option<f64>,
}

impl Rng {
    /// The stream for `(seed, stream, row)`: each key is folded in through
    /// splitmix64, so nearby keys give unrelated streams.
    pub(crate) fn new(seed: u64, stream: u64, row: u64) -> Self {
        let mut k = seed;
        let a = splitmix64(&mut k);
        let mut k = a ^ stream;
        let b = splitmix64(&mut k);
        let mut k = b ^ row;
        let mut s = [0u64; 4];
        for x in &mut s {
            *x = splitmix64(&mut k);
        }
        // splitmix64 is a bijection of its counter, so four consecutive
        // outputs are never all zero (the one state xoshiro cannot leave);
        // guard anyway, since it costs nothing.
        if s == [0; 4] {
            s[0] = 1;
        }
        Self { s, spare: None }
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

    /// A uniform `f64` in `[-1, 1)` with 53 random bits.
    fn signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64) - 1.0
    }

    /// A standard normal deviate (mean 0, variance 1).
    pub(crate) fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // Marsaglia's polar method: a point uniform in the unit disc gives
        // two independent normals; about 21% of points are rejected.
        loop {
            let u = self.signed_unit();
            let v = self.signed_unit();
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let f = (-2.0 * ln(s) / s).sqrt();
                self.spare = Some(v * f);
                return u * f;
            }
        }
    }
}

/// Natural logarithm of a positive, finite `x`, from basic arithmetic only
/// (see the module documentation for why), accurate to a few ulps.
///
/// `x = m * 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, then
/// `ln m = 2 atanh(t)` with `t = (m - 1) / (m + 1)`, `|t| < 0.172`, whose
/// odd series converges by a factor `t^2 < 0.03` a term.
fn ln(x: f64) -> f64 {
    const LN_2: f64 = std::f64::consts::LN_2;
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7FF) as i64 - 1023;
    // Replace the exponent to get the mantissa in [1, 2). The polar method
    // only passes numbers in (0, 1), where subnormals would need a
    // renormalisation; they are below 2^-1022 and as good as zero here.
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    // atanh(t) / t = sum t^(2k) / (2k + 1); 12 terms leave < 1e-19.
    let mut sum = 0.0;
    for k in (0..12).rev() {
        sum = sum * t2 + 1.0 / f64::from(2 * k + 1);
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
            let x = (r.signed_unit() + 1.0) / 2.0 + 1e-300;
            let (ours, std) = (ln(x), x.ln());
            assert!((ours - std).abs() <= 4.0 * f64::EPSILON * std.abs().max(1.0));
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
    fn normals_have_unit_variance() {
        let mut r = Rng::new(42, 0, 0);
        let n = 200_000;
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..n {
            let z = r.normal();
            sum += z;
            sq += z * z;
        }
        let mean = sum / f64::from(n);
        let var = sq / f64::from(n) - mean * mean;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(5, 5, 5);
        assert!((0..1000).all(|_| r.below(7) < 7));
        assert_eq!(r.below(1), 0);
    }
}
