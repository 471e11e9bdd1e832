//! AVX-512 VNNI kernels (256-bit `vpdpbusd` from AVX512-VL).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes and adds each group of
//! four products into an `i32` lane, without saturation. The weight bytes
//! are made unsigned by flipping their top bit (`w + 128`), which adds
//! `128 * (x[4j] + .. + x[4j+3])` to lane `j`; the accumulator starts at
//! the activation's precomputed `-128 * (x[4j] + .. + x[4j+3])`, so every
//! lane ends exactly where the AVX2 kernel's lane does, for any weight
//! byte including -128. The f32 part is the AVX2 kernel's, so the two
//! kernels return the same bits.
//!
//! The single-row kernels stay 256 bits wide: a Q8_0 block holds 32 bytes,
//! and pairing two blocks of a decode activation in one 512-bit register
//! costs inserts for the values, the lane sums and the scales, which
//! measured no faster than two 256-bit blocks on an Intel Xeon. The prefill
//! matmul, where an activation row meets every weight row, gets its rows
//! already paired ([`PairBlock`], built once per batch) and runs
//! [`dot_q8_x4_pairs`] at 512 bits, with the same bits.

use core::arch::x86_64::*;

use crate::quant::activation::{ActBlock, PairBlock};
use crate::quant::block::BlockQ8_0;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;

/// The weight side of a block: its bytes with the top bit flipped.
type Weight = __m256i;

/// [`Weight`] of a block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn prep(w: &BlockQ8_0) -> Weight {
    let qw: __m256i = bytemuck::cast(w.qs);
    _mm256_xor_si256(qw, _mm256_set1_epi8(i8::MIN))
}

/// Eight `i32` lanes whose sum is the block's exact integer dot product.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn lanes(w_unsigned: Weight, x: &ActBlock) -> __m256i {
    let qx: __m256i = bytemuck::cast(x.qs);
    let bias: __m256i = bytemuck::cast(x.neg_bias);
    _mm256_dpbusd_epi32(bias, w_unsigned, qx)
}

q8_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni");

/// `acc + vpmaddwd(a, b)` in one `vpdpwssd` (the multiply-add of `i16`
/// pairs accumulating into the `i32` lanes), for the K-quant kernels
/// (`k_kernels!`): the same lanes as AVX2's `vpmaddwd` then `vpaddd`, one
/// instruction fewer per 32 weights, and the f32 part is AVX2's, so the
/// AVX-512 VNNI K-quant kernels return the AVX2 kernels' bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, a, b)
}

k_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni");

/// Q4_0 lanes (`q4_0_kernels!`): one `vpdpbusd` of the unsigned levels by
/// the activations onto the activation's `-8 * sum`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn q4_lanes(q: __m256i, x: &ActBlock) -> __m256i {
    _mm256_dpbusd_epi32(q4_0_bias(x), q, bytemuck::cast(x.qs))
}

q4_0_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni");

/// `dot_q8_x4` (hence `dot_q8` of each row), bit for bit, with 512-bit
/// registers: `pairs[i]` holds row `i`'s blocks two by two ([`PairBlock`]),
/// `x[i]` the row itself (for an odd last block).
///
/// A register's low half does what `dot_q8`'s even-block accumulator does
/// and its high half what the odd-block one does, lane for lane: the same
/// `vpdpbusd` lanes, the same scale products, the same FMA into the same
/// running sum. The two halves are added and summed as `dot_q8` adds its two
/// accumulators, so the result is the same bits with half the instructions
/// per block (the weight side, two blocks' bytes and scales, is built once
/// per pair for the four rows).
///
/// # Panics
///
/// If any `x[i].len() != w.len()` or `pairs[i].len() != w.len() / 2`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) fn dot_q8_x4_pairs(
    w: &[BlockQ8_0],
    pairs: [&[PairBlock]; 4],
    x: [&[ActBlock]; 4],
) -> [f32; 4] {
    for (xi, pi) in x.iter().zip(&pairs) {
        assert_eq!(w.len(), xi.len(), "dot_q8: block counts differ");
        assert_eq!(w.len() / 2, pi.len(), "dot_q8: pair counts differ");
    }
    let flip = _mm512_set1_epi8(i8::MIN);
    let mut acc = [_mm512_setzero_ps(); 4];
    let (w2, w_rest) = w.as_chunks::<2>();
    for (k, [wa, wb]) in w2.iter().enumerate() {
        let (qa, qb): (__m256i, __m256i) = (bytemuck::cast(wa.qs), bytemuck::cast(wb.qs));
        let wu = _mm512_xor_si512(
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qa), qb),
            flip,
        );
        let halves = _mm256_set_m128i(
            _mm_set1_epi16(i16::from_le_bytes(wb.d)),
            _mm_set1_epi16(i16::from_le_bytes(wa.d)),
        );
        let dw = _mm512_cvtph_ps(halves);
        for (a, p) in acc.iter_mut().zip(&pairs) {
            let p = &p[k];
            let lanes = _mm512_dpbusd_epi32(bytemuck::cast(p.neg_bias), wu, bytemuck::cast(p.qs));
            let d = _mm512_mul_ps(dw, bytemuck::cast(p.d));
            *a = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), *a);
        }
    }
    core::array::from_fn(|i| {
        let wide = _mm512_castps_pd(acc[i]);
        let mut even = _mm256_castpd_ps(_mm512_castpd512_pd256(wide));
        let odd = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(wide));
        if let [wl] = w_rest {
            even = term_fma(even, prep(wl), super::avx2::scale8(wl), &x[i][w.len() - 1]);
        }
        super::avx2::hsum(_mm256_add_ps(even, odd))
    })
}

/// [`dot_q8_x4_pairs`] for two weight rows at once: `out[r][i]` is
/// `dot_q8(w[r], x[i])`, bit for bit. Each activation pair is loaded once
/// for both weight rows (its lane sums from memory once, its values and
/// scales read by both products from L1), halving what the four rows cost
/// in cache traffic per product: a prefill matmul spends its time reading
/// activations, not weights.
///
/// # Panics
///
/// If the two weight rows differ in length, or as [`dot_q8_x4_pairs`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
pub(crate) fn dot_q8_2x4_pairs(
    w: [&[BlockQ8_0]; 2],
    pairs: [&[PairBlock]; 4],
    x: [&[ActBlock]; 4],
) -> [[f32; 4]; 2] {
    let nb = w[0].len();
    assert_eq!(nb, w[1].len(), "dot_q8: weight rows differ in length");
    for (xi, pi) in x.iter().zip(&pairs) {
        assert_eq!(nb, xi.len(), "dot_q8: block counts differ");
        assert_eq!(nb / 2, pi.len(), "dot_q8: pair counts differ");
    }
    let flip = _mm512_set1_epi8(i8::MIN);
    let mut acc = [[_mm512_setzero_ps(); 4]; 2];
    let (wa2, wa_rest) = w[0].as_chunks::<2>();
    let (wb2, wb_rest) = w[1].as_chunks::<2>();
    let side = |[a, b]: &[BlockQ8_0; 2]| {
        let (qa, qb): (__m256i, __m256i) = (bytemuck::cast(a.qs), bytemuck::cast(b.qs));
        let wu = _mm512_xor_si512(
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qa), qb),
            flip,
        );
        let halves = _mm256_set_m128i(
            _mm_set1_epi16(i16::from_le_bytes(b.d)),
            _mm_set1_epi16(i16::from_le_bytes(a.d)),
        );
        (wu, _mm512_cvtph_ps(halves))
    };
    for (k, (pa, pb)) in wa2.iter().zip(wb2).enumerate() {
        let ws = [side(pa), side(pb)];
        for i in 0..4 {
            let p = &pairs[i][k];
            let bias: __m512i = bytemuck::cast(p.neg_bias);
            let qx: __m512i = bytemuck::cast(p.qs);
            let dx: __m512 = bytemuck::cast(p.d);
            for (r, &(wu, dw)) in ws.iter().enumerate() {
                let lanes = _mm512_dpbusd_epi32(bias, wu, qx);
                let d = _mm512_mul_ps(dw, dx);
                acc[r][i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[r][i]);
            }
        }
    }
    let rests = [wa_rest, wb_rest];
    core::array::from_fn(|r| {
        core::array::from_fn(|i| {
            let wide = _mm512_castps_pd(acc[r][i]);
            let mut even = _mm256_castpd_ps(_mm512_castpd512_pd256(wide));
            let odd = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(wide));
            if let [wl] = rests[r] {
                even = term_fma(even, prep(wl), super::avx2::scale8(wl), &x[i][nb - 1]);
            }
            super::avx2::hsum(_mm256_add_ps(even, odd))
        })
    })
}
