//! aarch64 NEON kernels.
//!
//! Per Q8_0 block they widen-multiply the 32 byte pairs (`smull`, `smull2`)
//! and pairwise-accumulate the `i16` products into four exact `i32` lanes
//! (`saddlp`, `sadalp`). The lanes are converted to f32 and
//! fused-multiply-added with the block's `d_w * d_x`, two accumulators
//! alternating between even and odd blocks, and one horizontal sum ends the
//! row.
//!
//! Where the CPU has the dot-product extension, the
//! [`NeonDot`](super::neon_dot) kernel does the integer part with `sdot`
//! instead, producing the same lanes; this kernel serves the CPUs without
//! it (such as Cortex-A53 and A72) and provides the f32 kernels of both.
//!
//! NEON is baseline on aarch64, yet Rust still requires `#[target_feature]`
//! on the functions that use its intrinsics and an `unsafe` call into them,
//! made by `unsafe_core::simd::NeonToken`. Vectors are loaded from the
//! blocks by value with `bytemuck::cast`.

use core::arch::aarch64::*;

use crate::quant::activation::ActBlock;
use crate::quant::block::BlockQ8_0;
use crate::quant::dot::scalar::for_rows;
use crate::quant::q4_0::BlockQ4_0;

/// Four `i32` lanes whose sum is the block's exact integer dot product.
#[inline]
#[target_feature(enable = "neon")]
fn block_lanes(w: &BlockQ8_0, x: &ActBlock) -> int32x4_t {
    lanes_s8(bytemuck::cast(w.qs), x)
}

/// Four `i32` lanes whose sum is the exact dot product of 32 signed
/// weight bytes with an activation block.
#[inline]
#[target_feature(enable = "neon")]
fn lanes_s8([w0, w1]: [int8x16_t; 2], x: &ActBlock) -> int32x4_t {
    let [x0, x1]: [int8x16_t; 2] = bytemuck::cast(x.qs);
    let p0 = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
    let p1 = vmull_high_s8(w0, x0);
    let p2 = vmull_s8(vget_low_s8(w1), vget_low_s8(x1));
    let p3 = vmull_high_s8(w1, x1);
    let s = vpaddlq_s16(p0);
    let s = vpadalq_s16(s, p1);
    let s = vpadalq_s16(s, p2);
    vpadalq_s16(s, p3)
}

/// Adds one block's term to the accumulator.
#[inline]
#[target_feature(enable = "neon")]
fn block_fma(acc: float32x4_t, w: &BlockQ8_0, x: &ActBlock) -> float32x4_t {
    let d = vdupq_n_f32(w.scale_f32() * x.d);
    vfmaq_f32(acc, vcvtq_f32_s32(block_lanes(w, x)), d)
}

/// Dot product of a Q8_0 weight row with a quantized activation.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "neon")]
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
/// aside), widening each weight block's scale once for the four rows and
/// keeping each row's two accumulators and final sum: the prefill matmul's
/// kernel.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q8_x4(w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "dot_q8: block counts differ");
    }
    let term = |acc: float32x4_t, w: &BlockQ8_0, dw: f32, x: &ActBlock| {
        vfmaq_f32(acc, vcvtq_f32_s32(block_lanes(w, x)), vdupq_n_f32(dw * x.d))
    };
    let mut even = [vdupq_n_f32(0.0); 4];
    let mut odd = [vdupq_n_f32(0.0); 4];
    let (w2, w_rest) = w.as_chunks::<2>();
    for (k, [wa, wb]) in w2.iter().enumerate() {
        let (da, db) = (wa.scale_f32(), wb.scale_f32());
        for i in 0..4 {
            even[i] = term(even[i], wa, da, &x[i][2 * k]);
            odd[i] = term(odd[i], wb, db, &x[i][2 * k + 1]);
        }
    }
    if let [wl] = w_rest {
        let d = wl.scale_f32();
        for i in 0..4 {
            even[i] = term(even[i], wl, d, &x[i][w.len() - 1]);
        }
    }
    core::array::from_fn(|i| vaddvq_f32(vaddq_f32(even[i], odd[i])))
}

/// The 32 levels of a Q4_0 block, `nibble - 8` as signed bytes in weight
/// order (low nibbles are weights 0-15, high nibbles 16-31); in `-8..=7`,
/// so `lanes_s8`'s bounds for Q8_0 weights hold.
#[inline]
#[target_feature(enable = "neon")]
fn q4_0_levels(w: &BlockQ4_0) -> [int8x16_t; 2] {
    let bits: uint8x16_t = bytemuck::cast(w.qs);
    let eight = vdupq_n_s8(8);
    let lo = vreinterpretq_s8_u8(vandq_u8(bits, vdupq_n_u8(0x0f)));
    let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(bits));
    [vsubq_s8(lo, eight), vsubq_s8(hi, eight)]
}

/// One Q4_0 block's term added to `acc`: `f32(lanes) * (d_w * d_x)`.
#[inline]
#[target_feature(enable = "neon")]
fn q4_0_term(acc: float32x4_t, l: [int8x16_t; 2], dw: f32, x: &ActBlock) -> float32x4_t {
    vfmaq_f32(acc, vcvtq_f32_s32(lanes_s8(l, x)), vdupq_n_f32(dw * x.d))
}

/// Q4_0 x Q8_0 dot product, shaped as [`dot_q8`] (even and odd blocks in
/// two accumulators, one horizontal sum); within the Q8_0 kernels' error
/// bound of the scalar reference, not its bits.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q4_0(w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_q4_0: block counts differ");
    let mut even = vdupq_n_f32(0.0);
    let mut odd = vdupq_n_f32(0.0);
    let (w2, w_rest) = w.as_chunks::<2>();
    for (k, [wa, wb]) in w2.iter().enumerate() {
        even = q4_0_term(even, q4_0_levels(wa), wa.scale_f32(), &x[2 * k]);
        odd = q4_0_term(odd, q4_0_levels(wb), wb.scale_f32(), &x[2 * k + 1]);
    }
    if let [wl] = w_rest {
        even = q4_0_term(even, q4_0_levels(wl), wl.scale_f32(), &x[w.len() - 1]);
    }
    vaddvq_f32(vaddq_f32(even, odd))
}

/// `[dot_q4_0(w, x[0]), .., dot_q4_0(w, x[3])]`, bit for bit: each weight
/// block's levels and scale are unpacked once for the four rows.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q4_0_x4(w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "dot_q4_0: block counts differ");
    }
    let mut even = [vdupq_n_f32(0.0); 4];
    let mut odd = [vdupq_n_f32(0.0); 4];
    let (w2, w_rest) = w.as_chunks::<2>();
    for (k, [wa, wb]) in w2.iter().enumerate() {
        let (la, lb) = (q4_0_levels(wa), q4_0_levels(wb));
        let (da, db) = (wa.scale_f32(), wb.scale_f32());
        for i in 0..4 {
            even[i] = q4_0_term(even[i], la, da, &x[i][2 * k]);
            odd[i] = q4_0_term(odd[i], lb, db, &x[i][2 * k + 1]);
        }
    }
    if let [wl] = w_rest {
        let (l, d) = (q4_0_levels(wl), wl.scale_f32());
        for i in 0..4 {
            even[i] = q4_0_term(even[i], l, d, &x[i][w.len() - 1]);
        }
    }
    core::array::from_fn(|i| vaddvq_f32(vaddq_f32(even[i], odd[i])))
}

/// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb` blocks.
///
/// # Panics
///
/// If `x.len() != nb` or `w.len() != nb * out.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
    for_rows(w, nb, x.len(), out, |row| dot_q8(row, x));
}

/// Dot product of two f32 slices: four 4-lane FMA accumulators over
/// 16-element steps, then 4-element steps into the first, a horizontal
/// sum, and the last `len % 4` products added left to right.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_f32: lengths differ");
    let (w16, w_rest) = w.as_chunks::<16>();
    let (x16, x_rest) = x.as_chunks::<16>();
    let mut acc = [vdupq_n_f32(0.0); 4];
    for (wc, xc) in w16.iter().zip(x16) {
        let wv: [float32x4_t; 4] = bytemuck::cast(*wc);
        let xv: [float32x4_t; 4] = bytemuck::cast(*xc);
        for i in 0..4 {
            acc[i] = vfmaq_f32(acc[i], wv[i], xv[i]);
        }
    }
    let (w4, w_tail) = w_rest.as_chunks::<4>();
    let (x4, x_tail) = x_rest.as_chunks::<4>();
    for (wc, xc) in w4.iter().zip(x4) {
        let wv: float32x4_t = bytemuck::cast(*wc);
        let xv: float32x4_t = bytemuck::cast(*xc);
        acc[0] = vfmaq_f32(acc[0], wv, xv);
    }
    let sum = vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3]));
    w_tail
        .iter()
        .zip(x_tail)
        .fold(vaddvq_f32(sum), |s, (&a, &b)| s + a * b)
}

/// `out[r] = dot_f32(row r of w, x)` for rows of `cols` values.
///
/// # Panics
///
/// If `x.len() != cols` or `w.len() != cols * out.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn matvec_f32(w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
    for_rows(w, cols, x.len(), out, |row| dot_f32(row, x));
}
