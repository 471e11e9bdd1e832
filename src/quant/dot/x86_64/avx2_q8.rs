//! AVX2's Q8_0 kernels, with the scalar kernel's rounding.
//!
//! Each block's integer dot product is computed as eight exact `i32`
//! lanes (`vpsignb`, `vpmaddubsw`, `vpmaddwd`, as in [`super::avx2`]) and
//! then summed, still in integers, to the one exact `isum` per (block,
//! row) that the scalar kernel computes; only then come the float
//! operations: the scalar kernel's term `(d_w * d_x) * isum` (two
//! roundings, the first exact), added to one of four partial sums by the
//! block's index mod 4 (from `+0.0`), which end as `(s0 + s1) + (s2 +
//! s3)`. Every kernel here, single-row, four-row and GEMM, runs those
//! operations for each row, so all return the same bits
//! ([`kgroup::gemm_b32s_reference`](crate::quant::kgroup::gemm_b32s_reference)
//! states them in plain Rust; a NaN result may carry another payload,
//! as the compiler may swap a float add's operands). Four partial sums rather than the scalar
//! kernel's one: a decode row then adds four blocks' terms with one
//! vector add instead of four dependent scalar ones.
//!
//! Why not the lane-wise FMAs that the VNNI kernels keep
//! (`x86_64::q8_kernels!`): a prefill's GEMM is bound by the work per 32
//! weights and activation row, and there a lane-wise FMA costs a
//! conversion and an FMA for every (block, row) where summing the lanes
//! costs one `vpaddd`, the conversion and the float operations then shared
//! by eight rows in one register. A decode row has no second activation
//! row to share them with, so it shares them across eight of its own
//! blocks: [`row_loop`] reduces eight blocks' lanes to their eight sums
//! in one register ([`hsum8_epi32`]) and makes their terms with one
//! conversion and two multiplies.
//!
//! Measured on an AMD EPYC (Zen 3) VM, one thread, each binary against
//! the lane-wise kernels' alternated three times: prefill of 128 tokens
//! (`inferno bench --model F --backends simd --threads 1 --prompt-tokens
//! 128 --tokens 4`) Q8_0 69.5-71.9 tok/s to 72.5-79.6, Q4_0 71.3-72.0 to
//! 79.7-80.3; the decode products (`inferno bench --kernels --model F
//! --threads 1`) Q8_0 18.0-18.8 GB/s to 18.9-19.0, Q4_0 12.8-12.9 to
//! 12.8-13.0. (With four blocks a step the decode products lost 5-15%;
//! with four weight rows a step, 30%.)

use core::arch::x86_64::*;

use super::avx2::hsum4_epi32;
use crate::quant::activation::{ActBlock, NibbleGroup};
use crate::quant::block::BlockQ8_0;
use crate::quant::dot::scalar::for_rows;
use crate::quant::kgroup::{B32Levels, B32Signed, Q8Group, GROUP_ROWS};
use crate::quant::packed::BlockQ4_0x8;
use crate::quant::q4_0::BlockQ4_0;

/// The exact integer dot product of a weight block and an activation
/// block as eight `i32` lanes: `vpsignb` puts the weight's sign on the
/// activation, `vpmaddubsw` multiplies it by `|w|` into pairwise `i16`
/// sums (at most `2 * 128 * 127 < 2^15`: nothing saturates for activation
/// bytes in `-127..=127`, the activation invariant) and `vpmaddwd` by
/// ones widens them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn lanes(w: &BlockQ8_0, x: &ActBlock) -> __m256i {
    let qw: __m256i = bytemuck::cast(w.qs);
    let qx: __m256i = bytemuck::cast(x.qs);
    let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// Sixteen times the exact integer dot product of a Q4_0 weight block
/// and an activation block, as eight `i32` lanes: the 32 levels `0..=15`
/// (the 16 bytes in both halves, the high half shifted down by 4, masked),
/// `vpmaddubsw` by the activation (pairs at most `2 * 15 * 128`, no
/// saturation, for any activation byte), `vpmaddwd` by sixteens, plus the
/// activation's `-128 * (x[4m] + .. + x[4m + 3])` in lane `m` as stored:
/// the block's sum of lanes is `16 * (sum(levels * x) - 8 * sum(x))`, and
/// the loops shift it back exactly ([`Q4_0_SHIFT`]). Scaling the products
/// by 16 in the multiply saves a shift of the stored sums per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0_lanes(w: &BlockQ4_0, x: &ActBlock) -> __m256i {
    let both = _mm256_broadcastsi128_si256(bytemuck::cast(w.qs));
    let shifted = _mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    let levels = _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
    let pairs = _mm256_maddubs_epi16(levels, bytemuck::cast(x.qs));
    let bias: __m256i = bytemuck::cast(x.neg_bias);
    _mm256_add_epi32(bias, _mm256_madd_epi16(pairs, _mm256_set1_epi16(16)))
}

/// The power of two [`q4_0_lanes`] scales a block's sum by.
const Q4_0_SHIFT: i32 = 4;

/// The f16 scales of four weight blocks (little-endian bytes), widened exactly with one
/// `vcvtph2ps`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales4(d: [[u8; 2]; 4]) -> __m128 {
    let [a, b, c, d] = d.map(i16::from_le_bytes);
    _mm_cvtph_ps(_mm_setr_epi16(a, b, c, d, 0, 0, 0, 0))
}

/// One weight block's f16 scale (little-endian bytes), widened exactly,
/// in all four lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale4(d: [u8; 2]) -> __m128 {
    _mm_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(d)))
}

/// `(d_w * d_x) * f32(isum)` lane by lane: four blocks' terms with the
/// scalar kernel's roundings (`d_w * d_x` is exact, and so is the
/// conversion: `|isum| <= 32 * 128 * 127 < 2^24`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn terms(d_w: __m128, d_x: __m128, isum: __m128i) -> __m128 {
    _mm_mul_ps(_mm_mul_ps(d_w, d_x), _mm_cvtepi32_ps(isum))
}

/// Dot product of a Q8_0 weight row with a quantized activation (see the
/// module doc for its rounding).
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q8(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
    row_loop::<_, 0>(w, x, |w, x| lanes(w, x), |b| b.d, |_| {})
}

/// Q4_0 x Q8_0 dot product: [`dot_q8`] of the block's levels less 8, bit
/// for bit (the same exact block sums, the same float operations).
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_0(w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
    row_loop::<_, Q4_0_SHIFT>(w, x, |w, x| q4_0_lanes(w, x), |b| b.d, |_| {})
}

/// The loop of the single-row dots, given a block pair's exact `lanes`
/// and a weight block's f16 scale `d`: block `b`'s term added to partial
/// sum `b % 4`, in block order, the four partial sums then added as
/// [`finish`] does; calls `hint(b)` (a prefetch, or nothing) before each
/// pair of blocks `b, b + 1`.
///
/// Eight blocks a step: their eight block sums come out of one
/// transposing reduction ([`hsum8_epi32`]) in one register, so the
/// scales, the conversion and the two multiplies run once per eight
/// blocks, and the terms are added to the four partial sums as two
/// halves (blocks `8k..8k + 4`, then `8k + 4..8k + 8`). The last
/// `len % 8` blocks go four at a time, a missing block of the last four
/// adding `+0.0`, which changes no sum (a sum that starts at `+0.0` never
/// becomes `-0.0` in round-to-nearest).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_loop<B, const SHIFT: i32>(
    w: &[B],
    x: &[ActBlock],
    lanes: impl Fn(&B, &ActBlock) -> __m256i,
    d: impl Fn(&B) -> [u8; 2],
    mut hint: impl FnMut(usize),
) -> f32 {
    assert_eq!(w.len(), x.len(), "dot: block counts differ");
    let (w8, w_rest) = w.as_chunks::<8>();
    let (x8, x_rest) = x.as_chunks::<8>();
    let mut acc = _mm_setzero_ps();
    for (k, (wc, xc)) in w8.iter().zip(x8).enumerate() {
        for i in (0..8).step_by(2) {
            hint(8 * k + i);
        }
        let isum = _mm256_srai_epi32::<SHIFT>(hsum8_epi32(core::array::from_fn(|i| {
            lanes(&wc[i], &xc[i])
        })));
        let d_x = _mm256_setr_ps(
            xc[0].d, xc[1].d, xc[2].d, xc[3].d, xc[4].d, xc[5].d, xc[6].d, xc[7].d,
        );
        acc = add_terms8(acc, scales8(wc.each_ref().map(&d)), d_x, isum);
    }
    finish(row_rest::<_, SHIFT>(
        acc,
        w_rest,
        x_rest,
        8 * w8.len(),
        lanes,
        d,
        hint,
    ))
}

/// Eight blocks' terms `(d_w * d_x) * f32(isum)` added to the four
/// partial sums `acc`, blocks `0..4` then `4..8` (block `b` to sum
/// `b % 4`): the float step of every eight-block loop here, so they all
/// round alike.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn add_terms8(acc: __m128, d_w: __m256, d_x: __m256, isum: __m256i) -> __m128 {
    let t = _mm256_mul_ps(_mm256_mul_ps(d_w, d_x), _mm256_cvtepi32_ps(isum));
    let acc = _mm_add_ps(acc, _mm256_castps256_ps128(t));
    _mm_add_ps(acc, _mm256_extractf128_ps::<1>(t))
}

/// The end of [`row_loop`]: the blocks after a row's last whole group of
/// eight (`w_rest`, `x_rest`, the first of them block `base`), four at a
/// time, a missing block of the last four adding `+0.0`, into the partial
/// sums `acc`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn row_rest<B, const SHIFT: i32>(
    mut acc: __m128,
    w_rest: &[B],
    x_rest: &[ActBlock],
    base: usize,
    lanes: impl Fn(&B, &ActBlock) -> __m256i,
    d: impl Fn(&B) -> [u8; 2],
    mut hint: impl FnMut(usize),
) -> __m128 {
    let (w4, w_tail) = w_rest.as_chunks::<4>();
    let (x4, x_tail) = x_rest.as_chunks::<4>();
    for (k, (wc, xc)) in w4.iter().zip(x4).enumerate() {
        hint(base + 4 * k);
        hint(base + 4 * k + 2);
        let isum =
            _mm_srai_epi32::<SHIFT>(hsum4_epi32(core::array::from_fn(|i| lanes(&wc[i], &xc[i]))));
        let d_x = _mm_setr_ps(xc[0].d, xc[1].d, xc[2].d, xc[3].d);
        acc = _mm_add_ps(acc, terms(scales4(wc.each_ref().map(&d)), d_x, isum));
    }
    if !w_tail.is_empty() {
        let pair = |i: usize| w_tail.get(i).zip(x_tail.get(i));
        let isum = _mm_srai_epi32::<SHIFT>(hsum4_epi32(core::array::from_fn(|i| {
            pair(i).map_or(_mm256_setzero_si256(), |(wb, xb)| lanes(wb, xb))
        })));
        let d_w = scales4(core::array::from_fn(|i| w_tail.get(i).map_or([0; 2], &d)));
        let [x0, x1, x2, x3] = core::array::from_fn(|i| x_tail.get(i).map_or(0.0, |xb| xb.d));
        acc = _mm_add_ps(acc, terms(d_w, _mm_setr_ps(x0, x1, x2, x3), isum));
    }
    acc
}

/// [`dot_q4_0`] with the activation's whole groups of eight blocks also
/// laid out as [`NibbleGroup`]s, bit for bit (a NaN from two NaN or
/// infinite scales may carry another sign or payload: the compiler may
/// swap a float add's operands): the same exact block sums and the same
/// float operations. One 256-bit register takes two weight
/// blocks (`p` and `p + 4` of a group, their 16 bytes side by side), so
/// their low nibbles, high nibbles, the two `vpmaddubsw`, their `i16` sum
/// (at most `2 * 2 * 15 * 128`) and one `vpmaddwd` serve both; the eight
/// blocks' sums come out of three `vphaddd` in block order, and the
/// offset of 8 is added to each block's sum once, from the group.
/// (`dot_q4_0` spends a load, a shift and mask, two multiplies and the
/// offset's add on every block.) The blocks after the last whole group
/// are `dot_q4_0`'s.
///
/// # Panics
///
/// If `w.len() != x.len()` or `g.len() != x.len() / 8`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_0_groups(w: &[BlockQ4_0], g: &[NibbleGroup], x: &[ActBlock]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot: block counts differ");
    assert_eq!(
        g.len(),
        x.len() / 8,
        "dot_q4_0_groups: the groups do not match the blocks"
    );
    let (w8, w_rest) = w.as_chunks::<8>();
    let x_rest = &x[8 * w8.len()..];
    let low4 = _mm256_set1_epi8(0x0f);
    let mut acc = _mm_setzero_ps();
    for (wc, gc) in w8.iter().zip(g) {
        let v: [__m256i; 4] = core::array::from_fn(|p| {
            let q = _mm256_set_m128i(bytemuck::cast(wc[p + 4].qs), bytemuck::cast(wc[p].qs));
            let lo = _mm256_and_si256(q, low4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), low4);
            let s = _mm256_add_epi16(
                _mm256_maddubs_epi16(lo, bytemuck::cast(gc.qs[NibbleGroup::chunk(p, 0)])),
                _mm256_maddubs_epi16(hi, bytemuck::cast(gc.qs[NibbleGroup::chunk(p, 1)])),
            );
            _mm256_madd_epi16(s, _mm256_set1_epi16(1))
        });
        let sums = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let isum = _mm256_add_epi32(sums, bytemuck::cast(gc.off));
        let d_x: __m256 = bytemuck::cast(gc.d);
        acc = add_terms8(acc, scales8_packed(wc.each_ref().map(|b| b.d)), d_x, isum);
    }
    q4_0_groups_end(acc, w_rest, x_rest, 8 * w8.len())
}

/// Eight Q4_0 rows packed ([`BlockQ4_0x8`]) against the activation `x`
/// (with its groups of eight blocks, `g`, for their offsets):
/// [`dot_q4_0`] of each row, bit for bit (NaN payloads aside), as
/// [`dot_q4_0_groups`] gives for one row.
///
/// Each `i32` lane is one row: a 256-bit load holds four bytes of each of
/// the eight rows; per four weights one `vpmaddubsw` of the eight rows'
/// levels by the activation's four values, broadcast, and the block's
/// eight of them added in `i16` (at most `8 * 2 * 15 * 128 < 2^15`, exact),
/// so one `vpmaddwd` by ones leaves each row's exact block sum in its
/// lane, with nothing to reduce across lanes; the block's offset (`-8`
/// times the activation block's sum) is added once. The float step is
/// `dot_q4_0`'s, once for the eight rows: `(d_w * d_x) * isum` added to
/// partial sum `b % 4`, the four sums added as `(s0 + s1) + (s2 + s3)`.
/// Each block's lines are asked for
/// [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD) bytes on, into L1, as the
/// block is read: a group's blocks lie one after another, so the rows
/// stream front to back.
///
/// # Panics
///
/// If `w.len() != x.len()` or `g` is not `x`'s groups of eight.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_0_packed8(w: &[BlockQ4_0x8], g: &[NibbleGroup], x: &[ActBlock]) -> [f32; 8] {
    assert_eq!(w.len(), x.len(), "dot: block counts differ");
    assert_eq!(
        g.len(),
        x.len() / 8,
        "dot_q4_0_packed8: the groups do not match the blocks"
    );
    let block = core::mem::size_of::<BlockQ4_0x8>();
    let mut line = 0;
    let mut acc = [_mm256_setzero_ps(); 4];
    let (w8, w_rest) = w.as_chunks::<8>();
    let (x8, x_rest) = x.as_chunks::<8>();
    for (k, ((wc, xc), gc)) in w8.iter().zip(x8).zip(g).enumerate() {
        for i in 0..8 {
            let end = (8 * k + i + 1) * block;
            crate::quant::dot::RowPrefetch::L1.lines_to(w, &mut line, end);
            let t = q4_0_packed_terms(&wc[i], &xc[i], gc.off[i]);
            acc[i % 4] = _mm256_add_ps(acc[i % 4], t);
        }
    }
    // The blocks after the last whole group (its first one a multiple of
    // eight, so `i % 4` is still the block's residue).
    for (i, (wb, xb)) in w_rest.iter().zip(x_rest).enumerate() {
        let off = xb.neg_bias.iter().sum::<i32>() >> 4;
        acc[i % 4] = _mm256_add_ps(acc[i % 4], q4_0_packed_terms(wb, xb, off));
    }
    bytemuck::cast(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ))
}

/// Block `wb` of [`dot_q4_0_packed8`]'s eight rows against `xb` (whose
/// offset, `-8 * sum(x)`, is `off`): the eight rows' terms
/// `(d_w * d_x) * isum`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0_packed_terms(wb: &BlockQ4_0x8, xb: &ActBlock, off: i32) -> __m256 {
    let low4 = _mm256_set1_epi8(0x0f);
    let q: [__m256i; 4] = bytemuck::cast(wb.qs);
    let (xq, _) = xb.qs.as_chunks::<4>();
    let mut s = _mm256_setzero_si256();
    for (p, &v) in q.iter().enumerate() {
        // Bytes `4p..4p + 4` of each row: low nibbles weights `4p..`, high
        // nibbles weights `16 + 4p..`.
        let lo_x = _mm256_set1_epi32(i32::from_le_bytes(bytemuck::cast(xq[p])));
        let hi_x = _mm256_set1_epi32(i32::from_le_bytes(bytemuck::cast(xq[p + 4])));
        let lo = _mm256_and_si256(v, low4);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4);
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo, lo_x));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi, hi_x));
    }
    let isum = _mm256_add_epi32(
        _mm256_madd_epi16(s, _mm256_set1_epi16(1)),
        _mm256_set1_epi32(off),
    );
    let d_w = _mm256_cvtph_ps(bytemuck::cast::<_, __m128i>(wb.d));
    _mm256_mul_ps(
        _mm256_mul_ps(d_w, _mm256_set1_ps(xb.d)),
        _mm256_cvtepi32_ps(isum),
    )
}

/// The end of [`dot_q4_0_groups`] (and of AVX-512's form of it): the
/// blocks after the row's last whole group (`w_rest`, `x_rest`, the
/// first of them block `base`) as `dot_q4_0` adds them, into the partial
/// sums `acc`, and the row's sum.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_0_groups_end(
    acc: __m128,
    w_rest: &[BlockQ4_0],
    x_rest: &[ActBlock],
    base: usize,
) -> f32 {
    let rest = |w: &BlockQ4_0, x: &ActBlock| q4_0_lanes(w, x);
    finish(row_rest::<_, Q4_0_SHIFT>(
        acc,
        w_rest,
        x_rest,
        base,
        rest,
        |b| b.d,
        |_| {},
    ))
}

/// The sums of the eight `i32` lanes of each of eight vectors, exactly
/// (wrapping; callers stay far from overflow), in order in one vector:
/// two rounds of `vphaddd` leave vectors `0..4`'s sums of their low halves
/// and of their high halves in the two halves of one register (and `4..8`'s
/// in another), one blend, one lane swap and one add finish them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum8_epi32(v: [__m256i; 8]) -> __m256i {
    let q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    let q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    // [q0 low half | q1 high half] + [q0 high half | q1 low half].
    let a = _mm256_blend_epi32::<0xf0>(q0, q1);
    let b = _mm256_permute2x128_si256::<0x21>(q0, q1);
    _mm256_add_epi32(a, b)
}

/// The f16 scales of eight weight blocks (little-endian bytes), widened
/// exactly with one `vcvtph2ps`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales8(d: [[u8; 2]; 8]) -> __m256 {
    let [a, b, c, e, f, g, h, i] = d.map(i16::from_le_bytes);
    _mm256_cvtph_ps(_mm_setr_epi16(a, b, c, e, f, g, h, i))
}

/// [`scales8`], the scales packed into two 64-bit words in general
/// registers first. In [`dot_q4_0_groups`], `scales8`'s `vpinsrw`s took
/// the row's running sum as their don't-care source, which chained each
/// group's step to the one before (the Q4_0 decode products on one AMD
/// Zen 3 thread read 14.0-14.6 GB/s with it, 15.2-16.8 with this); in
/// [`row_loop`] this form measured slower (Q8_0 18.3-19.2 against
/// 15.5-16.7), so that loop keeps `scales8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scales8_packed(d: [[u8; 2]; 8]) -> __m256 {
    let w = d.map(|s| u64::from(u16::from_le_bytes(s)));
    let lo = w[0] | w[1] << 16 | w[2] << 32 | w[3] << 48;
    let hi = w[4] | w[5] << 16 | w[6] << 32 | w[7] << 48;
    _mm256_cvtph_ps(_mm_set_epi64x(hi as i64, lo as i64))
}

/// A row's four partial sums (by block index mod 4) added as
/// `(s0 + s1) + (s2 + s3)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn finish(acc: __m128) -> f32 {
    let [s0, s1, s2, s3]: [f32; 4] = bytemuck::cast(acc);
    (s0 + s1) + (s2 + s3)
}

/// `[dot_q8(w, x[0]), .., dot_q8(w, x[3])]`, bit for bit (a NaN result,
/// from a NaN or infinite scale, may carry another NaN payload): each weight
/// block's scale read once for the four activation rows, their four
/// block sums folded together and their terms added in one register.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q8_x4(w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
    rows_x4::<_, 0>(w, x, |w, x| lanes(w, x), |b| b.d)
}

/// `[dot_q4_0(w, x[0]), .., dot_q4_0(w, x[3])]`, bit for bit (NaN
/// payloads aside), as
/// [`dot_q8_x4`].
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_0_x4(w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
    rows_x4::<_, Q4_0_SHIFT>(w, x, |w, x| q4_0_lanes(w, x), |b| b.d)
}

/// The loop of the four-row dots (see [`row_loop`] for `lanes`, `d` and
/// the order of the sums): each activation row's partial sum `j` in lane
/// `i` of `acc[j]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_x4<B, const SHIFT: i32>(
    w: &[B],
    x: [&[ActBlock]; 4],
    lanes: impl Fn(&B, &ActBlock) -> __m256i,
    d: impl Fn(&B) -> [u8; 2],
) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "dot: block counts differ");
    }
    let mut acc = [_mm_setzero_ps(); 4];
    for (b, wb) in w.iter().enumerate() {
        let xb = x.map(|xi| &xi[b]);
        let isum = _mm_srai_epi32::<SHIFT>(hsum4_epi32(xb.map(|xb| lanes(wb, xb))));
        let d_x = _mm_setr_ps(xb[0].d, xb[1].d, xb[2].d, xb[3].d);
        acc[b % 4] = _mm_add_ps(acc[b % 4], terms(scale4(d(wb)), d_x, isum));
    }
    bytemuck::cast(_mm_add_ps(
        _mm_add_ps(acc[0], acc[1]),
        _mm_add_ps(acc[2], acc[3]),
    ))
}

/// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb`
/// blocks, prefetching [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD) bytes
/// ahead of each pair of blocks, or, where the weights are asked for in
/// L2 ([`weights_to_l2`](super::weights_to_l2)), the row
/// [`PREFETCH_AHEAD_L2`](super::PREFETCH_AHEAD_L2) bytes on, line by line,
/// a piece of [`L2_PIECE_BLOCKS`](super::L2_PIECE_BLOCKS) blocks before
/// the blocks it matches. Hints only: the same bits.
///
/// # Panics
///
/// If `x.len() != nb` or `w.len() != nb * out.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
    const BLOCK: usize = core::mem::size_of::<BlockQ8_0>();
    let lanes = |w: &BlockQ8_0, x: &ActBlock| lanes(w, x);
    let d = |b: &BlockQ8_0| b.d;
    if !super::weights_to_l2() {
        for_rows(w, nb, x.len(), out, |row| {
            row_loop::<_, 0>(row, x, lanes, d, |b| {
                crate::unsafe_core::prefetch::prefetch_read(row, b * BLOCK + super::PREFETCH_AHEAD);
            })
        });
        return;
    }
    let hint = crate::quant::dot::RowPrefetch::L2;
    for_rows(w, nb, x.len(), out, |row| {
        let row_bytes = core::mem::size_of_val(row);
        let mut line = 0;
        let dot = row_loop::<_, 0>(row, x, lanes, d, |b| {
            if b % super::L2_PIECE_BLOCKS == 0 {
                let end = ((b + super::L2_PIECE_BLOCKS) * BLOCK).min(row_bytes);
                hint.lines_to(row, &mut line, end);
            }
        });
        // The blocks after the last multiple of the piece.
        hint.lines_to(row, &mut line, row_bytes);
        dot
    });
}

/// One Q8_0 weight row, as signed bytes, against a batch's eight
/// interleaved activation rows: `dot_q8` of the row with each activation
/// row, bit for bit (NaN payloads aside: the compiler may swap the
/// operands of a float add). Per block, the four steps of eight columns
/// give each activation row its pairwise products (`vpsignb`,
/// `vpmaddubsw`), widened and added over the steps in `i32` (`vpmaddwd`
/// by ones); one `vphaddd` then leaves the eight rows' exact block sums
/// in one register, and one conversion and three float operations make
/// the eight rows' terms and add them to their partial sums, as
/// [`row_loop`] orders them.
///
/// Exact for activation bytes in `-127..=127`, the quantizers' range, as
/// `dot_q8` is.
///
/// # Panics
///
/// If the row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_b32s_1x8(w: &[B32Signed], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
    let [y] = gemm_nx8([w], x, |wb, g| b32s_terms(wb, g));
    y
}

/// [`gemm_b32s_1x8`] of two weight rows against the same eight
/// activation rows: each row's results [`gemm_b32s_1x8`]'s, bit for bit
/// (the same operations on each row, in the same order), each activation
/// load shared by the two rows. The AVX2 kernel's Q8_0 prefill runs it.
///
/// On an AMD EPYC (Zen 4) VM with the AVX2 kernels (`INFERNO_KERNEL=avx2
/// inferno bench --model Q8_0.gguf --backends simd --threads 1
/// --prompt-tokens 128`, three alternated rounds), a 128-token prefill
/// ran at 87-100 tok/s against 79-92 one row at a time (1.04-1.19x in
/// three more); four rows at a time, whose sums and broadcasts no longer
/// fit AVX2's sixteen registers, at 73-92.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_b32s_2x8(w: [&[B32Signed]; 2], x: &[Q8Group]) -> [[f32; GROUP_ROWS]; 2] {
    gemm_nx8(w, x, |wb, g| b32s_terms(wb, g))
}

/// One Q4_0 weight row, as its levels `0..=15`, against a batch's eight
/// interleaved activation rows: `dot_q4_0` of the row with each
/// activation row, bit for bit (NaN payloads aside), as
/// [`gemm_b32s_1x8`] is `dot_q8`'s. The levels are unsigned, so
/// `vpmaddubsw` takes them as they are (no `vpsignb`, one broadcast a
/// step); a pair of products is at most `2 * 15 * 128`, so the four
/// steps' pairs add exactly in `i16`, the group's `pair_bias` (eight times
/// the activation's pair sums) comes off there, leaving the pairs of
/// `(levels - 8) * x`, and one `vpmaddwd` per half widens them: two per
/// block where the Q8_0 GEMM takes eight. Exact for any activation byte.
///
/// # Panics
///
/// If the row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_q4_0_1x8(w: &[B32Levels], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
    let [y] = gemm_nx8([w], x, |wb, g| q4_0_terms(wb, g));
    y
}

/// [`gemm_q4_0_1x8`] of four weight rows against the same eight
/// activation rows: each row's results [`gemm_q4_0_1x8`]'s, bit for bit,
/// each activation load shared by the four rows' `vpmaddubsw`s (one row
/// at a time, every `vpmaddubsw` waited on a load of its own). The AVX2
/// kernel's Q4_0 prefill runs it.
///
/// On an AMD EPYC (Zen 4) VM with the AVX2 kernels (`INFERNO_KERNEL=avx2
/// inferno bench --model Q4_0.gguf --backends simd --threads 1
/// --prompt-tokens 128`, three alternated rounds), a 128-token prefill
/// ran at 146-150 tok/s against 122-125 one row at a time and 129-143
/// two rows at a time (in three more, on a busier machine, 1.15-1.30x
/// the one-row kernel's speed).
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_q4_0_4x8(w: [&[B32Levels]; 4], x: &[Q8Group]) -> [[f32; GROUP_ROWS]; 4] {
    gemm_nx8(w, x, |wb, g| q4_0_terms(wb, g))
}

/// The loop of the GEMMs, for `N` weight rows: block `b`'s eight terms
/// of each row (`terms`, in the order rows 0, 1, 4, 5 | 2, 3, 6, 7) added
/// to that row's partial sum `b % 4`, the four partial sums added as
/// [`finish`] orders them and the activation rows put back in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemm_nx8<W, const N: usize>(
    w: [&[W]; N],
    x: &[Q8Group],
    terms: impl Fn([&W; N], &Q8Group) -> [__m256; N],
) -> [[f32; GROUP_ROWS]; N] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "GEMM: block counts differ");
    }
    let mut acc = [[_mm256_setzero_ps(); 4]; N];
    // Four blocks a step, so that each row's four partial sums are
    // addressed by constants (indexed by `b % 4` they lived on the stack,
    // and `perf` put a quarter of the one-row loop's time on reloading
    // them).
    let (x4, x_rest) = x.as_chunks::<4>();
    let blocks = |b: usize| -> [&W; N] { core::array::from_fn(|r| &w[r][b]) };
    for (c, gc) in x4.iter().enumerate() {
        for (i, g) in gc.iter().enumerate() {
            let t = terms(blocks(4 * c + i), g);
            for (a, ti) in acc.iter_mut().zip(t) {
                a[i] = _mm256_add_ps(a[i], ti);
            }
        }
    }
    for (i, g) in x_rest.iter().enumerate() {
        let t = terms(blocks(4 * x4.len() + i), g);
        for (a, ti) in acc.iter_mut().zip(t) {
            a[i] = _mm256_add_ps(a[i], ti);
        }
    }
    let mut out = [[0.0f32; GROUP_ROWS]; N];
    for (o, a) in out.iter_mut().zip(acc) {
        let sum = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
        // The 64-bit words (rows 0 1, 4 5, 2 3, 6 7) back in row order.
        let ordered = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_castps_si256(sum));
        *o = bytemuck::cast(ordered);
    }
    out
}

/// One block's terms of each of `N` Q8_0 weight rows in the GEMMs:
/// `(d_w * d_x) * isum` of the eight activation rows, in the order rows
/// 0, 1, 4, 5 | 2, 3, 6, 7; each activation half loaded once for all the
/// rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn b32s_terms<const N: usize>(wb: [&B32Signed; N], g: &Q8Group) -> [__m256; N] {
    let ones = _mm256_set1_epi16(1);
    // isum[r][h]: lanes 2a, 2a + 1 of activation row 4h + a.
    let mut isum = [[_mm256_setzero_si256(); 2]; N];
    for (s, qs) in g.qs.iter().enumerate() {
        let mut wq = [_mm256_setzero_si256(); N];
        let mut wa = [_mm256_setzero_si256(); N];
        for r in 0..N {
            let (q8, _) = wb[r].q.as_chunks::<8>();
            let (abs8, _) = wb[r].abs.as_chunks::<8>();
            wq[r] = _mm256_set1_epi64x(i64::from_le_bytes(bytemuck::cast::<[i8; 8], [u8; 8]>(
                q8[s],
            )));
            wa[r] = _mm256_set1_epi64x(i64::from_le_bytes(abs8[s]));
        }
        let (halves, _) = qs.as_chunks::<32>();
        for (h, half) in halves.iter().enumerate() {
            let qx: __m256i = bytemuck::cast(*half);
            for r in 0..N {
                let pairs = _mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(qx, wq[r]));
                isum[r][h] = _mm256_add_epi32(isum[r][h], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    let mut terms = [_mm256_setzero_ps(); N];
    for r in 0..N {
        terms[r] = block_terms(isum[r], wb[r].d, g);
    }
    terms
}

/// One block's terms of each of `N` Q4_0 weight rows in the GEMMs, as
/// [`b32s_terms`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0_terms<const N: usize>(wb: [&B32Levels; N], g: &Q8Group) -> [__m256; N] {
    // pairs[r][h]: the pairs of activation row 4h + a in its four i16
    // lanes, summed over the steps (at most 4 * 2 * 15 * 128 in
    // magnitude).
    let mut pairs = [[_mm256_setzero_si256(); 2]; N];
    for (s, qs) in g.qs.iter().enumerate() {
        let mut wl = [_mm256_setzero_si256(); N];
        for r in 0..N {
            let (l8, _) = wb[r].q.as_chunks::<8>();
            wl[r] = _mm256_set1_epi64x(i64::from_le_bytes(l8[s]));
        }
        let (halves, _) = qs.as_chunks::<32>();
        for (h, half) in halves.iter().enumerate() {
            let qx: __m256i = bytemuck::cast(*half);
            for r in 0..N {
                pairs[r][h] = _mm256_add_epi16(pairs[r][h], _mm256_maddubs_epi16(wl[r], qx));
            }
        }
    }
    // Less the offset's pairs (at most 8 * 4 * 256 more: within i16).
    let one = _mm256_set1_epi16(1);
    let mut terms = [_mm256_setzero_ps(); N];
    for r in 0..N {
        let mut isum = [_mm256_setzero_si256(); 2];
        for (h, i) in isum.iter_mut().enumerate() {
            let bias: __m256i = bytemuck::cast(g.pair_bias[h]);
            *i = _mm256_madd_epi16(_mm256_sub_epi16(pairs[r][h], bias), one);
        }
        terms[r] = block_terms(isum, wb[r].d, g);
    }
    terms
}

/// The terms `(d_w * d_x) * isum` of a block's eight activation rows
/// from their lanes (`isum[h]`: lanes 2a, 2a + 1 of row 4h + a), in the
/// order rows 0, 1, 4, 5 | 2, 3, 6, 7.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn block_terms(isum: [__m256i; 2], d_w: f32, g: &Q8Group) -> __m256 {
    // Rows 0, 1, 4, 5 | 2, 3, 6, 7, each its block's exact sum.
    let rows = _mm256_hadd_epi32(isum[0], isum[1]);
    // The activation scales in that order (`g.d` holds each twice).
    let (d2, _) = g.d.as_chunks::<8>();
    let d_x = _mm256_shuffle_ps::<0b10_00_10_00>(bytemuck::cast(d2[0]), bytemuck::cast(d2[1]));
    let d = _mm256_mul_ps(_mm256_set1_ps(d_w), d_x);
    _mm256_mul_ps(d, _mm256_cvtepi32_ps(rows))
}
