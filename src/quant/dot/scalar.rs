//! Portable reference kernels: the twins every SIMD kernel is tested against.
//!
//! Each block's integer dot product is exact in `i32`; the block's term
//! `(d_w * d_x) * isum` is then added to one f32 accumulator in block order,
//! as GGML's scalar `ggml_vec_dot_q8_0_q8_0` does.

use half::f16;

use crate::quant::activation::ActBlock;
use crate::quant::block::{BlockQ8_0, QK8_0};

/// Exact integer dot product of one weight block and one activation block.
#[inline(always)]
pub(crate) fn block_isum(w: &BlockQ8_0, x: &ActBlock) -> i32 {
    w.qs.iter()
        .zip(&x.qs)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum()
}

/// Dot product of a Q8_0 weight row with a quantized activation.
///
/// # Panics
///
/// If `w.len() != x.len()`.
pub(crate) fn dot_q8(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_q8: block counts differ");
    let mut acc = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        // d_w * d_x is exact in f32 (two 11-bit significands), and so is
        // isum as f32 (|isum| <= 32 * 128 * 127 < 2^24).
        acc += wb.scale_f32() * xb.d * block_isum(wb, xb) as f32;
    }
    acc
}

/// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb` blocks.
///
/// # Panics
///
/// If `x.len() != nb` or `w.len() != nb * out.len()`.
pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
    for_rows(w, nb, x.len(), out, |row| dot_q8(row, x));
}

/// Quantizes each 32-value chunk of `x` into the matching block of `out`.
///
/// # Panics
///
/// If `x.len() != out.len()`.
pub(crate) fn quantize_act(x: &[[f32; QK8_0]], out: &mut [ActBlock]) {
    assert_eq!(x.len(), out.len(), "quantize_act: block counts differ");
    for (o, c) in out.iter_mut().zip(x) {
        *o = ActBlock::quantize(c);
    }
}

/// Dot product of two f32 slices, accumulated left to right.
///
/// # Panics
///
/// If `w.len() != x.len()`.
pub(crate) fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_f32: lengths differ");
    w.iter().zip(x).fold(0.0, |acc, (&a, &b)| acc + a * b)
}

/// `dot_f32(x, k)` with `k` in `f16`: each element widened (exactly) and
/// the products accumulated left to right, as `dot_f32` of the widened row.
///
/// # Panics
///
/// If `x.len() != k.len()`.
pub(crate) fn dot_f16(x: &[f32], k: &[f16]) -> f32 {
    assert_eq!(x.len(), k.len(), "dot_f16: lengths differ");
    x.iter()
        .zip(k)
        .fold(0.0, |acc, (&a, &b)| acc + a * b.to_f32())
}

/// `out[i] += p * v[i]` with `v` in `f16`, one rounded product and one
/// rounded sum per element (no fused multiply-add), so every kernel gives
/// the same bits.
///
/// # Panics
///
/// If `out.len() != v.len()`.
pub(crate) fn axpy_f16(out: &mut [f32], p: f32, v: &[f16]) {
    assert_eq!(out.len(), v.len(), "axpy_f16: lengths differ");
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * x.to_f32();
    }
}

/// `out = sum_t ps[t] * row_t` with `row_t = v[t * stride..][..out.len()]`:
/// `out.fill(0.0)`, then [`axpy_f16`] of each row in order.
///
/// # Panics
///
/// If a row runs past the end of `v`.
pub(crate) fn weighted_sum_f16(out: &mut [f32], ps: &[f32], v: &[f16], stride: usize) {
    let hd = out.len();
    out.fill(0.0);
    for (t, &p) in ps.iter().enumerate() {
        axpy_f16(out, p, &v[t * stride..t * stride + hd]);
    }
}

/// `out[r] = dot_f32(row r of w, x)` for rows of `cols` values.
///
/// # Panics
///
/// If `x.len() != cols` or `w.len() != cols * out.len()`.
pub(crate) fn matvec_f32(w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
    for_rows(w, cols, x.len(), out, |row| dot_f32(row, x));
}

/// Four cache lines, 64-byte aligned: the unit the bandwidth probes read
/// with their widest loads.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Lines4(pub(crate) [u64; 32]);

/// `bytes` as the probes read it: the bytes before its first 64-byte
/// boundary, its whole [`Lines4`] from there, and the bytes after them.
#[inline]
pub(crate) fn split_lines(bytes: &[u8]) -> (&[u8], &[Lines4], &[u8]) {
    bytemuck::pod_align_to::<u8, Lines4>(bytes)
}

/// The bandwidth probes' checksum of `bytes` (the reference for the SIMD
/// readers): the wrapping sum of the `u64` words (native byte order) of its
/// whole aligned lines ([`split_lines`]) and of the bytes outside them.
/// A word sum, not a byte sum: a 512-bit byte sum (`vpsadbw`) read 7-9%
/// slower than adding the loaded words on an AMD Zen 4 core, below a
/// plain C read loop's speed. The value depends on where `bytes` lies
/// in memory (which bytes form words), never on the kernel.
pub(crate) fn sum_bytes(bytes: &[u8]) -> u64 {
    let (head, body, tail) = split_lines(bytes);
    let words = body.iter().flat_map(|l| l.0).fold(0u64, u64::wrapping_add);
    head.iter()
        .chain(tail)
        .map(|&b| u64::from(b))
        .fold(words, u64::wrapping_add)
}

/// Runs `dot` on each of the `out.len()` rows of `w` (rows of `len`
/// elements), after checking the shapes, so no `zip` ever truncates.
///
/// # Panics
///
/// If `x_len != len` or `w.len() != len * out.len()`.
#[inline(always)]
pub(crate) fn for_rows<T>(
    w: &[T],
    len: usize,
    x_len: usize,
    out: &mut [f32],
    mut dot: impl FnMut(&[T]) -> f32,
) {
    assert_eq!(
        x_len, len,
        "matvec: activation length differs from row length"
    );
    assert_eq!(
        Some(w.len()),
        len.checked_mul(out.len()),
        "matvec: weights do not hold out.len() rows"
    );
    if len == 0 {
        out.fill(0.0);
        return;
    }
    for (o, row) in out.iter_mut().zip(w.chunks_exact(len)) {
        *o = dot(row);
    }
}
