//! AVX-512 VNNI kernels (256-bit `vpdpbusd` from AVX512-VL, so the core
//! keeps its full clock and no 512-bit state is needed).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes and adds each group of
//! four products into an `i32` lane, without saturation. The weight bytes
//! are made unsigned by flipping their top bit (`w + 128`), which adds
//! `128 * (x[4j] + .. + x[4j+3])` to lane `j`; the accumulator starts at
//! the activation's precomputed `-128 * (x[4j] + .. + x[4j+3])`, so every
//! lane ends exactly where the AVX2 kernel's lane does, for any weight
//! byte including -128. The f32 part is the AVX2 kernel's, so the two
//! kernels return the same bits.

use core::arch::x86_64::*;

use super::avx2::scale;
use crate::quant::activation::ActBlock;
use crate::quant::block::BlockQ8_0;
use crate::quant::dot::scalar::for_rows;

/// Eight `i32` lanes whose sum is the block's exact integer dot product.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn block_lanes(w: &BlockQ8_0, x: &ActBlock) -> __m256i {
    let qw: __m256i = bytemuck::cast(w.qs);
    let qx: __m256i = bytemuck::cast(x.qs);
    let bias: __m256i = bytemuck::cast(x.neg_bias);
    let w_unsigned = _mm256_xor_si256(qw, _mm256_set1_epi8(i8::MIN));
    _mm256_dpbusd_epi32(bias, w_unsigned, qx)
}

/// Adds one block's term to the accumulator.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn block_fma(acc: __m256, w: &BlockQ8_0, x: &ActBlock) -> __m256 {
    let d = _mm256_set1_ps(scale(w) * x.d);
    _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block_lanes(w, x)), acc)
}

/// Dot product of a Q8_0 weight row with a quantized activation.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) fn dot_q8(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
    q8_row_loop!(w, x, block_fma)
}

/// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb` blocks.
///
/// # Panics
///
/// If `x.len() != nb` or `w.len() != nb * out.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
    for_rows(w, nb, x.len(), out, |row| dot_q8(row, x));
}
