//! The element-wise steps of the forward pass: RMSNorm, RoPE, softmax and
//! SwiGLU (attention, which every backend fans out, is `attention`).
//!
//! They are small next to the products (a few thousand values per token):
//! each call runs on one thread (a prefill fans its rows out over the
//! backend's threads, one call per row), and they follow GGML's
//! arithmetic where it changes the rounding (sums of squares and softmax
//! normalizers in `f64`, RoPE angles by repeated multiplication), so the
//! logits stay close to llama.cpp's. The `f64` sums run in eight lanes
//! where GGML keeps one: in `f64` the two orders differ by about `1e-16`
//! of the sum, which reaches the `f32` result only at a rounding
//! boundary.

use half::f16;

/// `out = x / rms(x) * w`, with `rms(x) = sqrt(mean(x^2) + eps)`.
///
/// As GGML: the squares are summed in `f64`, the scale is computed in
/// `f32`, and `x` is scaled before the weight is applied.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    for ((o, &xi), &wi) in out.iter_mut().zip(x).zip(w) {
        *o = (xi * scale) * wi;
    }
}

/// [`rms_norm`] in place.
pub(crate) fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (xi, &wi) in x.iter_mut().zip(w) {
        *xi = (*xi * scale) * wi;
    }
}

fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum = sum_f64(x, |v| v * v);
    let mean = (sum / x.len().max(1) as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// The sum of `f(v)` over the values `v` of `x` in `f64`: eight running
/// sums, lane `i` taking the values at `i` mod 8, then added as a fixed
/// tree. One running sum made a chain of dependent adds as long as the
/// slice: 6% of decode attention's time after a long prompt (the softmax's
/// normalizer), and most of the QK-norm's (a sum of squares per head) on a
/// Zen 5 core. The lanes are a register array stepped eight values at a
/// time: indexed by the value's position mod 8, the compiler kept them on
/// the stack, each step a store the next one waited for (on an AMD Zen 4
/// core the decode step's norms took 0.094 ms and the QK-norm, RoPE and
/// cache writes 0.25 ms per token so, `inferno bench --trace`).
#[inline(always)]
fn sum_f64(x: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    let (chunks, rest) = x.as_chunks::<8>();
    let mut lanes = [0.0f64; 8];
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l += f64::from(f(v));
        }
    }
    for (l, &v) in lanes.iter_mut().zip(rest) {
        *l += f64::from(f(v));
    }
    let [a, b, c, d, e, f, g, h] = lanes;
    ((a + e) + (c + g)) + ((b + f) + (d + h))
}

/// How to build RoPE angles: pair `i` of a head turns by
/// `pos * base^(-2i / head_dim)`.
#[derive(Clone, Debug)]
pub(crate) struct RopeAngles {
    /// Pairs per head (`head_dim / 2`).
    half: usize,
    theta_scale: f32,
}

impl RopeAngles {
    pub(crate) fn new(head_dim: usize, base: f32) -> Self {
        Self {
            half: head_dim / 2,
            theta_scale: base.powf(-2.0 / head_dim as f32),
        }
    }

    /// The cosines and sines of positions `p0..p0 + n` into `cos` and `sin`
    /// (`n` rows of `head_dim / 2` each), the power built by repeated
    /// multiplication as GGML builds it: a forward pass computes them once
    /// for its rows, not once per layer.
    pub(crate) fn fill_rows(&self, p0: usize, cos: &mut [f32], sin: &mut [f32]) {
        let half = self.half.max(1);
        for (i, (c, s)) in cos
            .chunks_exact_mut(half)
            .zip(sin.chunks_exact_mut(half))
            .enumerate()
        {
            fill_angles(p0 + i, self.theta_scale, c, s);
        }
    }
}

/// One position's angles (see [`RopeAngles::fill_rows`]).
fn fill_angles(pos: usize, theta_scale: f32, cos: &mut [f32], sin: &mut [f32]) {
    let mut theta = pos as f32;
    for (c, s) in cos.iter_mut().zip(sin) {
        (*s, *c) = theta.sin_cos();
        theta *= theta_scale;
    }
}

/// Rotates one head in NEOX style: value `i` pairs with value
/// `i + head_dim / 2` (the halves rotate, not adjacent values), pair `i`
/// turning by the angle whose cosine and sine are `cos[i]`, `sin[i]`.
pub(crate) fn rotate_neox(cos: &[f32], sin: &[f32], head: &mut [f32]) {
    let half = cos.len();
    let (a, b) = head.split_at_mut(half);
    for (((x0, x1), &c), &s) in a.iter_mut().zip(b.iter_mut()).zip(cos).zip(sin) {
        let (u, v) = (*x0, *x1);
        *x0 = u * c - v * s;
        *x1 = u * s + v * c;
    }
}

/// `e^x` in plain `f32` arithmetic, within 2 ulp of the exact value over
/// the range where it is a normal number; 0 below it (`x < -87.33`),
/// infinity above 88, NaN for NaN.
///
/// The C library's `expf` is a call per value; this is a few multiplies
/// and adds with no branches the compiler cannot turn into selects, so a
/// loop over a slice of them vectorizes (the softmax runs it on every
/// attention score). It uses no fused
/// multiply-add, so it returns the same bits on every CPU and backend.
/// The method is the usual one: `x = n ln 2 + r` with `n` the nearest
/// integer to `x / ln 2` (found by adding and subtracting `1.5 * 2^23`, which
/// also leaves `n` in the low bits of the sum) and `ln 2` split in two so
/// `r` is exact, `e^r` by a degree-7 polynomial on `|r| <= ln 2 / 2`
/// (Cephes' coefficients), and `2^n` built in the exponent bits.
#[inline]
pub(crate) fn exp(x: f32) -> f32 {
    const HI: f32 = 88.0;
    const LO: f32 = -87.336_55;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // `clamp` keeps a NaN, and it stays NaN through every step below.
    let xc = x.clamp(LO, HI);
    let t = xc * core::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let p = p * (r * r) + r + 1.0;
    // `n` is in `-126..=127`, so `n + 127` is a normal exponent.
    let n_bits = t.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    let scale = f32::from_bits(((n_bits + 127) as u32) << 23);
    let y = p * scale;
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y
    }
}

/// `EXP_TABLE[i]`: the bits of `2^(i / 32)` (rounded to the nearest
/// `f64`) less `i << 47`, so that adding `k << 47` for an integer `k`
/// with `k % 32 == i` gives the bits of `2^(k / 32)` ([`exp_f64`]).
/// Computed from the exact powers (60 digits) and rounded once.
pub(crate) const EXP_TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `32 / ln 2`, [`exp_f64`]'s scale into 32nds of a power of two.
pub(crate) const EXP_INV_LN2_32: f64 = f64::from_bits(0x3ff7_1547_652b_82fe) * 32.0;
/// `1.5 * 2^52`: added to a double below `2^51` in magnitude, it leaves
/// the nearest integer in the low bits.
pub(crate) const EXP_SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// [`exp_f64`]'s cubic for `2^(r / 32) - 1`, `r` in `[-1/2, 1/2]`:
/// coefficients of `r^3`, `r^2` and `r`.
pub(crate) const EXP_POLY: [f64; 3] = [
    f64::from_bits(0x3fac_6af8_4b91_2394) / (32.0 * 32.0 * 32.0),
    f64::from_bits(0x3fce_bfce_50fa_c4f3) / (32.0 * 32.0),
    f64::from_bits(0x3fe6_2e42_ff0c_52d6) / 32.0,
];

/// Whether [`exp_f64`] computes `e^x` itself: `|x| < 88` (the top twelve
/// bits of the magnitude below 88's); otherwise, NaN included, it
/// returns `f32::exp(x)`.
#[inline(always)]
pub(crate) fn exp_f64_in_range(x: f32) -> bool {
    (x.to_bits() >> 20) & 0x7ff < 0x42b
}

/// `e^x` for an `f32`, evaluated in `f64` and rounded once: `x * 32 / ln
/// 2 = k + r` with `k` the nearest integer (by [`EXP_SHIFT`]) and `r`
/// from one fused multiply-add, `2^(k / 32)` from [`EXP_TABLE`] with `k /
/// 32` added to its exponent, `2^(r / 32)` by the cubic [`EXP_POLY`]
/// (fused multiply-adds), their product rounded to `f32`. Outside `|x| <
/// 88` (and for NaN) it is `f32::exp(x)`.
///
/// This is the method of glibc's `expf` (2.27 and later, in the build
/// it runs on x86_64 CPUs with FMA and AVX2, whose reduction is fused):
/// with glibc 2.36 on an AMD EPYC (Zen 4) VM the two returned the same
/// bits for every one of the 2,237,661,184 `f32` values below 88 in
/// magnitude (`every_expf_is_the_c_librarys`, run by hand;
/// `exp_f64_gives_the_recorded_expf_bits` checks a sample against
/// recorded bits on every platform). Unlike a call to `expf`, it is plain
/// arithmetic the SIMD kernels run on many values at once
/// (`Dispatch::swiglu`), with the same bits; within that range its bits
/// do not depend on the platform's `expf`, only on `f64::mul_add` being
/// correctly rounded (an FMA instruction, or the C library's `fma` where
/// the build has none).
#[inline(always)]
pub(crate) fn exp_f64(x: f32) -> f32 {
    if !exp_f64_in_range(x) {
        return x.exp();
    }
    let xd = f64::from(x);
    let kd = EXP_INV_LN2_32 * xd + EXP_SHIFT;
    let ki = kd.to_bits();
    let kd = kd - EXP_SHIFT;
    let r = EXP_INV_LN2_32.mul_add(xd, -kd);
    let s = f64::from_bits(EXP_TABLE[(ki % 32) as usize].wrapping_add(ki << 47));
    let [c0, c1, c2] = EXP_POLY;
    let p = c0.mul_add(r, c1);
    let q = c2.mul_add(r, 1.0);
    let y = p.mul_add(r * r, q);
    (y * s) as f32
}

/// `gate = silu(gate) * up`, the SwiGLU of the MLP: `x / (1 + e^-x) * u`,
/// with [`exp_f64`] (the bits of glibc's `expf` on x86_64 CPUs with FMA
/// and AVX2).
///
/// That `expf`, not [`exp`]: with [`exp`] one activation of the Q8_0
/// fixture crossed an 8-bit rounding boundary against llama.cpp's
/// (`tests/llama_logits.rs`, 2e-3 at one position). The x86 kernels run
/// the same operations sixteen or eight values at a time
/// (`Dispatch::swiglu`), with the same bits.
#[inline(always)]
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        *g = x / (1.0 + exp_f64(-x)) * u;
    }
}

/// `x += y`.
pub(crate) fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Rounds every value to the nearest `f16` (and back), as GGML rounds an
/// `f32` operand meeting an `f16` one in a product.
pub(crate) fn round_f16(x: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    // Through `half`'s slice conversions, which use F16C where the CPU has
    // it (a value at a time, each conversion was a call that checked for
    // it: a tenth of a prefill's attention). Both round to nearest even, as
    // `f16::from_f32` does.
    let mut buf = [f16::ZERO; 64];
    for chunk in x.chunks_mut(64) {
        let h = &mut buf[..chunk.len()];
        h.convert_from_f32_slice(chunk);
        h.convert_to_f32_slice(chunk);
    }
}

/// In-place softmax of `x`, with the normalizer summed in `f64`; returns
/// the largest value and that normalizer (the sum of `exp(x - max)`), with
/// which attention merges the softmaxes of its parts.
///
/// Attention runs it through `Dispatch::softmax`, which compiles this
/// code for the CPU's vector width (the same operations, so the same
/// bits); `inline(always)` makes sure it is inlined there, where a plain
/// `inline` left the AVX2 build calling this baseline one.
#[inline(always)]
pub(crate) fn softmax(x: &mut [f32]) -> (f32, f64) {
    // `f32::max` may return either zero when -0.0 meets +0.0, and which
    // one depends on how the loop was vectorized; `+ 0.0` makes a zero
    // maximum +0.0 on every build (it changes no other value).
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) + 0.0;
    // Two passes: the first vectorizes, the second keeps the sum's order.
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    let sum = sum_f64(x, |v| v);
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
    (max, sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a (64-bit) over the little-endian bits of `f(x)` for every
    /// `x` of the sample the `expf` tests use that lies in `exp_f64`'s own
    /// range: bit patterns 0, 1021, 2042, ... (2,191,637 values).
    fn sample_fingerprint(f: impl Fn(f32) -> f32) -> (u64, u32) {
        let (mut h, mut n) = (0xcbf2_9ce4_8422_2325u64, 0u32);
        for x in (0..=u32::MAX).step_by(1021).map(f32::from_bits) {
            if !exp_f64_in_range(x) {
                continue;
            }
            n += 1;
            for b in f(x).to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100_0000_01b3);
            }
        }
        (h, n)
    }

    /// The fingerprint of glibc 2.36's `expf` (Debian 12, x86_64, on a CPU
    /// with FMA and AVX2, where glibc runs its FMA build) over the sample,
    /// recorded from `f32::exp` there (`expf_sample_fingerprint` prints it
    /// again on any machine).
    const GLIBC_EXPF_SAMPLE: u64 = 0x2c90_5c09_c206_22f5;

    /// `exp_f64` gives the recorded bits of glibc's `expf` on a sample of
    /// two million values of its range, on every platform: a check of this
    /// crate's function that does not depend on the machine's C library
    /// (only on its `fma`, where the target has no FMA instruction).
    #[cfg_attr(miri, ignore = "four million steps of a sample")]
    #[test]
    fn exp_f64_gives_the_recorded_expf_bits() {
        assert_eq!(sample_fingerprint(exp_f64), (GLIBC_EXPF_SAMPLE, 2_191_637));
    }

    /// The C library's `expf` over the same sample, against the recorded
    /// fingerprint: run by hand where the C library is glibc 2.27 or later
    /// on a CPU with FMA and AVX2 (`cargo test --lib -- --ignored
    /// expf_sample_fingerprint`); elsewhere glibc picks another `expf`
    /// (its reduction rounded otherwise) and a few values differ.
    #[test]
    #[ignore = "compares the machine's C library, not this crate"]
    fn expf_sample_fingerprint() {
        let (h, n) = sample_fingerprint(f32::exp);
        eprintln!("expf over the sample: {n} values, fingerprint {h:#018x}");
        assert_eq!((h, n), (GLIBC_EXPF_SAMPLE, 2_191_637));
    }

    /// Every bit pattern below 88 in magnitude: `exp_f64` against the C
    /// library's `expf`, and each SIMD kernel this CPU runs, its SwiGLU
    /// with `up = 1` (`x / (1 + e^-x)`) against the same with `expf`.
    /// About a minute a kernel in release, and only meaningful where glibc
    /// runs its FMA build (glibc 2.27 or later, FMA and AVX2), so run by
    /// hand (`cargo test --release --lib -- --ignored every_expf`).
    #[cfg(target_arch = "x86_64")]
    #[test]
    #[ignore = "a minute a kernel in release: every f32 bit pattern, against the C library"]
    fn every_expf_is_the_c_librarys() {
        use crate::quant::Kernel;
        let kernels: Vec<_> = Kernel::ALL.iter().filter_map(|k| k.dispatch()).collect();
        let (mut bad, mut checked) = (0u64, 0u64);
        let mut xs = Vec::with_capacity(4096);
        let ones = [1.0f32; 4096];
        let check = |xs: &mut Vec<f32>| {
            let mut wrong = 0;
            for d in &kernels {
                let mut got = xs.clone();
                d.swiglu(&mut got, &ones[..xs.len()]);
                for (&x, &g) in xs.iter().zip(&got) {
                    let want = x / (1.0 + (-x).exp());
                    if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
                        wrong += 1;
                    }
                }
            }
            xs.clear();
            wrong
        };
        for bits in 0..=u32::MAX {
            let x = f32::from_bits(bits);
            if exp_f64_in_range(x) {
                checked += 1;
                if exp_f64(x).to_bits() != x.exp().to_bits() {
                    bad += 1;
                }
                xs.push(x);
                if xs.len() == 4096 {
                    bad += check(&mut xs);
                }
            }
        }
        bad += check(&mut xs);
        assert_eq!(
            bad,
            0,
            "{bad} differ ({checked} values, {} kernels)",
            kernels.len()
        );
        assert_eq!(checked, 2_237_661_184);
    }

    /// `exp_f64` is `e^x` to within one unit in the last place over its
    /// own range, on every platform (no C library compared).
    #[test]
    fn exp_f64_is_within_an_ulp() {
        for i in -8800..8800 {
            let x = i as f32 / 100.0 + 0.003;
            let got = f64::from(exp_f64(x));
            let exact = f64::from(x).exp();
            let ulp =
                f64::from(f32::from_bits((exact as f32).to_bits() + 1)) - f64::from(exact as f32);
            assert!(
                (got - exact).abs() <= ulp,
                "exp_f64({x}) = {got}, e^x = {exact}"
            );
        }
    }

    #[test]
    fn rms_norm_unit_weight_has_unit_rms() {
        let x: Vec<f32> = (0..64).map(|i| i as f32 - 20.0).collect();
        let mut out = vec![0.0; 64];
        rms_norm(&x, &[1.0; 64], 1e-6, &mut out);
        let ms: f32 = out.iter().map(|v| v * v).sum::<f32>() / 64.0;
        assert!((ms - 1.0).abs() < 1e-4, "{ms}");
    }

    #[test]
    fn rope_rotates_halves_and_keeps_norm() {
        let r = RopeAngles::new(8, 10_000.0);
        let (mut cos, mut sin) = ([0.0f32; 8], [0.0f32; 8]);
        // Positions 0 and 3, one row of four pairs each.
        r.fill_rows(0, &mut cos[..4], &mut sin[..4]);
        r.fill_rows(3, &mut cos[4..], &mut sin[4..]);
        let mut h = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let orig = h;
        rotate_neox(&cos[..4], &sin[..4], &mut h);
        assert_eq!(h, orig, "position 0 is the identity");
        rotate_neox(&cos[4..], &sin[4..], &mut h);
        // Pair 0 is (h[0], h[4]) turned by 3 radians.
        let (c, s) = (3.0f32.cos(), 3.0f32.sin());
        assert!((h[0] - (1.0 * c - 5.0 * s)).abs() < 1e-5);
        assert!((h[4] - (1.0 * s + 5.0 * c)).abs() < 1e-5);
        let n0: f32 = orig.iter().map(|v| v * v).sum();
        let n1: f32 = h.iter().map(|v| v * v).sum();
        assert!((n0 - n1).abs() < 1e-3);
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut x = [1.0, 2.0, 3.0, -1000.0];
        softmax(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(x[3], 0.0);
        assert!(x[2] > x[1] && x[1] > x[0]);
    }

    #[test]
    fn softmax_of_logits_past_exp_overflow() {
        // exp(100) overflows f32 (its largest exponent is about 88.7): the
        // max must be subtracted first, or every weight is inf/inf = NaN.
        let mut x = [100.0f32, 100.0 - 2.0f32.ln(), -50.0];
        softmax(&mut x);
        assert!((x[0] - 2.0 / 3.0).abs() < 1e-6, "{x:?}");
        assert!((x[1] - 1.0 / 3.0).abs() < 1e-6, "{x:?}");
        assert_eq!(x[2], 0.0);
    }

    /// `exp` against `f64`'s over the whole normal range (every 97th
    /// float bit pattern of it, plus the boundaries): at most 2 ulp; 0,
    /// infinity and NaN outside it.
    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0.0f64;
        let check = |x: f32, worst: &mut f64| {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            let ulp = f64::from(f32::EPSILON) * want;
            let e = (got - want).abs() / ulp;
            assert!(e <= 2.0, "exp({x:e}) = {got:e}, want {want:e}: {e:.2} ulp");
            *worst = worst.max(e);
        };
        for bits in (0u32..0x42b0_0000).step_by(97) {
            let x = f32::from_bits(bits);
            check(x, &mut worst);
            if -x >= -87.336_55 {
                check(-x, &mut worst);
            }
        }
        for x in [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            88.0,
            -87.336_55,
            0.346_573_6,
            -0.346_573_6,
        ] {
            check(x, &mut worst);
        }
        assert!(worst > 0.0, "every value exact: the check compares nothing");
        assert_eq!(exp(-87.4), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(88.1), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }
}
