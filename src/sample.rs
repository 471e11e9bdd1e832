//! Choosing the next token from logits: greedy, or seeded sampling with a
//! temperature and nucleus (top-p) cut.
//!
//! ```
//! use inferno_cpu::sample::Sampler;
//! let logits = [0.1f32, 2.0, 0.3, 1.9];
//! assert_eq!(Sampler::greedy().sample(&logits), 1);
//! // The same seed draws the same tokens.
//! let mut a = Sampler::new(0.8, 0.95, 42)?;
//! let mut b = Sampler::new(0.8, 0.95, 42)?;
//! let da: Vec<u32> = (0..20).map(|_| a.sample(&logits)).collect();
//! let db: Vec<u32> = (0..20).map(|_| b.sample(&logits)).collect();
//! assert_eq!(da, db);
//! # Ok::<(), inferno_cpu::sample::SamplerError>(())
//! ```

use thiserror::Error;

use crate::synth::SplitMix64;

/// A sampler setting out of range.
#[derive(Clone, Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum SamplerError {
    /// The temperature must be finite and at least 0 (0 is greedy).
    #[error("temperature {0} must be a finite number >= 0")]
    Temperature(f32),
    /// top-p must lie in `(0, 1]`.
    #[error("top-p {0} must be in (0, 1]")]
    TopP(f32),
}

/// Picks tokens from logits. Reuses one scratch buffer, so after the first
/// call it allocates nothing.
#[derive(Clone, Debug)]
pub struct Sampler {
    temperature: f32,
    top_p: f32,
    state: SplitMix64,
    candidates: Vec<(f32, u32)>,
}

impl Sampler {
    /// Always the most likely token (the first on ties).
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_p: 1.0,
            state: SplitMix64::new(0),
            candidates: Vec::new(),
        }
    }

    /// Samples from `softmax(logits / temperature)`, restricted to the
    /// smallest set of most likely tokens whose probabilities reach
    /// `top_p`; `temperature == 0` is greedy. The draws are a function of
    /// `seed` and the logits alone.
    ///
    /// # Errors
    ///
    /// [`SamplerError`] for a negative or non-finite temperature, or a
    /// top-p outside `(0, 1]`.
    pub fn new(temperature: f32, top_p: f32, seed: u64) -> Result<Self, SamplerError> {
        if !(temperature.is_finite() && temperature >= 0.0) {
            return Err(SamplerError::Temperature(temperature));
        }
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(SamplerError::TopP(top_p));
        }
        Ok(Self {
            temperature,
            top_p,
            state: SplitMix64::new(seed),
            candidates: Vec::new(),
        })
    }

    /// Whether this sampler always takes the most likely token.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// A uniform draw in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        self.state.next_f64()
    }

    /// The next token. An empty slice gives 0; NaN logits are never chosen
    /// unless every logit is NaN.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let Some(kept) = self.nucleus(logits) else {
            return argmax(logits);
        };
        let kept_mass: f64 = self.candidates[..kept]
            .iter()
            .map(|&(p, _)| f64::from(p))
            .sum();
        let mut r = self.uniform() * kept_mass;
        for &(p, id) in &self.candidates[..kept] {
            r -= f64::from(p);
            if r < 0.0 {
                return id;
            }
        }
        self.candidates[kept - 1].1
    }

    /// Leaves the nucleus in `candidates[..kept]`, most likely first (the
    /// lower id first on ties), each with its unnormalized probability, and
    /// returns `kept` (at least 1). `None` where sampling is greedy: a
    /// temperature of 0 or so small that `1 / temperature` is infinite,
    /// fewer than two logits, or a largest logit that is not finite.
    fn nucleus(&mut self, logits: &[f32]) -> Option<usize> {
        let inv_t = 1.0 / self.temperature;
        if self.is_greedy() || !inv_t.is_finite() || logits.len() < 2 {
            return None;
        }
        let max = logits
            .iter()
            .copied()
            .filter(|v| !v.is_nan())
            .fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() {
            return None;
        }
        let mut total = 0.0f64;
        self.candidates.clear();
        for (i, &l) in logits.iter().enumerate() {
            let p = if l.is_nan() {
                0.0
            } else {
                ((l - max) * inv_t).exp()
            };
            total += f64::from(p);
            self.candidates.push((p, i as u32));
        }
        // Only tokens above (1 - top_p) / (n - 1) of the mass can be in the
        // nucleus beside the most likely one (the rest together hold less
        // than 1 - top_p), so sort those alone: a few hundred entries
        // instead of the vocabulary. The most likely token has p = 1 and
        // is always kept: at a top-p below 1/n the bound can exceed it.
        let cutoff = ((1.0 - f64::from(self.top_p)) / (logits.len() - 1) as f64 * total).min(1.0);
        if self.top_p < 1.0 {
            self.candidates.retain(|&(p, _)| f64::from(p) >= cutoff);
        }
        self.candidates
            .sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut kept = self.candidates.len();
        let mut mass = 0.0f64;
        if self.top_p < 1.0 {
            let target = f64::from(self.top_p) * total;
            for (n, &(p, _)) in self.candidates.iter().enumerate() {
                mass += f64::from(p);
                if mass >= target {
                    kept = n + 1;
                    break;
                }
            }
        }
        Some(kept)
    }
}

/// The index of the largest value (the first one on ties; NaNs are
/// skipped), as a token id. 0 for an empty slice. What greedy decoding
/// takes at each step, and what [`Sampler::sample`] returns when it
/// samples greedily; also re-exported as `inferno_cpu::model::argmax`.
///
/// The selected kernel runs `argmax_lanes` compiled for its vector
/// width: one running maximum is a chain of dependent compares, 0.13 ms per
/// token over Qwen3's 151,936 logits on an AMD Zen 4 core (`inferno bench
/// --trace`'s `sample`), about 1% of a decode step.
pub fn argmax(logits: &[f32]) -> u32 {
    crate::quant::dot::selected().1.argmax(logits)
}

/// [`argmax`]'s index in two passes the compiler vectorizes: the largest
/// value (sixteen running maxima, lane `i` taking the values at `i` mod
/// 16, NaNs never taken), then the first chunk of sixteen holding it and
/// its first place there. The same index as one running maximum: the
/// first value equal to the largest (all of them compare equal to it, a
/// zero of either sign included), or 0 where no value exceeds negative
/// infinity. The kernels compile it for their vector width
/// (`inline(always)` inlines it there).
#[inline(always)]
pub(crate) fn argmax_lanes(logits: &[f32]) -> u32 {
    const LANES: usize = 16;
    let (chunks, rest) = logits.as_chunks::<LANES>();
    let mut lanes = [f32::NEG_INFINITY; LANES];
    for chunk in chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = if v > *m { v } else { *m };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(rest) {
        max = if v > max { v } else { max };
    }
    if max == f32::NEG_INFINITY {
        return 0;
    }
    for (c, chunk) in chunks.iter().enumerate() {
        let mut hits = [false; LANES];
        for (h, &v) in hits.iter_mut().zip(chunk) {
            *h = v == max;
        }
        if let Some(at) = hits.iter().position(|&h| h) {
            return u32::try_from(c * LANES + at).unwrap_or(u32::MAX);
        }
    }
    let done = chunks.len() * LANES;
    let first = rest
        .iter()
        .position(|&v| v == max)
        .map_or(0, |at| done + at);
    u32::try_from(first).unwrap_or(u32::MAX)
}

/// [`argmax`] as one running maximum, the definition it is tested
/// against.
#[cfg(test)]
fn argmax_plain(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    u32::try_from(best).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_tied_values() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[0.5; 7]), 0);
        assert_eq!(argmax(&[-1.0, f32::NAN, 2.0, -0.0, 2.0]), 2);
        assert_eq!(argmax(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), 0);
        assert_eq!(argmax(&[]), 0);
    }

    /// The lane-wise argmax gives the running maximum's index for any
    /// values (ties inside and across lanes, NaNs, infinities, signed
    /// zeros, lengths around the lane count).
    #[cfg_attr(
        miri,
        ignore = "proptest needs the working directory, which Miri isolates"
    )]
    #[test]
    fn argmax_equals_one_running_maximum() {
        use proptest::prelude::*;
        let value = prop_oneof![
            4 => -3i8..=3i8,
            1 => Just(i8::MIN),
            1 => Just(i8::MAX),
            1 => Just(0i8),
        ];
        // Or only values from a few specials and negatives, so that long
        // runs without a positive value (where every lane's maximum stays
        // negative or a zero of either sign) come up too.
        const SPECIAL: [f32; 9] = [
            f32::NEG_INFINITY,
            f32::NAN,
            -0.0,
            0.0,
            -1.0,
            -2.0,
            f32::MIN,
            -1.0e-45,
            1.0e-45,
        ];
        let specials = prop::sample::subsequence((0..SPECIAL.len()).collect::<Vec<_>>(), 1..=4)
            .prop_flat_map(|pick| {
                prop::collection::vec(prop::sample::select(pick), 0..100)
                    .prop_map(|idx| idx.into_iter().map(|i| SPECIAL[i]).collect::<Vec<f32>>())
            });
        let codes = prop::collection::vec(value, 0..80).prop_map(|codes| {
            codes
                .iter()
                .map(|&c| match c {
                    i8::MIN => f32::NAN,
                    i8::MAX => f32::INFINITY,
                    0 => -0.0,
                    1 => 0.0,
                    -3 => f32::NEG_INFINITY,
                    c => f32::from(c),
                })
                .collect::<Vec<f32>>()
        });
        proptest!(ProptestConfig::with_cases(1024), |(v in prop_oneof![codes, specials])| {
            prop_assert_eq!(argmax(&v), argmax_plain(&v), "{:?}", v);
            for kernel in crate::quant::Kernel::ALL {
                let Some(d) = kernel.dispatch() else { continue };
                prop_assert_eq!(d.argmax(&v), argmax_plain(&v), "{:?} {:?}", kernel, v);
            }
        });
        // The largest value last, first, and in each lane of a long slice.
        let mut long = vec![0.5f32; 1000];
        for at in [0, 15, 16, 17, 500, 991, 999] {
            long[at] = 2.0;
            assert_eq!(argmax(&long), at as u32);
            assert_eq!(argmax_lanes(&long), at as u32);
            long[at] = 0.5;
        }
    }

    #[test]
    fn rejects_bad_settings() {
        assert_eq!(
            Sampler::new(-1.0, 0.9, 0).unwrap_err(),
            SamplerError::Temperature(-1.0)
        );
        assert!(Sampler::new(f32::NAN, 0.9, 0).is_err());
        assert_eq!(
            Sampler::new(1.0, 0.0, 0).unwrap_err(),
            SamplerError::TopP(0.0)
        );
        assert!(Sampler::new(1.0, 1.5, 0).is_err());
    }

    #[test]
    fn top_p_keeps_the_nucleus_only() {
        // p = [0.5, 0.3, 0.2 spread over many]: top-p 0.6 keeps tokens 0 and 1.
        let mut logits = vec![0.0f32; 102];
        logits[0] = 0.5f32.ln();
        logits[1] = 0.3f32.ln();
        for l in &mut logits[2..] {
            *l = (0.2f32 / 100.0).ln();
        }
        let mut s = Sampler::new(1.0, 0.6, 7).unwrap();
        let mut seen = [0usize; 2];
        for _ in 0..2000 {
            let t = s.sample(&logits) as usize;
            assert!(t < 2, "token {t} is outside the nucleus");
            seen[t] += 1;
        }
        // 0.5 : 0.3 renormalised is 62.5% : 37.5%.
        let share = seen[0] as f64 / 2000.0;
        assert!((share - 0.625).abs() < 0.05, "{share}");
    }

    /// The ids of the nucleus, in the sampler's order.
    fn kept(temperature: f32, top_p: f32, logits: &[f32]) -> Vec<u32> {
        let mut s = Sampler::new(temperature, top_p, 0).unwrap();
        let kept = s.nucleus(logits).expect("not greedy");
        s.candidates[..kept].iter().map(|&(_, id)| id).collect()
    }

    #[test]
    fn top_p_keeps_exactly_the_smallest_most_likely_set() {
        // p = 0.5, 0.3 and 100 tokens of 0.002, in a shuffled order: the
        // nucleus of 0.861 is the two large ones and the first 31 small
        // ones by id (0.8 + 31 * 0.002 = 0.862), whatever the order.
        let mut logits = vec![0.002f32.ln(); 102];
        logits[57] = 0.5f32.ln();
        logits[3] = 0.3f32.ln();
        let small: Vec<u32> = (0..102).filter(|&i| i != 57 && i != 3).collect();
        let mut want = vec![57, 3];
        want.extend(&small[..31]);
        assert_eq!(kept(1.0, 0.861, &logits), want);
        assert_eq!(kept(1.0, 0.7, &logits), [57, 3]);
        assert_eq!(kept(1.0, 0.45, &logits), [57]);
        assert_eq!(kept(1.0, 1.0, &logits).len(), 102);
        // A temperature of 2 flattens the distribution to p ~ sqrt(p):
        // 0.7071, 0.5477, 0.0447 each (total 5.727). 0.5 of it (2.864)
        // needs both large ones and 36 small ones (1.255 + 36 * 0.0447 =
        // 2.865).
        let mut want = vec![57, 3];
        want.extend(&small[..36]);
        assert_eq!(kept(2.0, 0.5, &logits), want);
    }

    #[test]
    fn top_p_on_equal_logits_keeps_the_lowest_ids() {
        // 1000 equal logits: top-p 0.9 keeps 900 of them, the lowest ids.
        let logits = vec![0.25f32; 1000];
        assert_eq!(kept(1.0, 0.9, &logits), (0..900).collect::<Vec<u32>>());
        // A top-p below 1/n still keeps one token.
        assert_eq!(kept(1.0, 0.0005, &logits), [0]);
        assert_eq!(kept(1.0, 0.1, &[0.0, 0.0]), [0]);
        let mut s = Sampler::new(1.0, 0.1, 5).unwrap();
        assert_eq!(s.sample(&[0.0, 0.0]), 0);
        let mut s = Sampler::new(1.0, 0.9, 5).unwrap();
        for _ in 0..100 {
            assert!(s.sample(&logits) < 900);
        }
    }

    #[test]
    fn same_seed_same_draws_other_seed_other_draws() {
        // 64 equally likely tokens: 20 draws of one seed repeat exactly,
        // and no two of 50 seeds draw the same 20 (a repeat would have a
        // chance of about 1e-33).
        let logits = [0.0f32; 64];
        let draws = |seed: u64| {
            let mut s = Sampler::new(1.0, 1.0, seed).unwrap();
            (0..20).map(|_| s.sample(&logits)).collect::<Vec<u32>>()
        };
        let all: Vec<Vec<u32>> = (0..50).map(draws).collect();
        for (seed, d) in all.iter().enumerate() {
            assert_eq!(&draws(seed as u64), d, "seed {seed}");
            for (other, e) in all.iter().enumerate().skip(seed + 1) {
                assert_ne!(d, e, "seeds {seed} and {other} draw the same tokens");
            }
        }
    }

    #[test]
    fn a_temperature_whose_inverse_is_infinite_is_greedy() {
        let mut s = Sampler::new(f32::from_bits(1), 0.5, 1).unwrap();
        assert_eq!(s.sample(&[0.0, 2.0, 1.0, 2.0]), 1);
    }

    #[test]
    fn low_temperature_is_nearly_greedy_and_nan_is_skipped() {
        let logits = [1.0f32, f32::NAN, 3.0, 2.9];
        let mut s = Sampler::new(0.01, 1.0, 3).unwrap();
        for _ in 0..100 {
            assert_eq!(s.sample(&logits), 2);
        }
        assert_eq!(Sampler::greedy().sample(&logits), 2);
    }
}
