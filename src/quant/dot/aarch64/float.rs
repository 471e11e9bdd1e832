//! NEON kernels for F16 and BF16 weight rows.
//!
//! As on x86 (`x86_64::float`), only the weight row is widened, four
//! values at a time, and fused-multiply-added with the activation, which
//! was rounded to the weight's type once per product and kept widened;
//! the loop is `neon::dot_f32`'s: four 4-lane accumulators over 16-value
//! steps, 4-value steps into the first, one horizontal sum, the last
//! `len % 4` products added left to right. The four-row forms widen each
//! weight chunk once and run the same steps per row, so they return the
//! single-row bits.
//!
//! bfloat16 widens with one `ushll` by 16 (`vshll_n_u16`). The f16
//! conversion instruction (`fcvtl`) has no stable Rust intrinsic (its
//! vector type needs the unstable `f16` primitive), so f16 widens with
//! integer operations, exactly: the exponent and mantissa bits moved into
//! an f32's place and multiplied by 2^112 (the difference of the exponent
//! biases; exact for normal and subnormal halves alike), infinities and
//! NaNs selected apart, the sign put back.

use core::arch::aarch64::*;

use half::{bf16, f16};

use crate::quant::float::{bf16_to_f32, f16_to_f32};

/// Four f16 values widened to f32 (exactly; NaN payloads kept as they
/// are, signalling or quiet).
#[inline]
#[target_feature(enable = "neon")]
fn widen_f16(v: [f16; 4]) -> float32x4_t {
    let u = vmovl_u16(bytemuck::cast::<[f16; 4], uint16x4_t>(v));
    let sign = vshlq_n_u32::<16>(vandq_u32(u, vdupq_n_u32(0x8000)));
    let bits = vshlq_n_u32::<13>(vandq_u32(u, vdupq_n_u32(0x7fff)));
    const TWO_POW_112: f32 = f32::from_bits((112 + 127) << 23);
    let finite = vmulq_f32(vreinterpretq_f32_u32(bits), vdupq_n_f32(TWO_POW_112));
    // Exponent 31 (infinity, NaN) is at or above 0x0f80_0000 once moved.
    let special = vcgeq_u32(bits, vdupq_n_u32(0x0f80_0000));
    let inf_nan = vorrq_u32(bits, vdupq_n_u32(0x7f80_0000));
    let magnitude = vbslq_u32(special, inf_nan, vreinterpretq_u32_f32(finite));
    vreinterpretq_f32_u32(vorrq_u32(magnitude, sign))
}

/// Four bfloat16 values widened to f32 (shifted into the top halves).
#[inline]
#[target_feature(enable = "neon")]
fn widen_bf16(v: [bf16; 4]) -> float32x4_t {
    vreinterpretq_f32_u32(vshll_n_u16::<16>(bytemuck::cast::<[bf16; 4], uint16x4_t>(
        v,
    )))
}

/// The single-row and four-row dots of one element type (see
/// `x86_64::float` for the x86 twin).
macro_rules! float_kernels {
    ($t:ty, $dot:ident, $dot_x4:ident, $widen:ident, $scalar:ident) => {
        /// Dot product of a weight row with an activation rounded to the
        /// weight's type (and widened).
        ///
        /// # Panics
        ///
        /// If `w.len() != x.len()`.
        #[target_feature(enable = "neon")]
        pub(crate) fn $dot(w: &[$t], x: &[f32]) -> f32 {
            assert_eq!(w.len(), x.len(), "float dot: lengths differ");
            let (w16, w_rest) = w.as_chunks::<16>();
            let (x16, x_rest) = x.as_chunks::<16>();
            let mut acc = [vdupq_n_f32(0.0); 4];
            for (wc, xc) in w16.iter().zip(x16) {
                let wv: [[$t; 4]; 4] = bytemuck::cast(*wc);
                let xv: [float32x4_t; 4] = bytemuck::cast(*xc);
                for i in 0..4 {
                    acc[i] = vfmaq_f32(acc[i], $widen(wv[i]), xv[i]);
                }
            }
            let (w4, w_tail) = w_rest.as_chunks::<4>();
            let (x4, x_tail) = x_rest.as_chunks::<4>();
            for (wc, xc) in w4.iter().zip(x4) {
                let xv: float32x4_t = bytemuck::cast(*xc);
                acc[0] = vfmaq_f32(acc[0], $widen(*wc), xv);
            }
            let sum = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
            w_tail
                .iter()
                .zip(x_tail)
                .fold(vaddvq_f32(sum), |s, (&a, &b)| s + $scalar(a) * b)
        }

        /// `[dot(w, x[0]), .., dot(w, x[3])]`, bit for bit, widening each
        /// weight chunk once for the four rows.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = "neon")]
        pub(crate) fn $dot_x4(w: &[$t], x: [&[f32]; 4]) -> [f32; 4] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "float dot: lengths differ");
            }
            let (w16, w_rest) = w.as_chunks::<16>();
            let x16 = x.map(|xi| xi.as_chunks::<16>().0);
            let mut acc = [[vdupq_n_f32(0.0); 4]; 4];
            for (k, wc) in w16.iter().enumerate() {
                let wv: [[$t; 4]; 4] = bytemuck::cast(*wc);
                let wf = [$widen(wv[0]), $widen(wv[1]), $widen(wv[2]), $widen(wv[3])];
                for (a, xr) in acc.iter_mut().zip(x16) {
                    let xv: [float32x4_t; 4] = bytemuck::cast(xr[k]);
                    for i in 0..4 {
                        a[i] = vfmaq_f32(a[i], wf[i], xv[i]);
                    }
                }
            }
            let (w4, w_tail) = w_rest.as_chunks::<4>();
            let mut out = [0.0f32; 4];
            for ((o, mut a), xi) in out.iter_mut().zip(acc).zip(x) {
                let (x4, x_tail) = xi[w16.len() * 16..].as_chunks::<4>();
                for (wc, xc) in w4.iter().zip(x4) {
                    let xv: float32x4_t = bytemuck::cast(*xc);
                    a[0] = vfmaq_f32(a[0], $widen(*wc), xv);
                }
                let sum = vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3]));
                *o = w_tail
                    .iter()
                    .zip(x_tail)
                    .fold(vaddvq_f32(sum), |s, (&p, &q)| s + $scalar(p) * q);
            }
            out
        }
    };
}

float_kernels!(f16, dot_f16w, dot_f16w_x4, widen_f16, f16_to_f32);
float_kernels!(bf16, dot_bf16w, dot_bf16w_x4, widen_bf16, bf16_to_f32);
