//! aarch64 NEON kernels with the dot-product extension (`dotprod`).
//!
//! `sdot` adds, into each of four `i32` lanes, the dot product of four
//! signed byte pairs: two of them compute a Q8_0 block's integer dot
//! product, where the plain [NEON kernel](super::neon) needs four widening
//! multiplies and four pairwise adds.
//!
//! The lanes are made equal to the plain kernel's lanes, not merely equal
//! in sum. Plain NEON's lane `k` holds the products of the byte pairs at
//! `2k`, `2k + 1`, `8 + 2k` and `9 + 2k` of each 16-byte half, while
//! `sdot`'s lane `k` takes bytes `4k..4k + 4`. Interleaving the 16-bit
//! pairs of the two halves (`zip1`, `zip2`, the same permutation on both
//! operands) moves exactly the plain kernel's byte pairs into each `sdot`
//! lane. The rest (converting the lanes to f32, fused-multiply-adding them
//! with `d_w * d_x` into two accumulators alternating between even and odd
//! blocks, one horizontal sum) is the plain kernel's sequence, so the two
//! kernels agree bit for bit and a row's result does not depend on whether
//! the CPU has the extension. Per block that is four permutes and two
//! `sdot`s against four widening multiplies and four pairwise adds; no
//! aarch64 timing of either kernel has been taken yet.
//!
//! The row loop below repeats the plain kernel's on purpose: it must be
//! compiled with `dotprod` enabled so that `block_lanes` (and `sdot`)
//! inline into it, which a loop shared with the plain kernel, compiled for
//! `neon` alone, could not do. `tests/prop_quant.rs::
//! neon_dot_equals_neon_bit_for_bit` keeps the two loops in step.
//!
//! `vdotq_s32` is not stable Rust, so `sdot` itself is one instruction of
//! inline assembly in `unsafe_core::simd::sdot`; this module is safe code
//! around it. The f32 kernels of this instruction set are plain NEON's.

use core::arch::aarch64::*;

use crate::quant::activation::ActBlock;
use crate::quant::block::BlockQ8_0;
use crate::quant::dot::scalar::for_rows;
use crate::unsafe_core::simd::sdot;

/// Reorders the 32 bytes `[h, g]` (two 16-byte halves, each eight byte
/// pairs `h0..h7`, `g0..g7`) as `[h0 g0 h1 g1 h2 g2 h3 g3]` and
/// `[h4 g4 h5 g5 h6 g6 h7 g7]`, so `sdot` lane `k` sums the pairs `k` and
/// `k + 4` of both halves, as the plain NEON kernel's lane `k` does.
#[inline]
#[target_feature(enable = "neon")]
fn interleave_pairs(qs: [i8; 32]) -> [int8x16_t; 2] {
    let [h, g]: [int16x8_t; 2] = bytemuck::cast(qs);
    [
        vreinterpretq_s8_s16(vzip1q_s16(h, g)),
        vreinterpretq_s8_s16(vzip2q_s16(h, g)),
    ]
}

/// Four `i32` lanes whose sum is the block's exact integer dot product,
/// each equal to the plain NEON kernel's lane.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn block_lanes(w: &BlockQ8_0, x: &ActBlock) -> int32x4_t {
    lanes(interleave_pairs(w.qs), x)
}

/// [`block_lanes`] given the weight block's interleaved bytes, which the
/// four-row kernel computes once for four activation rows.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn lanes([w0, w1]: [int8x16_t; 2], x: &ActBlock) -> int32x4_t {
    let [x0, x1] = interleave_pairs(x.qs);
    sdot(sdot(vdupq_n_s32(0), w0, x0), w1, x1)
}

/// Adds one block's term to the accumulator.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn block_fma(acc: float32x4_t, w: &BlockQ8_0, x: &ActBlock) -> float32x4_t {
    let d = vdupq_n_f32(w.scale_f32() * x.d);
    vfmaq_f32(acc, vcvtq_f32_s32(block_lanes(w, x)), d)
}

/// Dot product of a Q8_0 weight row with a quantized activation.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) fn dot_q8(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_q8: block counts differ");
    let (w2, w_rest) = w.as_chunks::<2>();
    let (x2, x_rest) = x.as_chunks::<2>();
    let mut acc0 = vdupq_n_f32(0.0);
    let mut acc1 = vdupq_n_f32(0.0);
    for ([wa, wb], [xa, xb]) in w2.iter().zip(x2) {
        acc0 = block_fma(acc0, wa, xa);
        acc1 = block_fma(acc1, wb, xb);
    }
    if let ([wl], [xl]) = (w_rest, x_rest) {
        acc0 = block_fma(acc0, wl, xl);
    }
    vaddvq_f32(vaddq_f32(acc0, acc1))
}

/// `[dot_q8(w, x[0]), .., dot_q8(w, x[3])]`, bit for bit (NaN payloads
/// aside), interleaving each weight block's bytes and widening its scale
/// once for the four rows and keeping each row's two accumulators and final
/// sum: the prefill matmul's kernel.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) fn dot_q8_x4(w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "dot_q8: block counts differ");
    }
    let term = |acc: float32x4_t, wi: [int8x16_t; 2], dw: f32, x: &ActBlock| {
        vfmaq_f32(acc, vcvtq_f32_s32(lanes(wi, x)), vdupq_n_f32(dw * x.d))
    };
    let mut even = [vdupq_n_f32(0.0); 4];
    let mut odd = [vdupq_n_f32(0.0); 4];
    let (w2, w_rest) = w.as_chunks::<2>();
    for (k, [wa, wb]) in w2.iter().enumerate() {
        let (ia, ib) = (interleave_pairs(wa.qs), interleave_pairs(wb.qs));
        let (da, db) = (wa.scale_f32(), wb.scale_f32());
        for i in 0..4 {
            even[i] = term(even[i], ia, da, &x[i][2 * k]);
            odd[i] = term(odd[i], ib, db, &x[i][2 * k + 1]);
        }
    }
    if let [wl] = w_rest {
        let (il, d) = (interleave_pairs(wl.qs), wl.scale_f32());
        for i in 0..4 {
            even[i] = term(even[i], il, d, &x[i][w.len() - 1]);
        }
    }
    core::array::from_fn(|i| vaddvq_f32(vaddq_f32(even[i], odd[i])))
}

/// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb` blocks.
///
/// # Panics
///
/// If `x.len() != nb` or `w.len() != nb * out.len()`.
#[target_feature(enable = "neon,dotprod")]
pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
    for_rows(w, nb, x.len(), out, |row| dot_q8(row, x));
}
