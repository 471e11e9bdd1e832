//! AVX2 + FMA + F16C kernels.
//!
//! The Q8_0 and Q4_0 kernels, which sum each block exactly before any
//! float operation, are in [`super::avx2_q8`]; this module holds the
//! K-quant, float and attention kernels, the activation quantizer and the
//! helpers they share.
//!
//! The kernels are safe `#[target_feature]` functions: only the call needs
//! the CPU check, made by `unsafe_core::simd::Avx2Token`. Vectors are loaded
//! from the blocks by value with `bytemuck::cast`, which compiles to plain
//! unaligned vector loads.

use core::arch::x86_64::*;

use half::f16;

use crate::quant::activation::ActBlock;
use crate::quant::block::{BlockQ8_0, QK8_0};
use crate::quant::dot::scalar::for_rows;
use crate::quant::kgroup::{K4Levels, Q6Levels, Q8KGroup, GROUP_ROWS};
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;
use crate::quant::{BlockQ4Kx8, BlockQ5Kx8, QK_K};

/// The f16 scale of a weight block, widened with `vcvtph2ps`, in all eight
/// lanes.
///
/// Built from a broadcast of the 16-bit value: converting a value inserted
/// into lane 0 (`_mm_cvtsi32_si128`, which the compiler turns into
/// `vpinsrw`) lets the compiler merge the insert into any register, and it
/// picked the row's live accumulator, so every block's scale waited for the
/// previous block's FMA. Removing that false dependency made the kernels
/// 1.45x faster on an Intel Xeon with the weights in cache.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale8(w: &BlockQ8_0) -> __m256 {
    let h = _mm_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(w.d)));
    _mm256_set_m128(h, h)
}

/// Two little-endian `f16` scales widened to `f32` with one `vcvtph2ps`
/// (exactly, as `f16_le_to_f32` widens them, NaN payloads aside): the
/// software widening branches on subnormals, which K-quant scales of real
/// weights often are, and its mispredictions cost the K-quant kernels
/// about a tenth of their time per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn f16_pair(a: [u8; 2], b: [u8; 2]) -> (f32, f32) {
    let bits = u32::from(u16::from_le_bytes(a)) | (u32::from(u16::from_le_bytes(b)) << 16);
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// The first 16 bytes of a Q4_K/Q5_K block decoded in general registers,
/// for the 256-bit decode rows (`k_prep_256!`): the eight 6-bit scales
/// (then the eight mins) as the bytes of one `u64`, exactly
/// `kcommon::scales_mins_k4`'s, and `[d, dmin, 0, 0]` widened exactly.
/// On a Zen 3 core a Q4_K decode row is bound by its vector operations
/// (the four vector pipes, not memory, were the limit, `llvm-mca
/// -mcpu=znver3` and the in-cache timing agreeing), and the shifts and
/// masks here run on the integer pipes beside them; the two words then
/// cross to vector registers with one move each. ([`k4_head`] does the
/// same in vector registers, for the kernels that spread the scales
/// from there.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn k4_head_gpr(head: &[u8; 16]) -> (u64, u64, __m128) {
    let word = |i: usize| {
        u32::from_le_bytes([
            head[4 * i],
            head[4 * i + 1],
            head[4 * i + 2],
            head[4 * i + 3],
        ])
    };
    let (w0, w1, w2) = (word(1), word(2), word(3));
    // Scales and mins 0-3: the low six bits of w0 and w1. Scales 4-7: the
    // low nibbles of w2 below the top two bits of w0's bytes; mins 4-7:
    // w2's high nibbles below the top two bits of w1's. (A shift by 2
    // moves bits 6-7 of each byte to bits 4-5 of the same byte, which the
    // mask keeps.)
    let low6 = 0x3f3f_3f3f;
    let (nib, top) = (0x0f0f_0f0f, 0x3030_3030);
    let scales_hi = (w2 & nib) | ((w0 >> 2) & top);
    let mins_hi = ((w2 >> 4) & nib) | ((w1 >> 2) & top);
    let scales = u64::from(w0 & low6) | (u64::from(scales_hi) << 32);
    let mins = u64::from(w1 & low6) | (u64::from(mins_hi) << 32);
    let dd = _mm_cvtph_ps(_mm_cvtsi32_si128(word(0) as i32));
    (scales, mins, dd)
}

/// The first 16 bytes of a Q4_K/Q5_K block (`d`, `dmin`, then the 12
/// packed bytes of the 6-bit scales and mins) decoded in vector registers:
/// the eight scales then the eight mins as bytes, exactly
/// `kcommon::scales_mins_k4`'s, and `d`, `dmin` widened exactly. (The
/// scalar decoding, a dozen shifts and masks on three words and the
/// inserts that move them into a vector, was a fifth of a decode block's
/// instructions.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn k4_head(head: [u8; 16]) -> (__m128i, f32, f32) {
    let v: __m128i = bytemuck::cast(head);
    let dd = _mm_cvtph_ps(v);
    // The packed words w0, w1, w2 (bytes 4-15).
    let w = _mm_srli_si128::<4>(v);
    // [w0, w2, w1, w2]: scales 0-3 and mins 0-3 are the low six bits of
    // w0 and w1 (lanes 0 and 2); scales 4-7 are the low nibbles of w2 and
    // mins 4-7 its high nibbles (lanes 1 and 3), ...
    let a = _mm_shuffle_epi32::<0b10_01_10_00>(w);
    let low6 = _mm_and_si128(a, _mm_setr_epi32(0x3f3f_3f3f, 0, 0x3f3f_3f3f, 0));
    let nib = _mm_and_si128(
        _mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
        _mm_setr_epi32(0, 0x0f0f_0f0f, 0, 0x0f0f_0f0f),
    );
    // ... with the top two bits of w0's bytes (scales) and w1's (mins)
    // above them.
    let b = _mm_shuffle_epi32::<0b01_00_00_00>(w);
    let top = _mm_slli_epi32::<4>(_mm_and_si128(
        _mm_srli_epi32::<6>(b),
        _mm_setr_epi32(0, 0x0303_0303, 0, 0x0303_0303),
    ));
    let sm = _mm_or_si128(low6, _mm_or_si128(nib, top));
    (sm, _mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)))
}

/// Sum of the eight lanes, in a fixed order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

// The Q8_0 and Q4_0 kernels take the scalar kernel's rounding (see
// `avx2_q8`).
pub(crate) use super::avx2_q8::{
    dot_q4_0, dot_q4_0_groups, dot_q4_0_packed8, dot_q4_0_x4, dot_q8, dot_q8_x4, gemm_b32s_1x8,
    gemm_b32s_2x8, gemm_q4_0_1x8, gemm_q4_0_4x8, matvec_q8,
};

/// Dot product of two f32 slices: four 8-lane FMA accumulators over
/// 32-element steps, then 8-element steps into the first, a fixed
/// horizontal sum, and the last `len % 8` products added left to right.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_f32(w: &[f32], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot_f32: lengths differ");
    let (w32, w_rest) = w.as_chunks::<32>();
    let (x32, x_rest) = x.as_chunks::<32>();
    let mut acc = [_mm256_setzero_ps(); 4];
    for (wc, xc) in w32.iter().zip(x32) {
        let wv: [__m256; 4] = bytemuck::cast(*wc);
        let xv: [__m256; 4] = bytemuck::cast(*xc);
        for i in 0..4 {
            acc[i] = _mm256_fmadd_ps(wv[i], xv[i], acc[i]);
        }
    }
    let (w8, w_tail) = w_rest.as_chunks::<8>();
    let (x8, x_tail) = x_rest.as_chunks::<8>();
    for (wc, xc) in w8.iter().zip(x8) {
        let wv: __m256 = bytemuck::cast(*wc);
        let xv: __m256 = bytemuck::cast(*xc);
        acc[0] = _mm256_fmadd_ps(wv, xv, acc[0]);
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    w_tail
        .iter()
        .zip(x_tail)
        .fold(hsum(sum), |s, (&a, &b)| s + a * b)
}

/// `dot_f32(x, k)` with `k` in `f16`, widened eight lanes at a time by
/// `vcvtph2ps` (exact): the same accumulators, steps and order as
/// [`dot_f32`], so the result is `dot_f32` of the widened row, bit for bit.
/// Attention reads the `f16` KV cache through it without a converted copy.
///
/// # Panics
///
/// If `x.len() != k.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_f16(x: &[f32], k: &[f16]) -> f32 {
    assert_eq!(x.len(), k.len(), "dot_f16: lengths differ");
    let (x32, x_rest) = x.as_chunks::<32>();
    let (k32, k_rest) = k.as_chunks::<32>();
    let mut acc = [_mm256_setzero_ps(); 4];
    for (xc, kc) in x32.iter().zip(k32) {
        let xv: [__m256; 4] = bytemuck::cast(*xc);
        let kv: [__m128i; 4] = bytemuck::cast(*kc);
        for i in 0..4 {
            acc[i] = _mm256_fmadd_ps(xv[i], _mm256_cvtph_ps(kv[i]), acc[i]);
        }
    }
    let (x8, x_tail) = x_rest.as_chunks::<8>();
    let (k8, k_tail) = k_rest.as_chunks::<8>();
    for (xc, kc) in x8.iter().zip(k8) {
        let xv: __m256 = bytemuck::cast(*xc);
        let kv: __m128i = bytemuck::cast(*kc);
        acc[0] = _mm256_fmadd_ps(xv, _mm256_cvtph_ps(kv), acc[0]);
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    x_tail
        .iter()
        .zip(k_tail)
        .fold(hsum(sum), |s, (&a, &b)| s + a * b.to_f32())
}

/// `[dot_f16(x[0], k), dot_f16(x[1], k)]`, bit for bit: each key chunk is
/// widened once for both queries (two query heads sharing a key/value
/// head), each query keeping `dot_f16`'s four accumulators, steps and sums.
///
/// # Panics
///
/// If either `x[i].len() != k.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_f16_x2(x: [&[f32]; 2], k: &[f16]) -> [f32; 2] {
    for xi in x {
        assert_eq!(xi.len(), k.len(), "dot_f16: lengths differ");
    }
    let (k32, k_rest) = k.as_chunks::<32>();
    let (a32, a_rest) = x[0].as_chunks::<32>();
    let (b32, b_rest) = x[1].as_chunks::<32>();
    let mut acc = [[_mm256_setzero_ps(); 4]; 2];
    for ((kc, ac), bc) in k32.iter().zip(a32).zip(b32) {
        let kv: [__m128i; 4] = bytemuck::cast(*kc);
        let av: [__m256; 4] = bytemuck::cast(*ac);
        let bv: [__m256; 4] = bytemuck::cast(*bc);
        for i in 0..4 {
            let w = _mm256_cvtph_ps(kv[i]);
            acc[0][i] = _mm256_fmadd_ps(av[i], w, acc[0][i]);
            acc[1][i] = _mm256_fmadd_ps(bv[i], w, acc[1][i]);
        }
    }
    finish_f16_x2(acc, [a_rest, b_rest], k_rest)
}

/// Attention scores of two queries against `out[0].len()` consecutive
/// `f16` key rows of `q[0].len()` values each (`k` holds at least those
/// rows): `out[h][t] = dot(q[h], row t) * scale`.
///
/// Eight positions at a time, as `avx512vnni::scores_f16_x2` does
/// sixteen: a row's dot ends in one 8-lane register per query (one
/// accumulator over the row's chunks of eight, in order, four rows
/// together: `quad_dots`), and the eight
/// positions' registers are summed together by a transpose of adds (7
/// adds and 14 shuffles for eight positions instead of a horizontal sum
/// each). Every position's lanes meet in the same tree whatever its place
/// in the block (a short block is filled with zeros), so a score depends
/// on its row and the query alone. Its bits are this kernel's own, not
/// [`dot_f16_x2`]'s.
///
/// The row [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on
/// is asked for as each row is read.
///
/// # Panics
///
/// If the width is not a nonzero multiple of 32, the queries or the
/// outputs differ in length, or `k` holds fewer rows than asked for.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scores_f16_x2(q: [&[f32]; 2], k: &[f16], scale: f32, out: [&mut [f32]; 2]) {
    let [o0, o1] = out;
    let n = o0.len();
    let [q0, q1] = score_chunks(q, k.len(), [n, o1.len()]);
    let sc = _mm256_set1_ps(scale);
    let mut t = 0;
    while t < n {
        let m = (n - t).min(8);
        let u0 = scores_quad(k, [q0, q1], t, t + m);
        let u1 = scores_quad(k, [q0, q1], t + 4, t + m);
        for (h, o) in [&mut *o0, &mut *o1].into_iter().enumerate() {
            // Each register holds four positions' sums per 128-bit half:
            // add the halves.
            let s = _mm256_add_ps(
                _mm256_permute2f128_ps::<0x20>(u0[h], u1[h]),
                _mm256_permute2f128_ps::<0x31>(u0[h], u1[h]),
            );
            let vals: [f32; 8] = bytemuck::cast(_mm256_mul_ps(s, sc));
            o[t..t + m].copy_from_slice(&vals[..m]);
        }
        t += m;
    }
}

/// The queries of `scores_f16_x2` and its four-query form (AVX2 and AVX-512) in chunks of
/// 32, after checking the shapes: a width that is a nonzero multiple of
/// 32, equal queries and outputs, and `k_len` values holding at least
/// the outputs' rows.
///
/// # Panics
///
/// If a check fails.
pub(super) fn score_chunks<const Q: usize>(
    q: [&[f32]; Q],
    k_len: usize,
    out: [usize; Q],
) -> [&[[f32; 32]]; Q] {
    let (hd, n) = (q[0].len(), out[0]);
    assert!(
        hd > 0
            && hd.is_multiple_of(32)
            && q.iter().all(|qi| qi.len() == hd)
            && out.iter().all(|&o| o == n),
        "scores_f16_x2: shapes differ"
    );
    assert!(
        k_len / hd >= n,
        "scores_f16_x2: {n} rows of {hd} past the end of the keys"
    );
    q.map(|qi| qi.as_chunks::<32>().0)
}

/// Positions `at..at + 4` of [`scores_f16_x2`] (those before `end`; the
/// rest count as zero) folded into one register per query: per 128-bit
/// half, the four positions' sums over that half, in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scores_quad(k: &[f16], q: [&[[f32; 32]]; 2], at: usize, end: usize) -> [__m256; 2] {
    let r = quad_dots(k, q, at, end);
    // Per half, rows a, b: [a0 + a2, b0 + b2, a1 + a3, b1 + b3].
    let pairs =
        |a: __m256, b: __m256| _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    [0, 1].map(|h| {
        let ab = _mm256_castps_pd(pairs(r[0][h], r[1][h]));
        let cd = _mm256_castps_pd(pairs(r[2][h], r[3][h]));
        _mm256_add_ps(
            _mm256_castpd_ps(_mm256_unpacklo_pd(ab, cd)),
            _mm256_castpd_ps(_mm256_unpackhi_pd(ab, cd)),
        )
    })
}

/// Key row `at` of `k` (rows of `hd` values), after asking for the row
/// [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on (a hint:
/// past the cached rows it reads nothing).
#[inline]
pub(super) fn key_row(k: &[f16], hd: usize, at: usize) -> &[f16] {
    let row = &k[at * hd..(at + 1) * hd];
    super::kv_row_hint(row, 0, 2 * hd, 2 * hd);
    row
}

/// Key rows `at..at + 4` of `k` against both queries (rows from `end` on
/// count as zero and are not read): per row and query, the eight lane
/// sums, each lane one accumulator over the row's chunks of eight in
/// order. Four rows go together so each query chunk is loaded once for
/// all four, and the eight accumulators (four rows, two queries) keep both
/// FMA pipes busy: with one row at a time, its four accumulators per query
/// and the queries read from memory for every row, a Zen 3 core spent
/// about 50 cycles on a 128-wide row. Asks for the row
/// [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on of each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quad_dots(k: &[f16], q: [&[[f32; 32]]; 2], at: usize, end: usize) -> [[__m256; 2]; 4] {
    let hd = q[0].len() * 32;
    let (q0, _) = q[0].as_flattened().as_chunks::<8>();
    let (q1, _) = q[1].as_flattened().as_chunks::<8>();
    let mut a = [[_mm256_setzero_ps(); 2]; 4];
    let live = end.saturating_sub(at).min(4);
    if live < 4 {
        // A short last block: its rows one at a time, each lane the same
        // chunks in the same order.
        for (i, ai) in a.iter_mut().enumerate().take(live) {
            let (row, _) = key_row(k, hd, at + i).as_chunks::<8>();
            for ((kc, x0), x1) in row.iter().zip(q0).zip(q1) {
                let w = _mm256_cvtph_ps(bytemuck::cast(*kc));
                ai[0] = _mm256_fmadd_ps(bytemuck::cast(*x0), w, ai[0]);
                ai[1] = _mm256_fmadd_ps(bytemuck::cast(*x1), w, ai[1]);
            }
        }
        return a;
    }
    // Not `array::map` or `from_fn`: their closures did not inline.
    let r0 = key_row(k, hd, at).as_chunks::<8>().0;
    let r1 = key_row(k, hd, at + 1).as_chunks::<8>().0;
    let r2 = key_row(k, hd, at + 2).as_chunks::<8>().0;
    let r3 = key_row(k, hd, at + 3).as_chunks::<8>().0;
    let rows = [r0, r1, r2, r3];
    for (c, (x0, x1)) in q0.iter().zip(q1).enumerate() {
        let x0: __m256 = bytemuck::cast(*x0);
        let x1: __m256 = bytemuck::cast(*x1);
        for (ai, row) in a.iter_mut().zip(&rows) {
            let w = _mm256_cvtph_ps(bytemuck::cast(row[c]));
            ai[0] = _mm256_fmadd_ps(x0, w, ai[0]);
            ai[1] = _mm256_fmadd_ps(x1, w, ai[1]);
        }
    }
    a
}

/// The portable softmax (`model::ops::softmax`) compiled for AVX2: the
/// same operations in the same order, so the same bits, eight lanes wide
/// instead of the baseline's four.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn softmax(x: &mut [f32]) -> (f32, f64) {
    crate::model::ops::softmax(x)
}

/// `model::ops::swiglu(gate, up)`, bit for bit: eight values at a time,
/// `exp_f64`'s operations on two registers of four doubles (the table's
/// entries picked one lane at a time), then `x / (1 + e^-x) * u` in
/// `f32`. Eight values any of whose `-x` lies outside `exp_f64`'s range
/// (`|x| >= 88`, NaN), and the last `len % 8`, go through the portable
/// loop, compiled here.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    let (g8, g_rest) = gate[..n].as_chunks_mut::<8>();
    let (u8s, u_rest) = up[..n].as_chunks::<8>();
    let sign = _mm256_set1_epi32(i32::MIN);
    for (g, u) in g8.iter_mut().zip(u8s) {
        let x: __m256 = bytemuck::cast(*g);
        // `-x`, the sign bit flipped as `-` does.
        let neg = _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(x), sign));
        if !in_exp_range8(neg) {
            crate::model::ops::swiglu(g, u);
            continue;
        }
        let lo = exp_f64x4(_mm256_castps256_ps128(neg));
        let hi = exp_f64x4(_mm256_extractf128_ps::<1>(neg));
        let e = _mm256_set_m128(hi, lo);
        let s = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e));
        *g = bytemuck::cast(_mm256_mul_ps(s, bytemuck::cast(*u)));
    }
    crate::model::ops::swiglu(g_rest, u_rest);
}

/// Whether all eight lanes are in `model::ops::exp_f64`'s own range
/// (`exp_f64_in_range`: the top twelve bits of the magnitude below 88's).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn in_exp_range8(v: __m256) -> bool {
    let top = _mm256_and_si256(
        _mm256_srli_epi32::<20>(_mm256_castps_si256(v)),
        _mm256_set1_epi32(0x7ff),
    );
    let out = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a));
    _mm256_testz_si256(out, out) == 1
}

/// `model::ops::exp_f64` of four in-range values, lane by lane the same
/// operations: the same bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn exp_f64x4(x: __m128) -> __m128 {
    use crate::model::ops::{EXP_INV_LN2_32, EXP_POLY, EXP_SHIFT, EXP_TABLE};
    let xd = _mm256_cvtps_pd(x);
    let inv = _mm256_set1_pd(EXP_INV_LN2_32);
    let shift = _mm256_set1_pd(EXP_SHIFT);
    let kd = _mm256_add_pd(_mm256_mul_pd(inv, xd), shift);
    let ki = _mm256_castpd_si256(kd);
    let kd = _mm256_sub_pd(kd, shift);
    let r = _mm256_fmsub_pd(inv, xd, kd);
    let k: [u64; 4] = bytemuck::cast(ki);
    let t: __m256i = bytemuck::cast(k.map(|k| EXP_TABLE[(k % 32) as usize]));
    let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
    let [c0, c1, c2] = EXP_POLY;
    let p = _mm256_fmadd_pd(_mm256_set1_pd(c0), r, _mm256_set1_pd(c1));
    let q = _mm256_fmadd_pd(_mm256_set1_pd(c2), r, _mm256_set1_pd(1.0));
    let y = _mm256_fmadd_pd(p, _mm256_mul_pd(r, r), q);
    _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
}

/// `model::ops::round_f16(x)`, the same values: eight at a time through
/// F16C's conversions (`vcvtps2ph` rounding to nearest even, then
/// `vcvtph2ps`), the rest as the portable code does them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn round_f16(x: &mut [f32]) {
    let (chunks, rest) = x.as_chunks_mut::<8>();
    for c in chunks {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(bytemuck::cast(*c));
        *c = bytemuck::cast(_mm256_cvtph_ps(h));
    }
    crate::model::ops::round_f16(rest);
}

/// `dst[i] = f16::from_f32(src[i])` (round to nearest even) for the
/// shorter of the two, eight at a time through `vcvtps2ph`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn to_f16(src: &[f32], dst: &mut [f16]) {
    let n = src.len().min(dst.len());
    let (s8, s_rest) = src[..n].as_chunks::<8>();
    let (d8, d_rest) = dst[..n].as_chunks_mut::<8>();
    for (s, d) in s8.iter().zip(d8) {
        *d = bytemuck::cast(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(
            bytemuck::cast(*s),
        ));
    }
    for (s, d) in s_rest.iter().zip(d_rest) {
        *d = f16::from_f32(*s);
    }
}

/// `sample::argmax_lanes` compiled for AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn argmax(x: &[f32]) -> u32 {
    crate::sample::argmax_lanes(x)
}

/// The end of [`dot_f16_x2`] (and of the 512-bit form, which hands over its
/// accumulators split into these four): each query's last chunks of eight
/// and single values after the whole chunks of 32, then its sum.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn finish_f16_x2(acc: [[__m256; 4]; 2], rests: [&[f32]; 2], k_rest: &[f16]) -> [f32; 2] {
    let (k8, k_tail) = k_rest.as_chunks::<8>();
    // A loop, not `array::from_fn`: its closure did not inline, and this
    // runs once per cached position.
    let mut out = [0.0f32; 2];
    for h in 0..2 {
        let mut a = acc[h];
        let (x8, x_tail) = rests[h].as_chunks::<8>();
        for (xc, kc) in x8.iter().zip(k8) {
            let xv: __m256 = bytemuck::cast(*xc);
            let kv: __m128i = bytemuck::cast(*kc);
            a[0] = _mm256_fmadd_ps(xv, _mm256_cvtph_ps(kv), a[0]);
        }
        let sum = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
        out[h] = x_tail
            .iter()
            .zip(k_tail)
            .fold(hsum(sum), |s, (&p, &q)| s + p * q.to_f32());
    }
    out
}

/// `out[i] += p * v[i]` with `v` in `f16`: a multiply and an add per lane
/// (not fused), the same bits as the scalar kernel.
///
/// # Panics
///
/// If `out.len() != v.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn axpy_f16(out: &mut [f32], p: f32, v: &[f16]) {
    assert_eq!(out.len(), v.len(), "axpy_f16: lengths differ");
    let pv = _mm256_set1_ps(p);
    let (o8, o_tail) = out.as_chunks_mut::<8>();
    let (v8, v_tail) = v.as_chunks::<8>();
    for (oc, vc) in o8.iter_mut().zip(v8) {
        let o: __m256 = bytemuck::cast(*oc);
        let x = _mm256_cvtph_ps(bytemuck::cast::<[f16; 8], __m128i>(*vc));
        *oc = bytemuck::cast(_mm256_add_ps(o, _mm256_mul_ps(pv, x)));
    }
    for (o, &x) in o_tail.iter_mut().zip(v_tail) {
        *o += p * x.to_f32();
    }
}

/// `out = sum_t ps[t] * row_t` with `row_t = v[t * stride..][..out.len()]`
/// in `f16`: exactly `out.fill(0.0)` followed by [`axpy_f16`] of each row in
/// order (a multiply and an add per lane, not fused), but with each chunk
/// of 32 output lanes loaded and stored once per block of
/// [`WEIGHTED_BLOCK_ROWS`] rows instead of once per row. Attention's
/// weighted sum of the cached values; see [`weighted_sum_f16_x2`] for why
/// blocks of rows.
///
/// # Panics
///
/// If a row runs past the end of `v`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn weighted_sum_f16(out: &mut [f32], ps: &[f32], v: &[f16], stride: usize) {
    let hd = out.len();
    check_rows(ps.len(), stride, hd, v.len());
    out.fill(0.0);
    let (o32, _) = out.as_chunks_mut::<32>();
    let mut t0 = 0;
    while t0 < ps.len() {
        let rows = t0..(t0 + WEIGHTED_BLOCK_ROWS).min(ps.len());
        for (c, oc) in o32.iter_mut().enumerate() {
            let mut acc: [__m256; 4] = bytemuck::cast(*oc);
            for t in rows.clone() {
                let at = t * stride + c * 32;
                let row: &[f16; 32] = v[at..at + 32].try_into().expect("32 values");
                let kv: [__m128i; 4] = bytemuck::cast(*row);
                let pv = _mm256_set1_ps(ps[t]);
                for (a, &k) in acc.iter_mut().zip(&kv) {
                    *a = _mm256_add_ps(*a, _mm256_mul_ps(pv, _mm256_cvtph_ps(k)));
                }
            }
            *oc = bytemuck::cast(acc);
        }
        t0 = rows.end;
    }
    let done = o32.len() * 32;
    if done < hd {
        for (t, &p) in ps.iter().enumerate() {
            let at = t * stride;
            axpy_f16(&mut out[done..], p, &v[at + done..at + hd]);
        }
    }
}

/// Panics unless `n` rows of `hd` values, `stride` apart, lie within
/// `len` values (the weighted sums' bounds, checked once up front).
#[inline]
pub(super) fn check_rows(n: usize, stride: usize, hd: usize, len: usize) {
    if let Some(last) = n.checked_sub(1) {
        assert!(
            last.checked_mul(stride)
                .and_then(|a| a.checked_add(hd))
                .is_some_and(|e| e <= len),
            "weighted_sum_f16: rows run past the values"
        );
    }
}

/// [`weighted_sum_f16`] for two weight vectors over the same rows:
/// `out[h] = sum_t ps[h][t] * row_t`, each bit for bit what
/// `weighted_sum_f16(out[h], ps[h], v, stride)` writes, widening each row
/// chunk once for both (two query heads sharing a key/value head).
///
/// The rows go by in blocks of [`WEIGHTED_BLOCK_ROWS`], each block read
/// from memory once, in order: per chunk of 32 lanes the outputs are
/// loaded, the block's rows added in order and the outputs stored. Each
/// lane still sees the same adds in the same order. A pass over all the
/// rows per chunk (the outputs in registers throughout) read each row a
/// quarter at a time, four passes over a part that does not fit in L1,
/// and waited on memory: on an AMD EPYC (Zen 3) core it ran at about 80
/// cycles a 128-wide row after a 511-token prompt.
///
/// # Panics
///
/// If the outputs or the weights differ in length, or a row runs past the
/// end of `v`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn weighted_sum_f16_x2(out: [&mut [f32]; 2], ps: [&[f32]; 2], v: &[f16], stride: usize) {
    let [o0, o1] = out;
    let hd = o0.len();
    let n = ps[0].len();
    assert!(
        o1.len() == hd && ps[1].len() == n,
        "weighted_sum_f16: shapes differ"
    );
    check_rows(n, stride, hd, v.len());
    let done = hd / 32 * 32;
    o0[..done].fill(0.0);
    o1[..done].fill(0.0);
    let (a32, _) = o0.as_chunks_mut::<32>();
    let (b32, _) = o1.as_chunks_mut::<32>();
    let mut t0 = 0;
    while t0 < n {
        let rows = t0..(t0 + WEIGHTED_BLOCK_ROWS).min(n);
        for t in rows.clone() {
            // The row `KV_PREFETCH_ROWS` on (a hint).
            super::kv_row_hint(v, 2 * t * stride, 2 * stride, 2 * hd);
        }
        for (c, (oa, ob)) in a32.iter_mut().zip(b32.iter_mut()).enumerate() {
            let mut acc: [[__m256; 4]; 2] = [bytemuck::cast(*oa), bytemuck::cast(*ob)];
            for t in rows.clone() {
                let at = t * stride + c * 32;
                let row: &[f16; 32] = v[at..at + 32].try_into().expect("32 values");
                let kv: [__m128i; 4] = bytemuck::cast(*row);
                let (p0, p1) = (_mm256_set1_ps(ps[0][t]), _mm256_set1_ps(ps[1][t]));
                for i in 0..4 {
                    let x = _mm256_cvtph_ps(kv[i]);
                    acc[0][i] = _mm256_add_ps(acc[0][i], _mm256_mul_ps(p0, x));
                    acc[1][i] = _mm256_add_ps(acc[1][i], _mm256_mul_ps(p1, x));
                }
            }
            *oa = bytemuck::cast(acc[0]);
            *ob = bytemuck::cast(acc[1]);
        }
        t0 = rows.end;
    }
    weighted_tail_f16_x2([o0, o1], ps, v, stride, done);
}

/// Rows per block of [`weighted_sum_f16_x2`]: eight 128-wide `f16` rows
/// are 2 KiB, and the outputs are loaded and stored once per eight rows.
const WEIGHTED_BLOCK_ROWS: usize = 8;

/// The values `done..` of each output of [`weighted_sum_f16_x2`] (those
/// past its whole chunks), row after row with [`axpy_f16`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn weighted_tail_f16_x2(
    out: [&mut [f32]; 2],
    ps: [&[f32]; 2],
    v: &[f16],
    stride: usize,
    done: usize,
) {
    for (o, p) in out.into_iter().zip(ps) {
        let hd = o.len();
        o[done..].fill(0.0);
        if done < hd {
            for (t, &pt) in p.iter().enumerate() {
                let at = t * stride;
                axpy_f16(&mut o[done..], pt, &v[at + done..at + hd]);
            }
        }
    }
}

/// `out[r] = dot_f32(row r of w, x)` for rows of `cols` values.
///
/// # Panics
///
/// If `x.len() != cols` or `w.len() != cols * out.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn matvec_f32(w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
    for_rows(w, cols, x.len(), out, |row| dot_f32(row, x));
}

/// Quantizes each 32-value chunk of `x` into the matching block of `out`,
/// byte for byte as the portable quantizer (`quant::quantize`).
///
/// # Panics
///
/// If `x.len() != out.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn quantize_act(x: &[[f32; QK8_0]], out: &mut [ActBlock]) {
    assert_eq!(x.len(), out.len(), "quantize_act: block counts differ");
    for (o, c) in out.iter_mut().zip(x) {
        *o = quantize_block(c);
    }
}

/// One block, vectorised. Each step mirrors `quantize_block_q8_0`:
///
/// * `amax`: without NaN in the block, GGML's running maximum is the plain
///   maximum, which `vmaxps` computes in any order; a block with a NaN
///   takes the portable code, whose result depends on the NaN's position;
/// * `d` and `1 / d` are the same scalar f32 operations;
/// * `x * id` is the same product per lane; NaN lanes become 0 and the
///   rest are clamped to `-127..=127` before rounding, as the portable
///   code does;
/// * rounding is `vroundps` to nearest, ties to even, as `round_ties_even`;
/// * the values pack to bytes without saturating, and the lane sums come
///   from the packed bytes with the same `vpmaddubsw`/`vpmaddwd` pair the
///   dot kernel uses.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_block(x: &[f32; QK8_0]) -> ActBlock {
    let v: [__m256; 4] = bytemuck::cast(*x);
    let sign = _mm256_set1_ps(-0.0);
    let unord = |a: __m256| _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a);
    let any_nan = _mm256_or_ps(
        _mm256_or_ps(unord(v[0]), unord(v[1])),
        _mm256_or_ps(unord(v[2]), unord(v[3])),
    );
    if _mm256_movemask_ps(any_nan) != 0 {
        return ActBlock::quantize(x);
    }
    let abs = |a: __m256| _mm256_andnot_ps(sign, a);
    let m = _mm256_max_ps(
        _mm256_max_ps(abs(v[0]), abs(v[1])),
        _mm256_max_ps(abs(v[2]), abs(v[3])),
    );
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    let amax = _mm_cvtss_f32(m);

    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let idv = _mm256_set1_ps(id);
    let (lo, hi) = (_mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
    let round = |a: __m256| {
        let s = _mm256_mul_ps(a, idv);
        let s = _mm256_andnot_ps(unord(s), s); // NaN -> +0
        let s = _mm256_min_ps(_mm256_max_ps(s, lo), hi);
        let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(s);
        _mm256_cvtps_epi32(r) // exact: r is an integer
    };
    let q = [round(v[0]), round(v[1]), round(v[2]), round(v[3])];
    // packs interleave the 128-bit halves; the permute restores the order.
    let q16a = _mm256_packs_epi32(q[0], q[1]);
    let q16b = _mm256_packs_epi32(q[2], q[3]);
    let q8 = _mm256_packs_epi16(q16a, q16b);
    let q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    let sums = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8),
        _mm256_set1_epi16(1),
    );
    let neg_bias = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<7>(sums));
    // No NaN reaches here, and for every other value `vcvtps2ph` with
    // round-to-nearest-even is `f16::from_f32`.
    let d16 = _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d)));
    ActBlock::from_parts(
        f16::from_bits(d16 as u16),
        bytemuck::cast(q8),
        bytemuck::cast(neg_bias),
    )
}

/// The bandwidth probes' checksum of `bytes` (`scalar::sum_bytes`): each
/// aligned step of four cache lines ([`Lines4`](crate::quant::dot::scalar::Lines4))
/// read by eight 256-bit loads added as `u64` lanes into four independent
/// accumulators, the bytes outside them added one by one, and, with
/// `prefetch`, each line asked for [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD)
/// bytes early, as the decode matvecs ask for theirs. A loop that does
/// nothing but read, the roofline a matvec is held against.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn sum_bytes(bytes: &[u8], prefetch: bool) -> u64 {
    let (head, body, tail) = crate::quant::dot::scalar::split_lines(bytes);
    let body: &[[__m256i; 8]] = bytemuck::cast_slice(body);
    let mut acc = [_mm256_setzero_si256(); 4];
    for (k, lines) in body.iter().enumerate() {
        for (h, half) in lines.chunks_exact(4).enumerate() {
            if prefetch {
                let ahead = k * 256 + h * 128 + super::PREFETCH_AHEAD;
                crate::unsafe_core::prefetch::prefetch_read(body, ahead);
                crate::unsafe_core::prefetch::prefetch_read(body, ahead + 64);
            }
            for (a, &v) in acc.iter_mut().zip(half) {
                *a = _mm256_add_epi64(*a, v);
            }
        }
    }
    let s = _mm256_add_epi64(
        _mm256_add_epi64(acc[0], acc[1]),
        _mm256_add_epi64(acc[2], acc[3]),
    );
    let lanes: [u64; 4] = bytemuck::cast(s);
    head.iter()
        .chain(tail)
        .map(|&b| u64::from(b))
        .chain(lanes)
        .fold(0, u64::wrapping_add)
}

/// `acc + vpmaddwd(a, b)`: AVX2's multiply-add of `i16` pairs into the
/// `i32` lanes, for the K-quant kernels (`k_kernels!`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
}

k_prep_256!("avx2,fma,f16c");
k_kernels!("avx2,fma,f16c");

/// `[dot_q4_k(w[0], x), .., dot_q4_k(w[7], x)]`, bit for bit (NaN payloads
/// aside): eight decode rows against one activation, four at a time
/// ([`k4_rows4`]).
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_k_rows8(w: [&[BlockQ4K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
    let lo = k4_rows4([w[0], w[1], w[2], w[3]], x, |b| q4_k_prep(b));
    let hi = k4_rows4([w[4], w[5], w[6], w[7]], x, |b| q4_k_prep(b));
    core::array::from_fn(|i| if i < 4 { lo[i] } else { hi[i - 4] })
}

/// [`dot_q4_k_rows8`] for Q5_K rows: `dot_q5_k` of each, bit for bit.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q5_k_rows8(w: [&[BlockQ5K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
    let lo = k4_rows4([w[0], w[1], w[2], w[3]], x, |b| q5_k_prep(b));
    let hi = k4_rows4([w[4], w[5], w[6], w[7]], x, |b| q5_k_prep(b));
    core::array::from_fn(|i| if i < 4 { lo[i] } else { hi[i - 4] })
}

/// Four Q4_K or Q5_K rows against one activation, block by block: each
/// row's `k4_step` (the block's lanes and the mins' products summed
/// exactly, one FMA into the row's sum, one product subtracted from its
/// mins' sum), with the four rows' exact sums reduced together
/// ([`hsum4_epi32`]) and their float operations run lane by lane, so each
/// result is `dot_q4_k`'s (or `dot_q5_k`'s), bit for bit. What the rows
/// share is the reduction and the float step, a fifth of a single row's
/// work per block.
///
/// The lines four rows on are asked for as the block's share of the
/// four rows goes by ([`PREFETCH_AHEAD`](super::PREFETCH_AHEAD) bytes
/// past it, counted from `w[0]` as if the rows were one after the other,
/// as a matrix's are).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k4_rows4<B>(w: [&[B]; 4], x: &[BlockQ8K], prep: impl Fn(&B) -> K4Prep) -> [f32; 4] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "K-quant rows: block counts differ");
    }
    // The four rows' bytes per block, as if the rows lay one after the other.
    let step = 4 * core::mem::size_of::<B>();
    let mut acc = _mm_setzero_ps();
    let mut acc_min = _mm_setzero_ps();
    for (b, xb) in x.iter().enumerate() {
        let mut line = (b * step) & !63;
        while line < (b + 1) * step {
            crate::unsafe_core::prefetch::prefetch_read(w[0], super::PREFETCH_AHEAD + line);
            line += 64;
        }
        let bsums: __m256i = bytemuck::cast(xb.bsums);
        let mut lanes = [_mm256_setzero_si256(); 4];
        let mut prod = [_mm256_setzero_si256(); 4];
        let mut d = [0.0f32; 4];
        let mut dmin = [0.0f32; 4];
        for r in 0..4 {
            let p = prep(&w[r][b]);
            lanes[r] = k4_lanes(&p, xb);
            prod[r] = _mm256_madd_epi16(bsums, p.mins);
            d[r] = p.d;
            dmin[r] = p.dmin;
        }
        let isums = _mm_cvtepi32_ps(hsum4_epi32(lanes));
        let msums = _mm_cvtepi32_ps(hsum4_epi32(prod));
        let dx = _mm_set1_ps(xb.d);
        let dd = _mm_mul_ps(bytemuck::cast(d), dx);
        acc = _mm_fmadd_ps(dd, isums, acc);
        let dm = _mm_mul_ps(bytemuck::cast(dmin), dx);
        acc_min = _mm_sub_ps(acc_min, _mm_mul_ps(dm, msums));
    }
    bytemuck::cast(_mm_add_ps(acc, acc_min))
}

/// `PACKED_PICKS[j]`: the `vpshufb` pattern that zero-extends byte `j` of
/// each 64-bit lane (a packed row's eight scale bytes) into that lane's
/// four `i16` lanes.
static PACKED_PICKS: [[u8; 32]; 8] = super::zero_extend_picks(8);

/// `[dot_q4_k(row r, x)]` of the eight rows packed in `w`
/// ([`BlockQ4Kx8`]), bit for bit (NaN payloads aside), with the rows in
/// the lanes: a 256-bit register holds one 8-byte nibble word of four
/// rows, one `vpmaddubsw` multiplies it by the activation's 8 bytes
/// broadcast, a sub-block's four words are added in `i16` (at most
/// `4 * 2 * 15 * 128`), and one `vpmaddwd` by the four rows' scales (one
/// `vpshufb` for four rows) widens them. Each row's block sum is the same
/// exact integer as `dot_q4_k`'s, and its float step the same operations.
/// The lines [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD) bytes on are asked
/// for in L1 as the blocks go by (20 KiB on, in L2, where
/// [`weights_to_l2`](super::weights_to_l2) says so).
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q4_k_packed8(w: &[BlockQ4Kx8], x: &[BlockQ8K]) -> [f32; 8] {
    k4_packed8::<_, false>(w, x, |b| (&b.heads, &b.qs, None))
}

/// [`dot_q4_k_packed8`] for Q5_K rows ([`BlockQ5Kx8`]): each row's
/// `dot_q5_k`, bit for bit (NaN payloads aside). A fifth-bit word of four
/// rows (`qh`, the bits of eight sub-blocks at the same eight positions)
/// is shifted down to the sub-block's bit and put in as 16, so the
/// levels reach 31 and a sub-block's four `vpmaddubsw` sums at most
/// `4 * 2 * 31 * 128 = 31,744`, still within `i16`.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_q5_k_packed8(w: &[BlockQ5Kx8], x: &[BlockQ8K]) -> [f32; 8] {
    k4_packed8::<_, true>(w, x, |b| (&b.heads, &b.qs, Some(&b.qh)))
}

/// A packed Q4_K or Q5_K block's heads, nibble words and (Q5_K) fifth-bit
/// words, as [`k4_packed8`] reads them.
type PackedParts<'a> = (
    &'a [[u8; 16]; 8],
    &'a [[[u8; 8]; 8]; 16],
    Option<&'a [[[u8; 8]; 8]; 4]>,
);

/// The loop of [`dot_q4_k_packed8`] and [`dot_q5_k_packed8`]: `parts`
/// gives a packed block's parts; with `FIFTH`, its fifth bits are read.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k4_packed8<P, const FIFTH: bool>(
    w: &[P],
    x: &[BlockQ8K],
    parts: impl Fn(&P) -> PackedParts<'_>,
) -> [f32; 8] {
    assert_eq!(w.len(), x.len(), "packed dot: block counts differ");
    let m4 = _mm256_set1_epi8(0x0f);
    let m16 = _mm256_set1_epi8(0x10);
    let picks = core::hint::black_box(&PACKED_PICKS);
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let block = core::mem::size_of::<P>();
    // Where the CPU wants the weights in L2 (AMD Zen 4, which runs these
    // rows only when the AVX2 kernels are asked for: `INFERNO_KERNEL=avx2`),
    // the AVX-512 kernel's hints, 20 KiB on; elsewhere L1 ones, as measured
    // on Zen 3. On a Zen 4 VM (`INFERNO_KERNEL=avx2 STREAM_TYPES=q4_kp,q5_kp
    // cargo bench --bench stream`, three alternated runs) the packed Q4_K
    // rows read 0.71-0.90 of the probe's speed against 0.51-0.54 with the
    // L1 hints, Q5_K 0.58-0.72 against 0.27-0.51.
    let to_l2 = super::weights_to_l2();
    let ahead = if to_l2 {
        super::avx512vnni::K_ROWS8_AHEAD_L2
    } else {
        super::PREFETCH_AHEAD
    };
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    for (b, (wb, xb)) in w.iter().zip(x).enumerate() {
        let mut line = (b * block) & !63;
        while line < (b + 1) * block {
            if to_l2 {
                crate::unsafe_core::prefetch::prefetch_read_l2(w, ahead + line);
            } else {
                crate::unsafe_core::prefetch::prefetch_read(w, ahead + line);
            }
            line += 64;
        }
        let (heads, qs, qh) = parts(wb);
        let PackedHeads {
            scales: scv,
            d,
            dmin,
            msums,
        } = packed_heads(heads, &xb.bsums);
        let (q8, _) = xb.qs.as_chunks::<8>();
        let mut isum = [_mm256_setzero_si256(); 2];
        for k in 0..4 {
            // Sub-blocks 2k (low nibbles) and 2k + 1 (high nibbles) have
            // their fifth bits at bits 2k and 2k + 1 of each `qh` byte.
            let down = _mm_cvtsi32_si128(2 * k as i32);
            let mut lo = [_mm256_setzero_si256(); 2];
            let mut hi = [_mm256_setzero_si256(); 2];
            for t in 0..4 {
                let xl = _mm256_set1_epi64x(i64::from_le_bytes(bytemuck::cast(q8[8 * k + t])));
                let xh = _mm256_set1_epi64x(i64::from_le_bytes(bytemuck::cast(q8[8 * k + 4 + t])));
                let word = &qs[4 * k + t];
                for g in 0..2 {
                    let rows = |w: &[[u8; 8]; 8]| -> __m256i {
                        bytemuck::cast([w[4 * g], w[4 * g + 1], w[4 * g + 2], w[4 * g + 3]])
                    };
                    let bits = rows(word);
                    let mut l = _mm256_and_si256(bits, m4);
                    let mut h = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
                    if let (true, Some(qh)) = (FIFTH, qh) {
                        // Bit 0 (then 1) of each byte moved to bit 4: the
                        // 16-bit shifts carry other bytes' bits across,
                        // but the mask keeps only each byte's own.
                        let fifth = _mm256_srl_epi16(rows(&qh[t]), down);
                        l = _mm256_or_si256(
                            l,
                            _mm256_and_si256(_mm256_slli_epi16::<4>(fifth), m16),
                        );
                        h = _mm256_or_si256(
                            h,
                            _mm256_and_si256(_mm256_slli_epi16::<3>(fifth), m16),
                        );
                    }
                    lo[g] = _mm256_add_epi16(lo[g], _mm256_maddubs_epi16(l, xl));
                    hi[g] = _mm256_add_epi16(hi[g], _mm256_maddubs_epi16(h, xh));
                }
            }
            let (pl, ph): (__m256i, __m256i) = (
                bytemuck::cast(picks[2 * k]),
                bytemuck::cast(picks[2 * k + 1]),
            );
            for g in 0..2 {
                let s_lo = _mm256_shuffle_epi8(scv[g], pl);
                let s_hi = _mm256_shuffle_epi8(scv[g], ph);
                let both = _mm256_add_epi32(
                    _mm256_madd_epi16(lo[g], s_lo),
                    _mm256_madd_epi16(hi[g], s_hi),
                );
                isum[g] = _mm256_add_epi32(isum[g], both);
            }
        }
        // Row r's two lanes summed, rows in order.
        let isums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(isum[0], isum[1]), order);
        let dx = _mm256_set1_ps(xb.d);
        let dd = _mm256_mul_ps(d, dx);
        acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isums), acc);
        let dm = _mm256_mul_ps(dmin, dx);
        acc_min = _mm256_sub_ps(acc_min, _mm256_mul_ps(dm, _mm256_cvtepi32_ps(msums)));
    }
    bytemuck::cast(_mm256_add_ps(acc, acc_min))
}

/// Eight packed rows' heads decoded together, each lane a row (rows in
/// order), for [`k4_packed8`].
struct PackedHeads {
    /// Rows 0-3 and 4-7, a row's eight 6-bit scales per 64-bit lane.
    scales: [__m256i; 2],
    /// Each row's `d` and `dmin`, widened exactly.
    d: __m256,
    dmin: __m256,
    /// Each row's `mins . bsums` (each min times its two 16-value sums),
    /// exactly.
    msums: __m256i,
}

/// The heads of eight packed rows (`heads[r]`: row `r`'s `d`, `dmin` and
/// 12 scale bytes) decoded in vector registers, all rows at once: the
/// four 32-bit words of each head transposed so that word `i` of every
/// row is one register, then [`k4_head_gpr`]'s shifts and masks on all
/// eight rows together, and the mins' products with `bsums` made with
/// `vpmaddwd` on pairs of mins, as exact as each row's own (every product
/// and sum of at most `8 * 2 * 63 * 32768` in magnitude is an exact
/// `i32`). Row by row, with the compiler gathering the rows' words into
/// vectors, the block loop's work outside its sub-blocks took 292
/// instructions; with this, 133 (`llvm-mca -mcpu=znver3`: 57 cycles to
/// 32, beside the sub-blocks' 73).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn packed_heads(heads: &[[u8; 16]; 8], bsums: &[i16; 16]) -> PackedHeads {
    let h: [__m256i; 4] = bytemuck::cast(*heads);
    // Rows 0 and 1 in h[0], 2 and 3 in h[1], ...: interleaving dwords,
    // then qwords, leaves word i of rows 0, 2, 4, 6 | 1, 3, 5, 7.
    let ab_lo = _mm256_unpacklo_epi32(h[0], h[1]);
    let ab_hi = _mm256_unpackhi_epi32(h[0], h[1]);
    let cd_lo = _mm256_unpacklo_epi32(h[2], h[3]);
    let cd_hi = _mm256_unpackhi_epi32(h[2], h[3]);
    let in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let word = |v: __m256i| _mm256_permutevar8x32_epi32(v, in_order);
    let w0 = word(_mm256_unpacklo_epi64(ab_lo, cd_lo));
    let w1 = word(_mm256_unpackhi_epi64(ab_lo, cd_lo));
    let w2 = word(_mm256_unpacklo_epi64(ab_hi, cd_hi));
    let w3 = word(_mm256_unpackhi_epi64(ab_hi, cd_hi));
    // `d` (the low halves of w0) then `dmin` (the high halves), four rows
    // per 128-bit lane, then all eight `d` below all eight `dmin`.
    let halves = _mm256_shuffle_epi8(
        w0,
        _mm256_setr_epi8(
            0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, //
            0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
        ),
    );
    let halves = _mm256_permute4x64_epi64::<0b11_01_10_00>(halves);
    let d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
    let dmin = _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(halves));
    // As `k4_head_gpr`: scales 0-3 and mins 0-3 the low six bits of w1
    // and w2; scales 4-7 w3's low nibbles below the top two bits of w1's
    // bytes, mins 4-7 its high nibbles below those of w2's.
    let low6 = _mm256_set1_epi32(0x3f3f_3f3f);
    let nib = _mm256_set1_epi32(0x0f0f_0f0f);
    let top = _mm256_set1_epi32(0x3030_3030);
    let s_lo = _mm256_and_si256(w1, low6);
    let s_hi = _mm256_or_si256(
        _mm256_and_si256(w3, nib),
        _mm256_and_si256(_mm256_srli_epi32::<2>(w1), top),
    );
    let m_lo = _mm256_and_si256(w2, low6);
    let m_hi = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32::<4>(w3), nib),
        _mm256_and_si256(_mm256_srli_epi32::<2>(w2), top),
    );
    // Each row's eight scale bytes in a 64-bit lane: rows 0, 1 | 4, 5 and
    // 2, 3 | 6, 7 interleaved, then the halves regrouped.
    let s01 = _mm256_unpacklo_epi32(s_lo, s_hi);
    let s23 = _mm256_unpackhi_epi32(s_lo, s_hi);
    let scales = [
        _mm256_permute2x128_si256::<0x20>(s01, s23),
        _mm256_permute2x128_si256::<0x31>(s01, s23),
    ];
    // Mins `4h + 0` and `4h + 2` (then `4h + 1` and `4h + 3`) of each row
    // as an `i16` pair, against the pairs of sums they multiply:
    // `pairs` dword `4h + t` is `(bsums[8h + t], bsums[8h + 4 + t])`.
    let bs: __m256i = bytemuck::cast(*bsums);
    let pairs = _mm256_unpacklo_epi16(bs, _mm256_bsrli_epi128::<8>(bs));
    let pair = |i: i32| _mm256_permutevar8x32_epi32(pairs, _mm256_set1_epi32(i));
    let even = _mm256_set1_epi32(0x00ff_00ff);
    let mut msums = _mm256_setzero_si256();
    for (h, m) in [m_lo, m_hi].into_iter().enumerate() {
        let (e, o) = (_mm256_and_si256(m, even), _mm256_srli_epi16::<8>(m));
        let base = 4 * h as i32;
        let terms = [(e, 0), (e, 1), (o, 2), (o, 3)];
        for (v, t) in terms {
            msums = _mm256_add_epi32(msums, _mm256_madd_epi16(v, pair(base + t)));
        }
    }
    PackedHeads {
        scales,
        d,
        dmin,
        msums,
    }
}

/// The mins of a Q4_K/Q5_K block (bytes 8-15 of the decoded scales and
/// mins), min `j` twice in `i16` lanes, for the two 16-value activation
/// sums it covers.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn k4_mins(v: __m128i) -> __m256i {
    let ctl = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, ctl))
}

/// Sum of eight `i32` lanes (wrapping; callers stay far from overflow).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// The sums of the eight `i32` lanes of `a` and of `b`, exactly
/// (wrapping; callers stay far from overflow).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum2_epi32(a: __m256i, b: __m256i) -> (i32, i32) {
    // Lanes: a01 a23 b01 b23 | a45 a67 b45 b67.
    let h = _mm256_hadd_epi32(a, b);
    let s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
    // s: a0..3+a4..7 split as two, b as two; one more pairwise add.
    let s = _mm_hadd_epi32(s, s);
    (_mm_cvtsi128_si32(s), _mm_extract_epi32::<1>(s))
}

/// The sums of the eight `i32` lanes of each of four vectors, exactly
/// (wrapping; callers stay far from overflow), as one vector.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum4_epi32(v: [__m256i; 4]) -> __m128i {
    let s = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s))
}

/// `out.extend(row.iter().map(f))`: a GEMM's unpacking of a weight row
/// (`f` one of `quant::kgroup`'s constructors, inlined here) compiled with
/// this instruction set, so its byte loops vectorize at this width. The
/// same levels as the portable build's: the same code.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn unpack_row<B, L>(row: &[B], out: &mut Vec<L>, f: impl Fn(&B) -> L) {
    // A plain loop, not `extend`: the iterator's own fold was compiled on
    // its own, for the baseline instruction set.
    out.reserve(row.len());
    for b in row {
        out.push(f(b));
    }
}

/// `out[i] = quantize_block_q8_k(&x[i])`, byte for byte, eight values to
/// a register: the operations of `avx512vnni::quantize_q8_k` at 256 bits
/// (the magnitudes as the value with its sign bit cleared, the levels
/// packed to bytes by two saturating packs, which keep every level in
/// `-128..=127` as the portable `as i8` does, and each run of sixteen's
/// sum from two registers).
///
/// # Panics
///
/// If `x.len() != out.len()`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn quantize_q8_k(x: &[[f32; crate::quant::QK_K]], out: &mut [BlockQ8K]) {
    assert_eq!(x.len(), out.len(), "quantize_q8_k: block counts differ");
    for (o, c) in out.iter_mut().zip(x) {
        quantize_block_q8_k(c, o);
    }
}

/// One block of [`quantize_q8_k`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn quantize_block_q8_k(x: &[f32; crate::quant::QK_K], out: &mut BlockQ8K) {
    let (c8, _) = x.as_chunks::<8>();
    let v: [__m256; 32] = core::array::from_fn(|i| bytemuck::cast(c8[i]));
    let sign = _mm256_set1_ps(-0.0);
    let abs = |vi: __m256| _mm256_andnot_ps(sign, vi);
    let mut lanes = _mm256_setzero_ps();
    for &vi in &v {
        lanes = _mm256_max_ps(abs(vi), lanes);
    }
    // No lane is NaN (nor -0.0), so the lanes' largest is the portable
    // fold's whatever the order.
    let half_max = _mm_max_ps(
        _mm256_castps256_ps128(lanes),
        _mm256_extractf128_ps::<1>(lanes),
    );
    let quarter = _mm_max_ps(half_max, _mm_movehl_ps(half_max, half_max));
    let amax = _mm_cvtss_f32(_mm_max_ss(quarter, _mm_movehdup_ps(quarter)));
    if amax == 0.0 {
        *out = bytemuck::Zeroable::zeroed();
        return;
    }
    let target = _mm256_set1_ps(amax);
    let mut max = amax;
    for (&vi, c) in v.iter().zip(c8) {
        let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(abs(vi), target));
        if hit != 0 {
            max = c[hit.trailing_zeros() as usize];
            break;
        }
    }
    let iscale = -127.0 / max;
    let scale = _mm256_set1_ps(iscale);
    let magic = _mm256_set1_ps(12_582_912.0);
    let mantissa = _mm256_set1_epi32(0x007f_ffff);
    let half = _mm256_set1_epi32(0x0040_0000);
    let top = _mm256_set1_epi32(127);
    let level = |vi: __m256| {
        let shifted = _mm256_add_ps(_mm256_mul_ps(scale, vi), magic);
        let n = _mm256_sub_epi32(
            _mm256_and_si256(_mm256_castps_si256(shifted), mantissa),
            half,
        );
        _mm256_min_epi32(n, top)
    };
    let (qs, _) = out.qs.as_chunks_mut::<32>();
    for (j, q) in qs.iter_mut().enumerate() {
        // Thirty-two levels, each in `-127..=127` or, for a block whose
        // scale overflowed, any `i32` the portable code would wrap: the
        // portable `as i8` keeps the low byte, so the packs (which
        // saturate) are only taken where every level fits, and the
        // levels go through the portable byte loop otherwise.
        let n = [
            level(v[4 * j]),
            level(v[4 * j + 1]),
            level(v[4 * j + 2]),
            level(v[4 * j + 3]),
        ];
        let low = _mm256_set1_epi32(-128);
        let fits = n
            .iter()
            .all(|&ni| _mm256_movemask_epi8(_mm256_cmpgt_epi32(low, ni)) == 0);
        if fits {
            // `packs` interleaves the 128-bit lanes: words of
            // (n0 lo, n1 lo, n0 hi, n1 hi), then bytes of (a lo, b lo, a hi,
            // b hi); one permute puts the four eights back in order.
            let a = _mm256_packs_epi32(n[0], n[1]);
            let b = _mm256_packs_epi32(n[2], n[3]);
            let bytes = _mm256_packs_epi16(a, b);
            let ordered =
                _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            *q = bytemuck::cast(ordered);
        } else {
            let words: [[i32; 8]; 4] = n.map(bytemuck::cast);
            for (qi, &w) in q.iter_mut().zip(words.as_flattened()) {
                *qi = w as i8;
            }
        }
    }
    for (s, run) in out.bsums.iter_mut().zip(out.qs.as_chunks::<16>().0) {
        // Sixteen levels: two registers of eight widened, added, summed.
        let bytes: __m128i = bytemuck::cast(*run);
        let lo = _mm256_cvtepi8_epi32(bytes);
        let hi = _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(bytes, bytes));
        *s = hsum_epi32(_mm256_add_epi32(lo, hi)) as i16;
    }
    out.d = 1.0 / iscale;
}

// Prefill: the K-quant GEMM (and, last in this file, the Q8_0/Q4_0 GEMM)
// over interleaved activation groups (`quant::kgroup`) at 256 bits. A
// group's 64-byte step holds eight activation rows' eight values; a 256-bit
// register takes four rows (`h = 0`: rows 0-3, `h = 1`: rows 4-7), so each
// step of the AVX-512 kernel (`avx512vnni::gemm_k4_4x8`) is two here, with
// the same integers: the weight row's eight levels broadcast to each 64-bit
// slot, one `vpmaddubsw` into `i16` pairs, a sub-block's steps added in
// `i16`, one `vpmaddwd` by its scale. Where the row-at-a-time kernels
// (`dot_k_x8`) sum every (weight row, activation row) pair's lanes
// horizontally once a block and run its float part one scalar at a time,
// here a block ends with every pair's integer in its own lane.

/// The sums of `i32` lane pairs of `lo` (activation rows 0-3, two lanes
/// each) and `hi` (rows 4-7), as eight lanes in row order: exactly the
/// AVX-512 kernels' `pair_sums` of the two halves side by side.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pair_sums8(lo: __m256i, hi: __m256i) -> __m256i {
    // Rows 0, 1, 4, 5 | 2, 3, 6, 7; the 64-bit words back in order.
    _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(lo, hi))
}

/// Half `h` (rows `4h..4h + 4`) of a group's step of values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn half(v: &[i8; 64], h: usize) -> __m256i {
    bytemuck::cast(v.as_chunks::<32>().0[h])
}

/// Half `h` (rows `4h..4h + 4`) of a group's activation sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn half_sums(v: &[i16; 32], h: usize) -> __m256i {
    bytemuck::cast(v.as_chunks::<16>().0[h])
}

/// Broadcast of eight weight levels to each 64-bit slot.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn levels8(q: &[u8; 8]) -> __m256i {
    _mm256_set1_epi64x(i64::from_le_bytes(*q))
}

/// The scaled integer sums of one block of four weight rows (`q[r]`, the
/// 256 levels in weight order; `sc[r][j]`, the scale of the `j`-th of
/// `RUNS` runs of eight-value steps, in both halves of an `i32`) against group
/// `g`'s eight activation rows: `isum[h][r]`, lanes `2a`, `2a + 1` of
/// activation row `4h + a`. Each run's steps are added in `i16` before
/// its one `vpmaddwd` by the scale, as the AVX-512 kernels do (the
/// callers bound the run's sum).
///
/// Each weight row's broadcast levels meet both halves of the step (rows
/// 0-3 and 4-7) before the next row's are loaded: one broadcast for two
/// `vpmaddubsw` instead of one, the run's sums of both halves in eight
/// registers. On an AMD EPYC (Zen 4) VM with the AVX2 kernels
/// (`INFERNO_KERNEL=avx2 inferno bench --backends simd --threads 1
/// --prompt-tokens 128`, five alternated runs), the median 128-token
/// prefill went from 173 to 182 tok/s (Q4_K_M), 168 to 178 (Q5_K_M) and
/// 109 to 122 (Q6_K) against the halves taken one after the other.
// `s` indexes the activation steps and four weight rows alike.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_sums<const RUNS: usize>(
    q: [&[u8; QK_K]; 4],
    sc: [&[i32; RUNS]; 4],
    g: &Q8KGroup,
) -> [[__m256i; 4]; 2] {
    // Arrays of known length, not slices: with slices every index was
    // checked in the loop (twenty compares and branches per eight
    // `vpmaddubsw`, which bounded the loop on an AMD Zen 3 core).
    let steps = QK_K / 8 / RUNS;
    let q8: [&[[u8; 8]; QK_K / 8]; 4] = q.map(bytemuck::cast_ref);
    let mut isum = [[_mm256_setzero_si256(); 4]; 2];
    for j in 0..RUNS {
        let mut t = [[_mm256_setzero_si256(); 4]; 2];
        for s in steps * j..steps * j + steps {
            let x0 = half(&g.qs[s], 0);
            let x1 = half(&g.qs[s], 1);
            for r in 0..4 {
                let w = levels8(&q8[r][s]);
                t[0][r] = _mm256_add_epi16(t[0][r], _mm256_maddubs_epi16(w, x0));
                t[1][r] = _mm256_add_epi16(t[1][r], _mm256_maddubs_epi16(w, x1));
            }
        }
        for h in 0..2 {
            for r in 0..4 {
                let scale = _mm256_set1_epi32(sc[r][j]);
                isum[h][r] = _mm256_add_epi32(isum[h][r], _mm256_madd_epi16(t[h][r], scale));
            }
        }
    }
    isum
}

/// `gemm_k4_reference(w, x)` (`quant::kgroup`), bit for bit (NaN payloads
/// aside): four Q4_K or Q5_K weight rows, unpacked, against the eight
/// activation rows of `x`, as the AVX-512 kernel computes it (see the
/// section's comment): per sub-block, four steps of `vpmaddubsw` (pairs at
/// most `2 * 31 * 128`) added in `i16` (at most `4 * 7936`), one
/// `vpmaddwd` by the scale; each block's lane pairs summed into one exact
/// integer per (weight row, activation row), the mins' term likewise, and
/// the f32 part the reference's, lane by lane.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
// `s` indexes the activation steps and four weight rows alike.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_k4_4x8(w: [&[K4Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut acc_min = [_mm256_setzero_ps(); 4];
    for (b, g) in x.iter().enumerate() {
        let wb = [&w[0][b], &w[1][b], &w[2][b], &w[3][b]];
        let isum = scaled_sums::<8>(wb.map(|l| &l.q), wb.map(|l| &l.sc), g);
        let dx: __m256 = bytemuck::cast(g.d);
        for r in 0..4 {
            let mins: [i64; 2] = bytemuck::cast(wb[r].mins);
            let m = [0, 1].map(|h| {
                _mm256_add_epi32(
                    _mm256_madd_epi16(half_sums(&g.bs32[0], h), _mm256_set1_epi64x(mins[0])),
                    _mm256_madd_epi16(half_sums(&g.bs32[1], h), _mm256_set1_epi64x(mins[1])),
                )
            });
            let d = _mm256_mul_ps(_mm256_set1_ps(wb[r].d), dx);
            let ints = _mm256_cvtepi32_ps(pair_sums8(isum[0][r], isum[1][r]));
            acc[r] = _mm256_fmadd_ps(d, ints, acc[r]);
            let dmin = _mm256_mul_ps(_mm256_set1_ps(wb[r].dmin), dx);
            let mins = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(pair_sums8(m[0], m[1])));
            acc_min[r] = _mm256_sub_ps(acc_min[r], mins);
        }
    }
    core::array::from_fn(|r| bytemuck::cast(_mm256_add_ps(acc[r], acc_min[r])))
}

/// `gemm_q6_reference(w, x)` (`quant::kgroup`), bit for bit (NaN payloads
/// aside): [`gemm_k4_4x8`]'s shape for Q6_K, as the AVX-512 kernel: a
/// 16-weight sub-block's two steps added in `i16` (levels `0..=63`: at
/// most `2 * 2 * 63 * 128`), its signed scale widening them, and the
/// levels' offset of 32 taken off as `32 * sum_j scale_j * sum_j(x)` from
/// the activation's 16-value sums.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
// `s` indexes the activation steps and four weight rows alike.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn gemm_q6_4x8(w: [&[Q6Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    for (b, g) in x.iter().enumerate() {
        let wb = [&w[0][b], &w[1][b], &w[2][b], &w[3][b]];
        let isum = scaled_sums::<16>(wb.map(|l| &l.q), wb.map(|l| &l.sc), g);
        let dx: __m256 = bytemuck::cast(g.d);
        for r in 0..4 {
            let sc: [i64; 4] = bytemuck::cast(wb[r].sc16);
            // A loop, not `[0, 1].map`: the closure was compiled apart,
            // without the target features, and called (a tenth of a Q6_K
            // prefill's time on one thread).
            let mut total = [_mm256_setzero_si256(); 2];
            for (h, th) in total.iter_mut().enumerate() {
                let mut off = _mm256_setzero_si256();
                for (t, &s) in sc.iter().enumerate() {
                    let p = _mm256_madd_epi16(half_sums(&g.bs16[t], h), _mm256_set1_epi64x(s));
                    off = _mm256_add_epi32(off, p);
                }
                *th = _mm256_sub_epi32(isum[h][r], _mm256_slli_epi32::<5>(off));
            }
            let d = _mm256_mul_ps(_mm256_set1_ps(wb[r].d), dx);
            let ints = _mm256_cvtepi32_ps(pair_sums8(total[0], total[1]));
            acc[r] = _mm256_fmadd_ps(d, ints, acc[r]);
        }
    }
    core::array::from_fn(|r| bytemuck::cast(acc[r]))
}
