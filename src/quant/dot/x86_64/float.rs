//! AVX2 + FMA + F16C kernels for F16 and BF16 weight rows.
//!
//! The weight row is widened eight values at a time, f16 with `vcvtph2ps`,
//! bfloat16 by zero-extending each value to 32 bits and shifting it into
//! the top half (both exact), and fused-multiply-added with the
//! activation, which was rounded to the weight's type once per product and
//! kept widened (`quant::float` explains why: the products are then
//! GGML's, exact in f32, and only the weight side needs converting). The
//! loop is `avx2::dot_f32`'s: four 8-lane accumulators over 32-value
//! steps, 8-value steps into the first, a fixed horizontal sum, the last
//! `len % 8` products added left to right.
//!
//! The four-row forms (one weight row, four activation rows, for a
//! prefill) widen each weight chunk once and run the single-row steps on
//! each row's own accumulators, so each of their results is the
//! single-row dot's, bit for bit.

use core::arch::x86_64::*;

use half::{bf16, f16};

use super::avx2::hsum;
use crate::quant::float::{bf16_to_f32, f16_to_f32};

/// Eight f16 values widened to f32 (`vcvtph2ps`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn widen_f16(v: [f16; 8]) -> __m256 {
    _mm256_cvtph_ps(bytemuck::cast(v))
}

/// Eight bfloat16 values widened to f32: each zero-extended to 32 bits
/// and shifted left by 16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn widen_bf16(v: [bf16; 8]) -> __m256 {
    let h: __m128i = bytemuck::cast(v);
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

/// The single-row and four-row dots of one element type `$t`, given its
/// eight-lane widening `$widen` and its scalar widening `$scalar` (for
/// the last `len % 8` values).
macro_rules! float_kernels {
    ($t:ty, $dot:ident, $dot_x4:ident, $widen:ident, $scalar:ident) => {
        /// Dot product of a weight row with an activation rounded to the
        /// weight's type (and widened).
        ///
        /// # Panics
        ///
        /// If `w.len() != x.len()`.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(crate) fn $dot(w: &[$t], x: &[f32]) -> f32 {
            assert_eq!(w.len(), x.len(), "float dot: lengths differ");
            let (w32, w_rest) = w.as_chunks::<32>();
            let (x32, x_rest) = x.as_chunks::<32>();
            let mut acc = [_mm256_setzero_ps(); 4];
            for (wc, xc) in w32.iter().zip(x32) {
                let wv: [[$t; 8]; 4] = bytemuck::cast(*wc);
                let xv: [__m256; 4] = bytemuck::cast(*xc);
                for i in 0..4 {
                    acc[i] = _mm256_fmadd_ps($widen(wv[i]), xv[i], acc[i]);
                }
            }
            let (w8, w_tail) = w_rest.as_chunks::<8>();
            let (x8, x_tail) = x_rest.as_chunks::<8>();
            for (wc, xc) in w8.iter().zip(x8) {
                let xv: __m256 = bytemuck::cast(*xc);
                acc[0] = _mm256_fmadd_ps($widen(*wc), xv, acc[0]);
            }
            let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
            w_tail
                .iter()
                .zip(x_tail)
                .fold(hsum(sum), |s, (&a, &b)| s + $scalar(a) * b)
        }

        /// `[dot(w, x[0]), .., dot(w, x[3])]`, bit for bit, widening each
        /// weight chunk once for the four rows.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(crate) fn $dot_x4(w: &[$t], x: [&[f32]; 4]) -> [f32; 4] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "float dot: lengths differ");
            }
            let (w32, w_rest) = w.as_chunks::<32>();
            let x32 = x.map(|xi| xi.as_chunks::<32>().0);
            let mut acc = [[_mm256_setzero_ps(); 4]; 4];
            for (k, wc) in w32.iter().enumerate() {
                let wv: [[$t; 8]; 4] = bytemuck::cast(*wc);
                let wf = [$widen(wv[0]), $widen(wv[1]), $widen(wv[2]), $widen(wv[3])];
                for (a, xr) in acc.iter_mut().zip(x32) {
                    let xv: [__m256; 4] = bytemuck::cast(xr[k]);
                    for i in 0..4 {
                        a[i] = _mm256_fmadd_ps(wf[i], xv[i], a[i]);
                    }
                }
            }
            let (w8, w_tail) = w_rest.as_chunks::<8>();
            let mut out = [0.0f32; 4];
            for ((o, mut a), xi) in out.iter_mut().zip(acc).zip(x) {
                let (x8, x_tail) = xi[w32.len() * 32..].as_chunks::<8>();
                for (wc, xc) in w8.iter().zip(x8) {
                    let xv: __m256 = bytemuck::cast(*xc);
                    a[0] = _mm256_fmadd_ps($widen(*wc), xv, a[0]);
                }
                let sum = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
                *o = w_tail
                    .iter()
                    .zip(x_tail)
                    .fold(hsum(sum), |s, (&p, &q)| s + $scalar(p) * q);
            }
            out
        }
    };
}

float_kernels!(f16, dot_f16w, dot_f16w_x4, widen_f16, f16_to_f32);
float_kernels!(bf16, dot_bf16w, dot_bf16w_x4, widen_bf16, bf16_to_f32);
