//! F16 and BF16 weight matrices: their element types as
//! [`WeightBlock`]s, the rounded activations their products read, and the
//! scalar reference dot products.
//!
//! Unquantized GGUF files (llama.cpp's `F16` and `BF16` file types, what
//! many uploads are) store every matrix as IEEE half or bfloat16 values.
//! Each value is its own "block" ([`WeightBlock::WEIGHTS`] is 1), so a
//! [`BlockMatrix`](crate::matvec::BlockMatrix) of `f16` or `bf16` is a
//! zero-copy view of the tensor like any other.
//!
//! # Why the activation is rounded
//!
//! GGML does not multiply an F16 weight by an f32 activation. Every weight
//! type has a "vec dot type", the type its dot product takes on the
//! activation side: Q8_0 for Q8_0 and Q4_0 weights, Q8_K for the K-quants,
//! F16 for F16 and BF16 for BF16. So for an F16 weight `ggml_mul_mat` first
//! converts each f32 activation row to f16 (rounding to nearest, ties to
//! even), then `ggml_vec_dot_f16` multiplies f16 by f16 with f32 products
//! and f32 (SIMD) or f64 (reference code) sums; for BF16 the row is rounded
//! to bfloat16 (`ggml_compute_fp32_to_bf16`, also ties to even) and
//! `ggml_vec_dot_bf16` runs. The rounding, not the order of the sums, is
//! what moves the result: leaving the activation in f32 changes every
//! product by up to 2^-11 (f16) or 2^-8 (bf16) of itself, which moves the
//! logits of the test model by orders of magnitude more than summation
//! order does. To give llama.cpp's logits this crate rounds the activation
//! exactly where and how GGML does: the F16 and BF16 forms of a
//! [`QuantizedVector`](super::QuantizedVector) ([`ActForms::F16`](super::ActForms::F16),
//! [`ActForms::BF16`](super::ActForms::BF16)), computed once per product
//! like the Q8_0 and Q8_K forms.
//!
//! The rounded values are kept widened back to f32 (exactly). A product of
//! two widened f16 values is exact in f32 (11 + 11 significant bits, and
//! the exponents stay in range), as is one of two bfloat16 values (8 + 8
//! bits) unless it overflows or underflows f32, where GGML's f32 product
//! does the same; so a kernel that widens only the weight computes GGML's
//! products, with half the conversions of one that widens both sides.
//!
//! # The reference kernels
//!
//! [`dot_f16_scalar`] and [`dot_bf16_scalar`] form each product in f32 and
//! add them left to right in f64, rounding to f32 once at the end, as
//! GGML's reference `ggml_vec_dot_f16` and `ggml_vec_dot_bf16` do
//! (`ggml_float` is `double`). The SIMD kernels (`quant::dot`) sum in f32
//! lane accumulators, so they are within
//! [`f32_error_bound`](super::dot::f32_error_bound) of the widened
//! operands of the reference, not its bits.

use half::{bf16, f16};

use super::block::{f16_bits_to_f32, WeightBlock};

impl WeightBlock for f16 {
    const WEIGHTS: usize = 1;
    const NAME: &'static str = "F16";
}

impl WeightBlock for bf16 {
    const WEIGHTS: usize = 1;
    const NAME: &'static str = "BF16";
}

/// `x` rounded to the nearest f16 (ties to even, overflow to infinity),
/// widened back to f32: GGML's `GGML_FP32_TO_FP16` then `GGML_FP16_TO_FP32`.
#[inline]
pub(crate) fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// `x` rounded to the nearest bfloat16 (ties to even; a NaN stays a NaN),
/// widened back to f32: GGML's `ggml_compute_fp32_to_bf16` then
/// `GGML_BF16_TO_FP32`.
#[inline]
pub(crate) fn round_bf16(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

/// A bfloat16 widened to f32: its 16 bits become the top half (exact).
#[inline(always)]
pub(crate) fn bf16_to_f32(b: bf16) -> f32 {
    f32::from_bits(u32::from(b.to_bits()) << 16)
}

/// An f16 widened to f32 (exact), inlined (see [`f16_bits_to_f32`]).
#[inline(always)]
pub(crate) fn f16_to_f32(h: f16) -> f32 {
    f16_bits_to_f32(h.to_bits())
}

/// Reference dot product of an F16 weight row with an activation already
/// rounded to f16 (the F16 form of a
/// [`QuantizedVector`](super::QuantizedVector)): each product in f32
/// (exact), summed left to right in f64, rounded to f32 at the end.
///
/// # Panics
///
/// If `w.len() != x.len()`.
pub(crate) fn dot_f16_scalar(w: &[f16], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_f16: lengths differ");
    w.iter()
        .zip(x)
        .fold(0.0f64, |s, (&a, &b)| s + f64::from(f16_to_f32(a) * b)) as f32
}

/// Reference dot product of a BF16 weight row with an activation already
/// rounded to bfloat16, as [`dot_f16_scalar`].
///
/// # Panics
///
/// If `w.len() != x.len()`.
pub(crate) fn dot_bf16_scalar(w: &[bf16], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_bf16: lengths differ");
    w.iter()
        .zip(x)
        .fold(0.0f64, |s, (&a, &b)| s + f64::from(bf16_to_f32(a) * b)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even_as_ggml_rounds() {
        // 1 + 2^-11 is halfway between two f16 values: ties go to even (1).
        assert_eq!(round_f16(1.0 + f32::powi(2.0, -11)), 1.0);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: even.
        assert_eq!(
            round_f16(1.0 + 3.0 * f32::powi(2.0, -11)),
            1.0 + f32::powi(2.0, -9)
        );
        assert_eq!(round_f16(65520.0), f32::INFINITY);
        assert_eq!(round_f16(-1e-9), -0.0);
        assert!(round_f16(f32::NAN).is_nan());
        // bf16 keeps 8 significant bits: 1 + 2^-8 ties to 1, 1 + 3 * 2^-8
        // to 1 + 2^-6.
        assert_eq!(round_bf16(1.0 + f32::powi(2.0, -8)), 1.0);
        assert_eq!(
            round_bf16(1.0 + 3.0 * f32::powi(2.0, -8)),
            1.0 + f32::powi(2.0, -6)
        );
        assert_eq!(round_bf16(3.0e38), bf16::from_f32(3.0e38).to_f32());
        assert!(round_bf16(f32::NAN).is_nan());
        for v in [0.0f32, -2.5, 1e-30, 3.0e38, 1.0e-40] {
            let b = bf16::from_f32(v);
            assert_eq!(bf16_to_f32(b).to_bits(), b.to_f32().to_bits());
            let h = f16::from_f32(v);
            assert_eq!(f16_to_f32(h).to_bits(), h.to_f32().to_bits());
        }
    }

    #[test]
    fn scalar_dots_sum_exact_products() {
        // Products exact in f32, sums in f64: 2^23 + 1 + 2^23 - 2^24 is 1,
        // where an f32 running sum would lose the 1 (2^24 + 1 rounds).
        let w = [2048.0f32, 1.0, 2048.0, -2048.0].map(f16::from_f32);
        let x = [4096.0f32, 1.0, 4096.0, 8192.0];
        assert_eq!(dot_f16_scalar(&w, &x), 1.0);
        let wb = [bf16::from_f32(0.5), bf16::from_f32(-3.0)];
        assert_eq!(dot_bf16_scalar(&wb, &[4.0, 1.0]), -1.0);
        assert_eq!(dot_f16_scalar(&[], &[]), 0.0);
        assert!(std::panic::catch_unwind(|| dot_bf16_scalar(&wb, &[1.0])).is_err());
    }
}
