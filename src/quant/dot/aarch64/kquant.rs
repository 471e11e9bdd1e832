//! NEON K-quant kernels (Q4_K, Q5_K, Q6_K weights with Q8_K activations),
//! bit for bit the scalar kernels' results.
//!
//! The scalar kernels (GGML's order) keep eight `i32` lane sums per block,
//! lane `l` holding `scale * q * x` over the weights at positions `l` mod
//! 8, and add `(d * d_x) * lane` into eight f32 sums, rounding the product
//! and then the sum; the eight sums are added to the mins' running term in
//! lane order at the end. Here a widening multiply (`smull`, `smull2`) of
//! eight weight bytes by eight activation bytes gives exactly those
//! positions' products in `i16` lanes `0..8`, so adding the products of
//! one sub-block's groups (at most `4 * 31 * 128` for Q4_K/Q5_K,
//! `2 * 32 * 128` for Q6_K: no `i16` overflow) and multiply-accumulating
//! them by the sub-block's scale into two `i32x4` registers (`smlal`,
//! `smlal2`) builds the scalar kernel's eight lanes, exactly (integer sums
//! below `2^24`, in any order). The f32 part is the scalar kernel's
//! operations lane for lane (`fmul` then `fadd`, never fused), and the
//! last sum is the same scalar loop, so the result is the scalar bits.
//!
//! Each format's weight side (levels unpacked to bytes, scales decoded) is
//! built once per block; the four-row forms run the one-row step on four
//! activation rows from it, so they give the single-row bits too.

use core::arch::aarch64::*;

use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;

/// The weight side of a Q4_K or Q5_K block.
struct K4Prep {
    /// The 256 levels (`0..=31`) in weight order, 16 per register.
    q: [int8x16_t; 16],
    /// The eight sub-blocks' scales.
    sc: [i16; 8],
    /// The mins, each repeated for the two 16-value sums it covers.
    mins: [int16x8_t; 2],
    d: f32,
    dmin: f32,
}

/// Scales and mins of a Q4_K/Q5_K block.
#[inline]
#[target_feature(enable = "neon")]
fn k4_scales(scale_min: impl Fn(usize) -> (u8, u8)) -> ([i16; 8], [int16x8_t; 2]) {
    let mut mins = [0i16; 16];
    let sc = core::array::from_fn(|j| {
        let (s, m) = scale_min(j);
        mins[2 * j] = i16::from(m);
        mins[2 * j + 1] = i16::from(m);
        i16::from(s)
    });
    (sc, bytemuck::cast(mins))
}

/// Levels of a Q4_K block: chunk `k` of 32 bytes gives sub-block `2k`
/// (low nibbles) and `2k + 1` (high nibbles).
#[inline]
#[target_feature(enable = "neon")]
fn q4_k_prep(wb: &BlockQ4K) -> K4Prep {
    let low4 = vdupq_n_u8(0x0f);
    let (sc, mins) = k4_scales(|j| wb.scale_min(j));
    let qs: [uint8x16_t; 8] = bytemuck::cast(wb.qs);
    let mut q = [vdupq_n_s8(0); 16];
    for k in 0..4 {
        for h in 0..2 {
            let b = qs[2 * k + h];
            q[4 * k + h] = vreinterpretq_s8_u8(vandq_u8(b, low4));
            q[4 * k + 2 + h] = vreinterpretq_s8_u8(vshrq_n_u8::<4>(b));
        }
    }
    K4Prep {
        q,
        sc,
        mins,
        d: wb.d_f32(),
        dmin: wb.dmin_f32(),
    }
}

/// Levels of a Q5_K block: Q4_K's nibbles with the fifth bit of weight
/// `l` of sub-block `j` from bit `j` of `qh[l]`, added as 16.
#[inline]
#[target_feature(enable = "neon")]
fn q5_k_prep(wb: &BlockQ5K) -> K4Prep {
    let low4 = vdupq_n_u8(0x0f);
    let one = vdupq_n_u8(1);
    let (sc, mins) = k4_scales(|j| wb.scale_min(j));
    let qs: [uint8x16_t; 8] = bytemuck::cast(wb.qs);
    let qh: [uint8x16_t; 2] = bytemuck::cast(wb.qh);
    let fifth = |h: uint8x16_t, j: i8| {
        let bit = vandq_u8(vshlq_u8(h, vdupq_n_s8(-j)), one);
        vshlq_n_u8::<4>(bit)
    };
    let mut q = [vdupq_n_s8(0); 16];
    for k in 0..4 {
        for h in 0..2 {
            let b = qs[2 * k + h];
            let lo = vorrq_u8(vandq_u8(b, low4), fifth(qh[h], 2 * k as i8));
            let hi = vorrq_u8(vshrq_n_u8::<4>(b), fifth(qh[h], 2 * k as i8 + 1));
            q[4 * k + h] = vreinterpretq_s8_u8(lo);
            q[4 * k + 2 + h] = vreinterpretq_s8_u8(hi);
        }
    }
    K4Prep {
        q,
        sc,
        mins,
        d: wb.d_f32(),
        dmin: wb.dmin_f32(),
    }
}

/// The `i16` lanes `l = 0..8` of `sum q[8g + l] * x[8g + l]` over the two
/// groups of eight in 16 bytes.
#[inline]
#[target_feature(enable = "neon")]
fn pair_products(q: int8x16_t, x: int8x16_t) -> int16x8_t {
    vaddq_s16(
        vmull_s8(vget_low_s8(q), vget_low_s8(x)),
        vmull_high_s8(q, x),
    )
}

/// The scalar kernels' f32 update for one block: `sums[l] += d * lane[l]`,
/// product rounded before the sum.
#[inline]
#[target_feature(enable = "neon")]
fn add_lanes(sums: &mut [float32x4_t; 2], d: f32, aux: [int32x4_t; 2]) {
    let dv = vdupq_n_f32(d);
    for (s, a) in sums.iter_mut().zip(aux) {
        *s = vaddq_f32(*s, vmulq_f32(dv, vcvtq_f32_s32(a)));
    }
}

/// `sumf + sums[0] + .. + sums[7]`, left to right, as the scalar kernels.
#[inline]
#[target_feature(enable = "neon")]
fn finish(mut sumf: f32, sums: [float32x4_t; 2]) -> f32 {
    let lanes: [f32; 8] = bytemuck::cast(sums);
    for s in lanes {
        sumf += s;
    }
    sumf
}

/// One Q8_K block's term of a Q4_K/Q5_K row.
#[inline]
#[target_feature(enable = "neon")]
fn k4_step(p: &K4Prep, xb: &BlockQ8K, sums: &mut [float32x4_t; 2], sumf: &mut f32) {
    let x: [int8x16_t; 16] = bytemuck::cast(xb.qs);
    let mut aux = [vdupq_n_s32(0); 2];
    for j in 0..8 {
        let s = vaddq_s16(
            pair_products(p.q[2 * j], x[2 * j]),
            pair_products(p.q[2 * j + 1], x[2 * j + 1]),
        );
        aux[0] = vmlal_n_s16(aux[0], vget_low_s16(s), p.sc[j]);
        aux[1] = vmlal_high_n_s16(aux[1], s, p.sc[j]);
    }
    let bsums: [int16x8_t; 2] = bytemuck::cast(xb.bsums);
    let mut m = vmull_s16(vget_low_s16(bsums[0]), vget_low_s16(p.mins[0]));
    m = vmlal_high_s16(m, bsums[0], p.mins[0]);
    m = vmlal_s16(m, vget_low_s16(bsums[1]), vget_low_s16(p.mins[1]));
    m = vmlal_high_s16(m, bsums[1], p.mins[1]);
    let sumi = vaddvq_s32(m);
    add_lanes(sums, p.d * xb.d, aux);
    let dmin = p.dmin * xb.d;
    *sumf -= dmin * sumi as f32;
}

/// The one-row and four-row loops of the Q4_K/Q5_K kernels.
#[inline]
#[target_feature(enable = "neon")]
fn k4_rows<B, const N: usize>(
    w: &[B],
    x: [&[BlockQ8K]; N],
    prep: impl Fn(&B) -> K4Prep,
) -> [f32; N] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
    }
    let mut sums = [[vdupq_n_f32(0.0); 2]; N];
    let mut sumf = [0.0f32; N];
    for (b, wb) in w.iter().enumerate() {
        let p = prep(wb);
        for i in 0..N {
            k4_step(&p, &x[i][b], &mut sums[i], &mut sumf[i]);
        }
    }
    core::array::from_fn(|i| finish(sumf[i], sums[i]))
}

/// Q4_K x Q8_K dot product: the scalar `dot_q4_k_q8_k`'s bits. Blocks are
/// paired in order; extra blocks on either side are ignored (the caller
/// checks the counts).
#[target_feature(enable = "neon")]
pub(crate) fn dot_q4_k(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    let n = w.len().min(x.len());
    k4_rows(&w[..n], [&x[..n]], |b| q4_k_prep(b))[0]
}

/// `[dot_q4_k(w, x[0]), .., dot_q4_k(w, x[3])]`, bit for bit.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q4_k_x4(w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    k4_rows(w, x, |b| q4_k_prep(b))
}

/// Q5_K x Q8_K dot product: the scalar `dot_q5_k_q8_k`'s bits, as
/// [`dot_q4_k`].
#[target_feature(enable = "neon")]
pub(crate) fn dot_q5_k(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    let n = w.len().min(x.len());
    k4_rows(&w[..n], [&x[..n]], |b| q5_k_prep(b))[0]
}

/// `[dot_q5_k(w, x[0]), .., dot_q5_k(w, x[3])]`, bit for bit.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q5_k_x4(w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    k4_rows(w, x, |b| q5_k_prep(b))
}

/// The weight side of a Q6_K block.
struct Q6Prep {
    /// The 256 levels (`-32..=31`) in weight order, 16 per register.
    q: [int8x16_t; 16],
    /// One scale per 16 weights.
    sc: [i16; 16],
    d: f32,
}

/// Levels of a Q6_K block, GGML's layout: per half of 128 weights, 64
/// bytes of low nibbles and 32 of high bit pairs.
#[inline]
#[target_feature(enable = "neon")]
fn q6_k_prep(wb: &BlockQ6K) -> Q6Prep {
    let low4 = vdupq_n_u8(0x0f);
    let low2 = vdupq_n_u8(0x03);
    let m32 = vdupq_n_s8(32);
    let ql: [uint8x16_t; 8] = bytemuck::cast(wb.ql);
    let qh: [uint8x16_t; 4] = bytemuck::cast(wb.qh);
    let top = |v: uint8x16_t| vshlq_n_u8::<4>(vandq_u8(v, low2));
    let level = |v: uint8x16_t| vsubq_s8(vreinterpretq_s8_u8(v), m32);
    let mut q = [vdupq_n_s8(0); 16];
    for h in 0..2 {
        for c in 0..2 {
            let (a, b, hb) = (ql[4 * h + c], ql[4 * h + 2 + c], qh[2 * h + c]);
            q[8 * h + c] = level(vorrq_u8(vandq_u8(a, low4), top(hb)));
            q[8 * h + 2 + c] = level(vorrq_u8(vandq_u8(b, low4), top(vshrq_n_u8::<2>(hb))));
            q[8 * h + 4 + c] = level(vorrq_u8(vshrq_n_u8::<4>(a), top(vshrq_n_u8::<4>(hb))));
            q[8 * h + 6 + c] = level(vorrq_u8(vshrq_n_u8::<4>(b), top(vshrq_n_u8::<6>(hb))));
        }
    }
    Q6Prep {
        q,
        sc: core::array::from_fn(|c| i16::from(wb.scales[c])),
        d: wb.d_f32(),
    }
}

/// One Q8_K block's term of a Q6_K row.
#[inline]
#[target_feature(enable = "neon")]
fn q6_step(p: &Q6Prep, xb: &BlockQ8K, sums: &mut [float32x4_t; 2]) {
    let x: [int8x16_t; 16] = bytemuck::cast(xb.qs);
    let mut aux = [vdupq_n_s32(0); 2];
    for ((&q, xv), &sc) in p.q.iter().zip(x).zip(&p.sc) {
        let s = pair_products(q, xv);
        aux[0] = vmlal_n_s16(aux[0], vget_low_s16(s), sc);
        aux[1] = vmlal_high_n_s16(aux[1], s, sc);
    }
    add_lanes(sums, p.d * xb.d, aux);
}

/// The one-row and four-row loops of the Q6_K kernel.
#[inline]
#[target_feature(enable = "neon")]
fn q6_rows<const N: usize>(w: &[BlockQ6K], x: [&[BlockQ8K]; N]) -> [f32; N] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
    }
    let mut sums = [[vdupq_n_f32(0.0); 2]; N];
    for (b, wb) in w.iter().enumerate() {
        let p = q6_k_prep(wb);
        for i in 0..N {
            q6_step(&p, &x[i][b], &mut sums[i]);
        }
    }
    core::array::from_fn(|i| finish(0.0, sums[i]))
}

/// Q6_K x Q8_K dot product: the scalar `dot_q6_k_q8_k`'s bits. Blocks are
/// paired in order; extra blocks on either side are ignored (the caller
/// checks the counts).
#[target_feature(enable = "neon")]
pub(crate) fn dot_q6_k(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let n = w.len().min(x.len());
    q6_rows(&w[..n], [&x[..n]])[0]
}

/// `[dot_q6_k(w, x[0]), .., dot_q6_k(w, x[3])]`, bit for bit.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "neon")]
pub(crate) fn dot_q6_k_x4(w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    q6_rows(w, x)
}
