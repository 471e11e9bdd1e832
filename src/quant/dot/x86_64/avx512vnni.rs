//! AVX-512 VNNI kernels (256-bit `vpdpbusd` from AVX512-VL).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes and adds each group of
//! four products into an `i32` lane, without saturation. The weight bytes
//! are made unsigned by flipping their top bit (`w + 128`), which adds
//! `128 * (x[4j] + .. + x[4j+3])` to lane `j`; the accumulator starts at
//! the activation's precomputed `-128 * (x[4j] + .. + x[4j+3])`, so every
//! lane is the exact integer sum of its four products, for any weight
//! byte including -128. The f32 part is `x86_64::q8_kernels!`' lane-wise
//! FMAs, which AVX-VNNI runs too, so the two VNNI kernels return the same
//! bits; AVX2 sums each block to one integer first (`avx2_q8`) and rounds
//! otherwise.
//!
//! The single-row kernels stay 256 bits wide: a Q8_0 block holds 32 bytes,
//! and pairing two blocks of a decode activation in one 512-bit register
//! costs inserts for the values, the lane sums and the scales, which
//! measured no faster than two 256-bit blocks on an Intel Xeon. The prefill
//! matmul, where an activation row meets every weight row, gets its rows
//! already paired ([`PairBlock`], built once per batch) and runs
//! [`dot_q8_x4_pairs`] at 512 bits, with the same bits.
//!
//! A prefill's batch rows come eight at a time in interleaved groups
//! (`quant::kgroup`): each 64-bit slot of a register holds one batch row's
//! eight columns, the weight's eight bytes are broadcast to all of them,
//! and one `vpdpbusd` (Q8_0, Q4_K, Q5_K) or `vpmaddubsw` (Q6_K) serves
//! eight rows. [`gemm_b32_2x8`] (Q8_0), [`gemm_k4_4x8`] and
//! [`gemm_q6_4x8`] keep each row's integers and float operations those of
//! its single-row kernel, so they return its bits; the rows left over
//! (fewer than eight) take the pair and four-row kernels. Q4_0, whose
//! dots here round as AVX2's (one exact sum per block), turns the
//! picture around: [`gemm_q4_0_rows16`] puts sixteen weight rows in a
//! register's lanes and broadcasts the activation, so a block's sums come
//! out one per lane with nothing to reduce, for any number of batch rows.
//!
//! Decode has one activation row, so for Q4_K and Q5_K the eight slots
//! hold eight weight rows instead ([`dot_q4_k_rows8`]): a block's scale
//! decoding and its per-row integer sums are done once for the eight rows,
//! and each row's result is still its single-row kernel's bits.

use core::arch::x86_64::*;

use half::f16;

use crate::quant::activation::{ActBlock, NibbleGroup, PairBlock};
use crate::quant::block::BlockQ8_0;
use crate::quant::kgroup::{
    B32Levels, K4Levels, K4Rows16, Q4_0Act, Q4_0Rows16, Q6Levels, Q6Rows16, Q8Group, Q8KAct,
    Q8KGroup, GROUP_ROWS, ROWS16,
};
use crate::quant::packed::{BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8};
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

// The K-quant kernels at 512 bits: one register holds two 32-weight steps
// of a block (a Q4_K/Q5_K sub-block pair, two Q6_K steps), so a block
// takes four `vpmaddubsw` and four `vpmaddwd` instead of eight of each.
// The 16 lanes fold to 8 by adding the halves: lane `m` of each half holds
// the products of bytes `4m..4m + 4` of its step, as at 256 bits, and
// integer addition is exact, so the folded lanes are the 256-bit kernels'
// lanes and `k_kernels!` (the f32 part) returns the AVX2 kernels' bits.

/// The weight side of a Q4_K or Q5_K block at 512 bits.
struct K4Prep {
    /// Levels of sub-blocks `2k` (low half) and `2k + 1` (high half).
    q: [__m512i; 4],
    /// Their 6-bit scales, each in its half's 32 `i16` lanes.
    sc: [__m512i; 4],
    /// The mins, each repeated for the two 16-value sums it covers.
    mins: __m256i,
    /// The block's scale and min scale, widened.
    d: f32,
    dmin: f32,
}

/// The scale registers of a Q4_K/Q5_K block's four sub-block pairs and its
/// mins, from the decoded scales and mins (`avx2::k4_head`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_scales(v: __m128i) -> ([__m512i; 4], __m256i) {
    let wide = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(v));
    let sc = core::array::from_fn(|k| {
        let idx = _mm512_inserti64x4::<1>(
            _mm512_set1_epi16(2 * k as i16),
            _mm256_set1_epi16(2 * k as i16 + 1),
        );
        _mm512_permutexvar_epi16(idx, wide)
    });
    (sc, super::avx2::k4_mins(v))
}

/// Each 64-byte register of a Q4_K block's nibbles broadcast from 32 bytes
/// and shifted by 0 in its low half and 4 in its high half: the levels of a
/// sub-block pair after `& 0x0f`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn nibble_pairs(qs: &[u8; 128]) -> [__m512i; 4] {
    let low4 = _mm512_set1_epi8(0x0f);
    let shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(4));
    let (qs, _) = qs.as_chunks::<32>();
    core::array::from_fn(|k| {
        let bits: __m256i = bytemuck::cast(qs[k]);
        let both = _mm512_broadcast_i64x4(bits);
        _mm512_and_si512(_mm512_srlv_epi16(both, shift), low4)
    })
}

/// [`K4Prep`] of a Q4_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q4_k_prep(wb: &BlockQ4K) -> K4Prep {
    let head = bytemuck::cast_ref::<_, [[u8; 16]; 9]>(wb)[0]; // 144 bytes
    let (v, d, dmin) = super::avx2::k4_head(head);
    let (sc, mins) = k4_scales(v);
    K4Prep {
        q: nibble_pairs(&wb.qs),
        sc,
        mins,
        d,
        dmin,
    }
}

/// [`K4Prep`] of a Q5_K block: the Q4_K nibbles with each sub-block's
/// fifth bits (bit `j` of each `qh` byte for sub-block `j`) added as 16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q5_k_prep(wb: &BlockQ5K) -> K4Prep {
    let one = _mm512_set1_epi8(1);
    let head = bytemuck::cast_ref::<_, [[u8; 16]; 11]>(wb)[0]; // 176 bytes
    let (v, d, dmin) = super::avx2::k4_head(head);
    let (sc, mins) = k4_scales(v);
    let hb = _mm512_broadcast_i64x4(bytemuck::cast(wb.qh));
    let mut q = nibble_pairs(&wb.qs);
    for (k, qk) in q.iter_mut().enumerate() {
        // Bits `2k` (low half) and `2k + 1` (high half) of each byte: the
        // shift moves 16-bit lanes, but the mask keeps each byte's own bit.
        let shift = _mm512_inserti64x4::<1>(
            _mm512_set1_epi16(2 * k as i16),
            _mm256_set1_epi16(2 * k as i16 + 1),
        );
        let bit = _mm512_and_si512(_mm512_srlv_epi16(hb, shift), one);
        *qk = _mm512_or_si512(*qk, _mm512_slli_epi16::<4>(bit));
    }
    K4Prep {
        q,
        sc,
        mins,
        d,
        dmin,
    }
}

/// `m[0] + m[1] + m[2] + m[3]` as a tree. (The products go through
/// `vpmaddwd` and this sum rather than a `vpdpwssd` chain: for a generic
/// x86-64 target LLVM splits `vpdpwssd` into `vpmaddwd` and `vpaddd`
/// anyway, and a chain started from zero then adds the zero too.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn sum4(m: [__m512i; 4]) -> __m512i {
    _mm512_add_epi32(_mm512_add_epi32(m[0], m[1]), _mm512_add_epi32(m[2], m[3]))
}

/// The 16 lanes of a block folded to the 256-bit kernels' 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn fold(s: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64::<1>(s))
}

/// The integer lanes of a Q4_K/Q5_K block against an activation block
/// (see `k_prep_256!`'s `k4_lanes`): the activation's 64-byte registers
/// hold the same sub-block pairs as the levels.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_lanes(p: &K4Prep, xb: &BlockQ8K) -> __m256i {
    let (q8, _) = xb.qs.as_chunks::<64>();
    let mut m = [_mm512_setzero_si512(); 4];
    for k in 0..4 {
        let xv: __m512i = bytemuck::cast(q8[k]);
        m[k] = _mm512_madd_epi16(_mm512_maddubs_epi16(p.q[k], xv), p.sc[k]);
    }
    fold(sum4(m))
}

/// The weight side of a Q6_K block at 512 bits.
struct Q6Prep {
    /// Levels `0..=63` of steps `2k` (low half) and `2k + 1` (high half).
    q: [__m512i; 4],
    /// Their four scales (one per 16 weights) in `i16` lanes.
    sc: [__m512i; 4],
    /// The sixteen scales in order, in `i16` lanes (see `q6_lanes_summed`).
    sc16: __m256i,
    /// The block's scale, widened.
    d: f32,
}

/// [`Q6Prep`] of a block: per 128 weights, one 64-byte load of low nibbles
/// and a broadcast of 32 bytes of high bit pairs, shifted by a different
/// count in each half, rebuild two registers of levels.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_k_prep(wb: &BlockQ6K) -> Q6Prep {
    let q = q6_levels(wb);
    let sc16 = _mm256_cvtepi8_epi16(bytemuck::cast(wb.scales));
    let wide = _mm512_castsi256_si512(sc16);
    let sc = core::array::from_fn(|k| {
        // Lane `i` of pair `k` takes scale `4k + i / 8`.
        let idx = _mm512_add_epi16(
            _mm512_set1_epi16(4 * k as i16),
            _mm512_set_epi64(
                0x0003_0003_0003_0003,
                0x0003_0003_0003_0003,
                0x0002_0002_0002_0002,
                0x0002_0002_0002_0002,
                0x0001_0001_0001_0001,
                0x0001_0001_0001_0001,
                0,
                0,
            ),
        );
        _mm512_permutexvar_epi16(idx, wide)
    });
    Q6Prep {
        q,
        sc,
        sc16,
        d: super::avx2::f16_pair(wb.d, [0; 2]).0,
    }
}

/// A Q6_K block's levels plus 32 (`0..=63`) in weight order, 64 to a
/// register: per 128 weights, one 64-byte load of low nibbles and a
/// broadcast of 32 bytes of high bit pairs, shifted by a different count
/// in each half, rebuild two registers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_levels(wb: &BlockQ6K) -> [__m512i; 4] {
    let low4 = _mm512_set1_epi8(0x0f);
    let low2 = _mm512_set1_epi8(0x03);
    let halves =
        |lo: i16, hi: i16| _mm512_inserti64x4::<1>(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi));
    let (ql, _) = wb.ql.as_chunks::<64>();
    let (qh, _) = wb.qh.as_chunks::<32>();
    let mut q = [_mm512_setzero_si512(); 4];
    for h in 0..2 {
        let l: __m512i = bytemuck::cast(ql[h]);
        let hb = _mm512_broadcast_i64x4(bytemuck::cast(qh[h]));
        // Top bits `(qh >> 2i) & 3` moved to bits 4-5 of each byte.
        let top =
            |s: __m512i| _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(hb, s), low2));
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, low4), top(halves(0, 2)));
        q[2 * h + 1] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16::<4>(l), low4),
            top(halves(4, 6)),
        );
    }
    q
}

/// `v[r]`'s `i32` lane `i` becomes lane `r` of the result's `i`-th
/// register: the transpose of a 16 x 16 matrix of `i32` (unpack pairs,
/// then 64-bit pairs, then 128-bit lanes twice; 64 shuffles).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn transpose_dwords(v: [__m512i; 16]) -> [__m512i; 16] {
    // t[2p] lane L: (v[2p][4L], v[2p + 1][4L], v[2p][4L + 1], v[2p + 1][4L + 1]);
    // t[2p + 1]: the same of elements 4L + 2 and 4L + 3.
    let mut t = [_mm512_setzero_si512(); 16];
    for p in 0..8 {
        t[2 * p] = _mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]);
    }
    // u[4q + k] lane L: element 4L + k of rows 4q..4q + 4.
    let mut u = [_mm512_setzero_si512(); 16];
    for q in 0..4 {
        u[4 * q] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
    }
    // Element 4L + k of every row: lane L of u[k], u[4 + k], u[8 + k],
    // u[12 + k], in that order.
    let mut out = [_mm512_setzero_si512(); 16];
    for k in 0..4 {
        let a_lo = _mm512_shuffle_i32x4::<0b01_00_01_00>(u[k], u[4 + k]);
        let a_hi = _mm512_shuffle_i32x4::<0b11_10_11_10>(u[k], u[4 + k]);
        let b_lo = _mm512_shuffle_i32x4::<0b01_00_01_00>(u[8 + k], u[12 + k]);
        let b_hi = _mm512_shuffle_i32x4::<0b11_10_11_10>(u[8 + k], u[12 + k]);
        out[k] = _mm512_shuffle_i32x4::<0b10_00_10_00>(a_lo, b_lo);
        out[4 + k] = _mm512_shuffle_i32x4::<0b11_01_11_01>(a_lo, b_lo);
        out[8 + k] = _mm512_shuffle_i32x4::<0b10_00_10_00>(a_hi, b_hi);
        out[12 + k] = _mm512_shuffle_i32x4::<0b11_01_11_01>(a_hi, b_hi);
    }
    out
}

/// Fills `tile` (block `b` of each of the sixteen rows `rows[r]`, one per
/// lane) as `Q6Rows16::set_row` of every row and block would, byte for
/// byte: each row's levels rebuilt in registers ([`q6_levels`]), four
/// levels of each of sixteen rows side by side by a transpose of `i32`s
/// ([`transpose_dwords`]), the scales widened and transposed likewise. Per
/// block of sixteen rows 64 level registers and 320 shuffles, where a row
/// at a time scatters 1,024 four-byte words.
///
/// # Panics
///
/// If a row's block count differs from `tile.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn q6_tile_rows(tile: &mut [Q6Rows16], rows: [&[BlockQ6K]; ROWS16]) {
    for r in rows {
        assert_eq!(r.len(), tile.len(), "q6_tile_rows: block counts differ");
    }
    for (b, t) in tile.iter_mut().enumerate() {
        let levels: [[__m512i; 4]; ROWS16] = core::array::from_fn(|r| q6_levels(&rows[r][b]));
        for (c, steps) in t.q.chunks_exact_mut(ROWS16).enumerate() {
            let words = transpose_dwords(core::array::from_fn(|r| levels[r][c]));
            for (step, w) in steps.iter_mut().zip(words) {
                *step = bytemuck::cast(w);
            }
        }
        let scales = transpose_dwords(core::array::from_fn(|r| {
            _mm512_cvtepi8_epi32(bytemuck::cast(rows[r][b].scales))
        }));
        for (sc, s) in t.sc.iter_mut().zip(scales) {
            *sc = bytemuck::cast(s);
        }
        t.d = core::array::from_fn(|r| rows[r][b].d_f32());
    }
}

/// The integer lanes of a Q6_K block against an activation block (see
/// `k_prep_256!`'s `q6_lanes`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_lanes(p: &Q6Prep, xb: &BlockQ8K) -> __m256i {
    let m32 = _mm512_set1_epi8(32);
    let (q8, _) = xb.qs.as_chunks::<64>();
    let mut m = [_mm512_setzero_si512(); 4];
    for k in 0..4 {
        let xv: __m512i = bytemuck::cast(q8[k]);
        let pr = _mm512_sub_epi16(
            _mm512_maddubs_epi16(p.q[k], xv),
            _mm512_maddubs_epi16(m32, xv),
        );
        m[k] = _mm512_madd_epi16(pr, p.sc[k]);
    }
    fold(sum4(m))
}

/// Lanes that sum to what [`q6_lanes`]' lanes sum to when `xb.bsums` holds
/// the sums of its values (see `k_prep_256!`'s `q6_summed`): one
/// `vpmaddubsw` per two steps, the offset off once per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_lanes_summed(p: &Q6Prep, xb: &BlockQ8K) -> __m256i {
    let (q8, _) = xb.qs.as_chunks::<64>();
    let mut m = [_mm512_setzero_si512(); 4];
    for k in 0..4 {
        let xv: __m512i = bytemuck::cast(q8[k]);
        m[k] = _mm512_madd_epi16(_mm512_maddubs_epi16(p.q[k], xv), p.sc[k]);
    }
    let bsums: __m256i = bytemuck::cast(xb.bsums);
    let offset = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums, p.sc16));
    _mm256_sub_epi32(fold(sum4(m)), offset)
}

/// `(q6_lanes_summed(&p, xb), p.d)` with `p = q6_k_prep(wb)` (see
/// `k_prep_256!`'s `q6_summed`): with 32 registers the prep stays in them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_summed(wb: &BlockQ6K, xb: &BlockQ8K) -> (__m256i, f32) {
    let p = q6_k_prep(wb);
    (q6_lanes_summed(&p, xb), p.d)
}

/// `[k4_lanes(p, x[0]), ..]`: with 32 registers the whole prep stays in
/// them, so a row at a time.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_lanes_n<const N: usize>(p: &K4Prep, x: [&BlockQ8K; N]) -> [__m256i; N] {
    // A loop, not `x.map`: the closure would be compiled apart, without
    // the target features, and called per activation row.
    let mut lanes = [_mm256_setzero_si256(); N];
    for (l, xb) in lanes.iter_mut().zip(x) {
        *l = k4_lanes(p, xb);
    }
    lanes
}

/// `[q6_lanes(p, x[0]), ..]`, as [`k4_lanes_n`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q6_lanes_n<const N: usize>(p: &Q6Prep, x: [&BlockQ8K; N]) -> [__m256i; N] {
    let mut lanes = [_mm256_setzero_si256(); N];
    for (l, xb) in lanes.iter_mut().zip(x) {
        *l = q6_lanes(p, xb);
    }
    lanes
}

k_kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni");

/// The bandwidth probes' checksum of `bytes` (`scalar::sum_bytes`, see
/// `avx2::sum_bytes`) with 512-bit loads: each aligned step of four cache
/// lines, each line added as `u64` lanes into one of four accumulators
/// and, with `prefetch`, asked for [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD)
/// bytes early. One load and one add per line is what a plain C read loop
/// compiled for this CPU does; with 256-bit loads and no prefetch the
/// probe read 20-30% slower than such a loop on an Intel Xeon, and with a
/// byte sum per line (`vpsadbw`) 7-9% slower on an AMD Zen 4 core (27.2-27.6
/// GB/s against 29.6-30.4 for the word sum, one thread, huge pages).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn sum_bytes(bytes: &[u8], prefetch: bool) -> u64 {
    let (head, body, tail) = crate::quant::dot::scalar::split_lines(bytes);
    let body: &[[__m512i; 4]] = bytemuck::cast_slice(body);
    let mut acc = [_mm512_setzero_si512(); 4];
    for (k, lines) in body.iter().enumerate() {
        for (j, (a, &v)) in acc.iter_mut().zip(lines).enumerate() {
            if prefetch {
                let ahead = k * 256 + j * 64 + super::PREFETCH_AHEAD;
                crate::unsafe_core::prefetch::prefetch_read(body, ahead);
            }
            *a = _mm512_add_epi64(*a, v);
        }
    }
    let s = _mm512_add_epi64(
        _mm512_add_epi64(acc[0], acc[1]),
        _mm512_add_epi64(acc[2], acc[3]),
    );
    let lanes: [u64; 8] = bytemuck::cast(s);
    head.iter()
        .chain(tail)
        .map(|&b| u64::from(b))
        .chain(lanes)
        .fold(0, u64::wrapping_add)
}

/// `avx2::dot_f16_x2` at 512 bits, bit for bit: each `zmm` accumulator
/// holds two of the AVX2 kernel's (lanes `0..16` of a 32-value chunk, then
/// `16..32`), every lane takes the same fused multiply-adds in the same
/// order, and the four halves go to the AVX2 kernel's own end
/// (`avx2::finish_f16_x2`). Half the instructions per cached position of
/// decode and prefill attention.
///
/// # Panics
///
/// If either `x[i].len() != k.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_f16_x2(x: [&[f32]; 2], k: &[f16]) -> [f32; 2] {
    for xi in x {
        assert_eq!(xi.len(), k.len(), "dot_f16: lengths differ");
    }
    let (k32, k_rest) = k.as_chunks::<32>();
    let (a32, a_rest) = x[0].as_chunks::<32>();
    let (b32, b_rest) = x[1].as_chunks::<32>();
    let mut acc = [[_mm512_setzero_ps(); 2]; 2];
    for ((kc, ac), bc) in k32.iter().zip(a32).zip(b32) {
        let kv: [__m256i; 2] = bytemuck::cast(*kc);
        let av: [__m512; 2] = bytemuck::cast(*ac);
        let bv: [__m512; 2] = bytemuck::cast(*bc);
        for i in 0..2 {
            let w = _mm512_cvtph_ps(kv[i]);
            acc[0][i] = _mm512_fmadd_ps(av[i], w, acc[0][i]);
            acc[1][i] = _mm512_fmadd_ps(bv[i], w, acc[1][i]);
        }
    }
    let split = |a: [__m512; 2]| -> [__m256; 4] { bytemuck::cast(a) };
    super::avx2::finish_f16_x2([split(acc[0]), split(acc[1])], [a_rest, b_rest], k_rest)
}

/// Attention scores of two queries against `out[0].len()` consecutive
/// `f16` key rows of `q[0].len()` values each (`k` holds at least those
/// rows): `out[h][t] = dot(q[h], row t) * scale`.
///
/// Sixteen positions at a time. A row's dot ends in one 16-lane register
/// per query (two accumulators, over the first and the second sixteen
/// values of each chunk of 32, then added), and the sixteen positions'
/// registers are summed together by a transpose of adds: 15 adds and 30
/// shuffles for sixteen positions instead of a horizontal sum each, and
/// one multiply and one store for sixteen scores. Every position's lanes meet in the same tree whatever
/// its place in the block (a block short of sixteen is filled with zeros,
/// which no real position is added to), so a score depends on its row and
/// the query alone, not on where a part or a block starts. Its bits are
/// this kernel's own, not [`dot_f16_x2`]'s.
///
/// The row [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on
/// is asked for as each row is read.
///
/// # Panics
///
/// If the width is not a nonzero multiple of 32, the queries or the
/// outputs differ in length, or `k` holds fewer rows than asked for.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn scores_f16_x2(q: [&[f32]; 2], k: &[f16], scale: f32, out: [&mut [f32]; 2]) {
    scores_f16_n(q, k, scale, out);
}

/// [`scores_f16_x2`] of four queries (two tokens' two query heads of one
/// key/value head, in a prefill) against the same key rows: each query's
/// scores bit for bit what [`scores_f16_x2`] gives it, each key row read
/// and widened once for all four instead of once per pair. (The same
/// code, for four queries instead of two: a query's operations do not
/// depend on the others.)
///
/// # Panics
///
/// As [`scores_f16_x2`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn scores_f16_x4(q: [&[f32]; 4], k: &[f16], scale: f32, out: [&mut [f32]; 4]) {
    scores_f16_n(q, k, scale, out);
}

/// [`scores_f16_x2`] for `Q` queries.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn scores_f16_n<const Q: usize>(q: [&[f32]; Q], k: &[f16], scale: f32, mut out: [&mut [f32]; Q]) {
    let n = out[0].len();
    let q = super::avx2::score_chunks(q, k.len(), out.each_ref().map(|o| o.len()));
    let sc = _mm512_set1_ps(scale);
    let mut t = 0;
    if q[0].len() == HEAD128_CHUNKS && !super::general_scores() {
        t = scores128(q, k, sc, &mut out);
    }
    while t < n {
        let m = (n - t).min(16);
        let quad = |at| scores_quad(k, q, at, t + m);
        let (u0, u1) = (quad(t), quad(t + 4));
        let low: [__m512; Q] = core::array::from_fn(|h| fold_lanes(u0[h], u1[h]));
        let (u2, u3) = (quad(t + 8), quad(t + 12));
        for (h, o) in out.iter_mut().enumerate() {
            let s = fold_lanes(low[h], fold_lanes(u2[h], u3[h]));
            let vals: [f32; 16] = bytemuck::cast(_mm512_mul_ps(s, sc));
            o[t..t + m].copy_from_slice(&vals[..m]);
        }
        t += m;
    }
}

/// Chunks of 32 values in a 128-wide head, Qwen3's width.
const HEAD128_CHUNKS: usize = 4;

/// The whole groups of sixteen rows of [`scores_f16_n`] for 128-wide
/// heads, into `out`; returns the rows done. Each row's lanes and their
/// folds are [`scores_quad`]'s, operation for operation, so the same
/// bits; what differs is the code around them: the queries copied once
/// into registers' worth of stack the loop addresses from one base, the
/// rows as fixed-size arrays and the chunk loop unrolled, where the
/// general loop spent three times the FMAs' own time on bounds checks,
/// reloaded pointers and results passed through memory.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn scores128<const Q: usize>(
    q: [&[[f32; 32]]; Q],
    k: &[f16],
    sc: __m512,
    out: &mut [&mut [f32]; Q],
) -> usize {
    let n = out[0].len();
    let whole = n - n % 16;
    // Closures (`array::from_fn`, `map`) are avoided here: they do not
    // inherit the target features, so what they call does not inline.
    let mut qv = [[_mm512_setzero_ps(); 8]; Q];
    for (v, qh) in qv.iter_mut().zip(q) {
        for (pair, chunk) in v.chunks_exact_mut(2).zip(qh) {
            let halves: [__m512; 2] = bytemuck::cast(*chunk);
            pair.copy_from_slice(&halves);
        }
    }
    let (rows, _) = k[..whole * 128].as_chunks::<128>();
    for (g, group) in rows.chunks_exact(16).enumerate() {
        let u0 = quad128(&group[0..4], &qv);
        let u1 = quad128(&group[4..8], &qv);
        let mut low = [_mm512_setzero_ps(); Q];
        for h in 0..Q {
            low[h] = fold_lanes(u0[h], u1[h]);
        }
        let u2 = quad128(&group[8..12], &qv);
        let u3 = quad128(&group[12..16], &qv);
        for (h, o) in out.iter_mut().enumerate() {
            let s = fold_lanes(low[h], fold_lanes(u2[h], u3[h]));
            let vals: [f32; 16] = bytemuck::cast(_mm512_mul_ps(s, sc));
            o[16 * g..16 * g + 16].copy_from_slice(&vals);
        }
    }
    whole
}

/// Four 128-wide key rows folded as [`scores_quad`] folds them. Asks for
/// the rows [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn quad128<const Q: usize>(rows: &[[f16; 128]], q: &[[__m512; 8]; Q]) -> [__m512; Q] {
    super::kv_row_hint(rows, 0, 256, 4 * 256);
    // Four rows side by side for up to two queries; for more, two by two
    // (four rows of four queries would want more registers than there are).
    let r = if Q <= 2 {
        rows128::<Q, 4>(rows, q)
    } else {
        let [r0, r1] = rows128::<Q, 2>(rows, q);
        let [r2, r3] = rows128::<Q, 2>(&rows[2..], q);
        [r0, r1, r2, r3]
    };
    let mut u = [_mm512_setzero_ps(); Q];
    for h in 0..Q {
        u[h] = fold_quads(fold_pairs(r[0][h], r[1][h]), fold_pairs(r[2][h], r[3][h]));
    }
    u
}

/// [`row_dots`] of the first `R` 128-wide key rows of `rows` against
/// queries held as registers: per row, the same two accumulators per
/// query over the same chunks in the same order, then their sum. The
/// rows go side by side, so that each query chunk is loaded once for all
/// `R` of them: one row at a time, the queries (sixteen registers for
/// two heads) were reloaded for every row, and those loads, not the
/// memory, bounded the kernel on AMD Zen 4.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn rows128<const Q: usize, const R: usize>(
    rows: &[[f16; 128]],
    q: &[[__m512; 8]; Q],
) -> [[__m512; Q]; R] {
    let zero = _mm512_setzero_ps();
    let rows: &[[f16; 128]; R] = rows[..R].try_into().expect("R rows");
    let mut a = [[[zero; 2]; Q]; R];
    for j in 0..2 * HEAD128_CHUNKS {
        let mut w = [zero; R];
        for (wr, row) in w.iter_mut().zip(rows) {
            let (kv, _) = row.as_chunks::<16>();
            *wr = _mm512_cvtph_ps(bytemuck::cast(kv[j]));
        }
        for (h, qh) in q.iter().enumerate() {
            for (ar, &wr) in a.iter_mut().zip(&w) {
                ar[h][j % 2] = _mm512_fmadd_ps(qh[j], wr, ar[h][j % 2]);
            }
        }
    }
    let mut r = [[zero; Q]; R];
    for (rr, ar) in r.iter_mut().zip(a) {
        for (rh, ah) in rr.iter_mut().zip(ar) {
            *rh = _mm512_add_ps(ah[0], ah[1]);
        }
    }
    r
}

/// Positions `at..at + 4` of [`scores_f16_x2`] (those before `end`; the
/// rest count as zero) folded into one register per query: four
/// positions' partial sums to a 128-bit lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn scores_quad<const Q: usize>(
    k: &[f16],
    q: [&[[f32; 32]]; Q],
    at: usize,
    end: usize,
) -> [__m512; Q] {
    let zero = _mm512_setzero_ps();
    let mut r = [[zero; Q]; 4];
    for (i, ri) in r.iter_mut().enumerate() {
        if at + i < end {
            *ri = row_dots(k, q, at + i);
        }
    }
    core::array::from_fn(|h| fold_quads(fold_pairs(r[0][h], r[1][h]), fold_pairs(r[2][h], r[3][h])))
}

/// Key row `at` of `k` against every query: per query, the sixteen lane
/// sums (two accumulators, over the first and the second sixteen values
/// of each chunk of 32, then added), the row widened once for all of
/// them. Asks for the row
/// [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn row_dots<const Q: usize>(k: &[f16], q: [&[[f32; 32]]; Q], at: usize) -> [__m512; Q] {
    let hd = q[0].len() * 32;
    let (kc, _) = super::avx2::key_row(k, hd, at).as_chunks::<32>();
    let zero = _mm512_setzero_ps();
    let mut a = [[zero; 2]; Q];
    for (c, kc) in kc.iter().enumerate() {
        let kv: [__m256i; 2] = bytemuck::cast(*kc);
        for i in 0..2 {
            let w = _mm512_cvtph_ps(kv[i]);
            for (ah, qh) in a.iter_mut().zip(q) {
                let x: [__m512; 2] = bytemuck::cast(qh[c]);
                ah[i] = _mm512_fmadd_ps(x[i], w, ah[i]);
            }
        }
    }
    core::array::from_fn(|h| _mm512_add_ps(a[h][0], a[h][1]))
}

/// Two rows' registers folded into one: per 128-bit lane `[a0 + a2,
/// b0 + b2, a1 + a3, b1 + b3]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn fold_pairs(a: __m512, b: __m512) -> __m512 {
    _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b))
}

/// Two [`fold_pairs`] registers (rows `a, b` and `c, d`) folded into one:
/// per 128-bit lane, the four rows' sums over that lane, in row order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn fold_quads(ab: __m512, cd: __m512) -> __m512 {
    let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
    _mm512_add_ps(
        _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd)),
        _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd)),
    )
}

/// Two registers of per-lane sums folded across their 128-bit lanes:
/// `[u0 + u1, u2 + u3, w0 + w1, w2 + w3]` of lanes. Applied twice, four
/// [`fold_quads`] registers become sixteen rows' whole sums, in order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn fold_lanes(u: __m512, w: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_shuffle_f32x4::<0b10_00_10_00>(u, w),
        _mm512_shuffle_f32x4::<0b11_01_11_01>(u, w),
    )
}

/// The portable softmax (`model::ops::softmax`) compiled for AVX-512:
/// the same operations in the same order, so the same bits, with its
/// loops (the largest score, `exp`, the eight running sums, the scaling)
/// sixteen lanes wide instead of the baseline's four. A sixth of decode
/// attention's time went to the baseline build of it.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn softmax(x: &mut [f32]) -> (f32, f64) {
    crate::model::ops::softmax(x)
}

/// `model::ops::swiglu(gate, up)`, bit for bit: sixteen values at a time,
/// `exp_f64`'s operations on two registers of eight doubles (the table's
/// 32 entries held in four registers and picked by two `vpermt2q`), then
/// `x / (1 + e^-x) * u` in `f32`. Sixteen values any of whose `-x` lies
/// outside `exp_f64`'s range (`|x| >= 88`, NaN), and the last `len % 16`,
/// go through the portable loop, compiled here.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn swiglu(gate: &mut [f32], up: &[f32]) {
    use crate::model::ops::EXP_TABLE;
    let n = gate.len().min(up.len());
    let (g16, g_rest) = gate[..n].as_chunks_mut::<16>();
    let (u16s, u_rest) = up[..n].as_chunks::<16>();
    let table: [__m512i; 4] = bytemuck::cast(EXP_TABLE);
    let sign = _mm512_set1_epi32(i32::MIN);
    for (g, u) in g16.iter_mut().zip(u16s) {
        let x: __m512 = bytemuck::cast(*g);
        // `-x`, the sign bit flipped as `-` does.
        let neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign));
        let top = _mm512_and_si512(
            _mm512_srli_epi32::<20>(_mm512_castps_si512(neg)),
            _mm512_set1_epi32(0x7ff),
        );
        if _mm512_cmpge_epu32_mask(top, _mm512_set1_epi32(0x42b)) != 0 {
            crate::model::ops::swiglu(g, u);
            continue;
        }
        let halves: [__m256; 2] = bytemuck::cast(neg);
        let e: [__m256; 2] = [exp_f64x8(halves[0], &table), exp_f64x8(halves[1], &table)];
        let e: __m512 = bytemuck::cast(e);
        let s = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0), e));
        *g = bytemuck::cast(_mm512_mul_ps(s, bytemuck::cast(*u)));
    }
    crate::model::ops::swiglu(g_rest, u_rest);
}

/// `model::ops::exp_f64` of eight in-range values, lane by lane the same
/// operations: the same bits. `table` is `EXP_TABLE` in four registers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn exp_f64x8(x: __m256, table: &[__m512i; 4]) -> __m256 {
    use crate::model::ops::{EXP_INV_LN2_32, EXP_POLY, EXP_SHIFT};
    let xd = _mm512_cvtps_pd(x);
    let inv = _mm512_set1_pd(EXP_INV_LN2_32);
    let shift = _mm512_set1_pd(EXP_SHIFT);
    let kd = _mm512_add_pd(_mm512_mul_pd(inv, xd), shift);
    let ki = _mm512_castpd_si512(kd);
    let kd = _mm512_sub_pd(kd, shift);
    let r = _mm512_fmsub_pd(inv, xd, kd);
    // Entry `k % 32`: the low four bits pick among sixteen of two
    // registers, the fifth which pair.
    let low = _mm512_permutex2var_epi64(table[0], ki, table[1]);
    let high = _mm512_permutex2var_epi64(table[2], ki, table[3]);
    let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    let t = _mm512_mask_blend_epi64(upper, low, high);
    let s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64::<47>(ki)));
    let [c0, c1, c2] = EXP_POLY;
    let p = _mm512_fmadd_pd(_mm512_set1_pd(c0), r, _mm512_set1_pd(c1));
    let q = _mm512_fmadd_pd(_mm512_set1_pd(c2), r, _mm512_set1_pd(1.0));
    let y = _mm512_fmadd_pd(p, _mm512_mul_pd(r, r), q);
    _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
}

/// `model::ops::round_f16(x)`, the same values: sixteen at a time
/// (`vcvtps2ph` rounding to nearest even, then `vcvtph2ps`), the rest by
/// AVX2's.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn round_f16(x: &mut [f32]) {
    let (chunks, rest) = x.as_chunks_mut::<16>();
    for c in chunks {
        let h = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(bytemuck::cast(*c));
        *c = bytemuck::cast(_mm512_cvtph_ps(h));
    }
    super::avx2::round_f16(rest);
}

/// `sample::argmax_lanes` compiled for AVX-512: its sixteen lanes one
/// register.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn argmax(x: &[f32]) -> u32 {
    crate::sample::argmax_lanes(x)
}

/// `avx2::weighted_sum_f16_x2` at 512 bits, bit for bit (NaN payloads
/// aside: which of two NaN operands an add keeps is the compiler's
/// choice, as for every kernel here): every output lane
/// is still `acc + p * v` (a multiply, then an add) row after row from
/// zero, 128 values of each output per pass over the rows instead of 32
/// (sixteen registers of sums, 64 then 32 for what is left), so a head of
/// 128 takes one pass over its rows, not four: with two passes of 64 a
/// decode step's attention after a 511-token prompt took 5% longer on a
/// Zen 5 core. The values past the whole chunks of 32 go to the AVX2
/// kernel's own tail.
///
/// # Panics
///
/// If the outputs or the weights differ in length, or a row runs past the
/// end of `v`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn weighted_sum_f16_x2(out: [&mut [f32]; 2], ps: [&[f32]; 2], v: &[f16], stride: usize) {
    assert!(
        ps[1].len() == ps[0].len(),
        "weighted_sum_f16: shapes differ"
    );
    weighted_sum_n(out, ps, v, stride);
}

/// [`weighted_sum_f16_x2`] for four outputs (two tokens' two query heads
/// of one key/value head, in a prefill), each with its own weights, of
/// any lengths: `out[h] = sum_t ps[h][t] * row_t` over the first
/// `ps[h].len()` rows, bit for bit what `weighted_sum_f16` writes. Each
/// row is widened once for all the outputs that reach it.
///
/// # Panics
///
/// If the outputs differ in length, or a row runs past the end of `v`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn weighted_sum_f16_x4(out: [&mut [f32]; 4], ps: [&[f32]; 4], v: &[f16], stride: usize) {
    weighted_sum_n(out, ps, v, stride);
}

/// The weighted sums of `Q` outputs (two or four), output `h` over the
/// first `ps[h].len()` rows. The sums stay in sixteen registers: 128
/// values of each of two outputs per pass over the rows, 64 of four, then
/// 32 for what is left; the values past the whole chunks of 32 go to the
/// AVX2 kernel's own tail.
///
/// # Panics
///
/// If the outputs differ in length, or a row runs past the end of `v`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn weighted_sum_n<const Q: usize>(
    mut out: [&mut [f32]; Q],
    ps: [&[f32]; Q],
    v: &[f16],
    stride: usize,
) {
    let hd = out[0].len();
    assert!(
        out.iter().all(|o| o.len() == hd),
        "weighted_sum_f16: shapes differ"
    );
    let n = ps.iter().map(|p| p.len()).max().unwrap_or(0);
    super::avx2::check_rows(n, stride, hd, v.len());
    let mut at = 0;
    if Q <= 2 {
        while at + 128 <= hd {
            weighted_pass::<Q, 8>(&mut out, ps, v, stride, at);
            at += 128;
        }
    }
    while at + 64 <= hd {
        weighted_pass::<Q, 4>(&mut out, ps, v, stride, at);
        at += 64;
    }
    if at + 32 <= hd {
        weighted_pass::<Q, 2>(&mut out, ps, v, stride, at);
        at += 32;
    }
    let mut rest = out.into_iter().zip(ps);
    while let (Some((o0, p0)), Some((o1, p1))) = (rest.next(), rest.next()) {
        super::avx2::weighted_tail_f16_x2([o0, o1], [p0, p1], v, stride, at);
    }
}

/// One pass of the weighted sums over the rows: values `at..at + 16 * N`
/// of each of the `Q` outputs, output `h` over its first `ps[h].len()`
/// rows, prefetching the rows
/// [`KV_PREFETCH_ROWS`](crate::quant::dot::KV_PREFETCH_ROWS) on when it
/// is the first pass. Every lane is `acc + p * v` (a multiply, then an
/// add) row after row from zero, whatever `Q` and `N` are.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn weighted_pass<const Q: usize, const N: usize>(
    out: &mut [&mut [f32]; Q],
    ps: [&[f32]; Q],
    v: &[f16],
    stride: usize,
    at: usize,
) {
    let hd = out[0].len();
    let n = ps.iter().map(|p| p.len()).max().unwrap_or(0);
    let mut acc = [[_mm512_setzero_ps(); N]; Q];
    // The row `KV_PREFETCH_ROWS` on (a hint), except where the weights
    // are asked for in L2 (AMD Zen 4): there the hardware prefetchers
    // alone read a head's values faster than with the hints.
    let hint = at == 0 && !super::weights_to_l2();
    for t in 0..n {
        let row = t * stride + at;
        if hint {
            super::kv_row_hint(v, 2 * row, 2 * stride, 2 * hd);
        }
        let x: [__m512; N] = core::array::from_fn(|i| {
            let chunk: &[f16; 16] = v[row + 16 * i..row + 16 * i + 16]
                .try_into()
                .expect("16 values");
            _mm512_cvtph_ps(bytemuck::cast(*chunk))
        });
        for (ah, p) in acc.iter_mut().zip(ps) {
            if let Some(&w) = p.get(t) {
                let w = _mm512_set1_ps(w);
                for (a, &xi) in ah.iter_mut().zip(&x) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(w, xi));
                }
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc) {
        for (i, ai) in a.into_iter().enumerate() {
            let vals: [f32; 16] = bytemuck::cast(ai);
            o[at + 16 * i..at + 16 * i + 16].copy_from_slice(&vals);
        }
    }
}

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
    // Loops, not `array::from_fn`: its closure did not inline.
    let mut out = [0.0f32; 4];
    for (i, o) in out.iter_mut().enumerate() {
        let (mut even, odd) = halves(acc[i]);
        if let [wl] = w_rest {
            even = term_fma(even, prep(wl), super::avx2::scale8(wl), &x[i][w.len() - 1]);
        }
        *o = super::avx2::hsum(_mm256_add_ps(even, odd));
    }
    out
}

/// The low (even blocks) and high (odd blocks) halves of a paired
/// accumulator.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
fn halves(acc: __m512) -> (__m256, __m256) {
    let wide = _mm512_castps_pd(acc);
    (
        _mm256_castpd_ps(_mm512_castpd512_pd256(wide)),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(wide)),
    )
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
    let mut out = [[0.0f32; 4]; 2];
    for (r, row) in out.iter_mut().enumerate() {
        for (i, o) in row.iter_mut().enumerate() {
            let (mut even, odd) = halves(acc[r][i]);
            if let [wl] = rests[r] {
                even = term_fma(even, prep(wl), super::avx2::scale8(wl), &x[i][nb - 1]);
            }
            *o = super::avx2::hsum(_mm256_add_ps(even, odd));
        }
    }
    out
}

/// AVX2's Q4_0 decode row over the activation's groups of eight
/// ([`avx2_q8::dot_q4_0_groups`](super::avx2_q8::dot_q4_0_groups)), bit
/// for bit (a NaN from NaN or infinite scales may carry another sign or
/// payload), with one `vpdpbusd` per two blocks: the same exact block
/// sums and the same float operations ([`add_terms8`](super::avx2_q8::add_terms8)),
/// so a Q4_0 row gives AVX2's bits here too, and the prefill's GEMM
/// (`avx2_q8::gemm_q4_0_1x8`) gives decode's.
///
/// Per half `h` of a group, one `vpermt2w` gathers the nibbles of blocks
/// `2h`, `2h + 4`, `2h + 1`, `2h + 5` from two 64-byte windows of the
/// group's 144 bytes, in the order of the [`NibbleGroup`]'s 64 bytes of
/// their values `0..16` and of `16..32`; their low and high nibbles meet
/// those in two `vpdpbusd` into the same lanes, four per block. Two
/// `vpermt2d`, a shift and a `vpmovqd` reduce the two registers to the
/// eight block sums in block order, and one more `vpermt2w` gathers the
/// eight weight scales. Where the 512-bit paired kernel this replaces
/// spent a conversion, a scale widening, a multiply and an FMA on every
/// two blocks, this spends them once per eight.
///
/// # Panics
///
/// If `w.len() != x.len()` or `g.len() != x.len() / 8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q4_0_groups(w: &[BlockQ4_0], g: &[NibbleGroup], x: &[ActBlock]) -> f32 {
    assert_eq!(w.len(), x.len(), "dot: block counts differ");
    assert_eq!(
        g.len(),
        x.len() / 8,
        "dot_q4_0_groups: the groups do not match the blocks"
    );
    let (w8, w_rest) = w.as_chunks::<8>();
    let x_rest = &x[8 * w8.len()..];
    // Words of window `a` (from byte 36h of the group: blocks 2h and
    // 2h + 1, their nibbles words 1..9 and 10..18) and window `b` (from
    // byte 36h + 44: blocks 2h + 4 and 2h + 5, words 15..23 and 24..32,
    // indices 47..55 and 56..64). Every window lies inside the group.
    let gather = _mm512_set_epi16(
        63, 62, 61, 60, 59, 58, 57, 56, 17, 16, 15, 14, 13, 12, 11, 10, //
        54, 53, 52, 51, 50, 49, 48, 47, 8, 7, 6, 5, 4, 3, 2, 1,
    );
    // The eight f16 scales, from bytes 0..64 (words 0, 9, 18, 27) and
    // 64..128 (words 4, 13, 22, 31).
    let scales = _mm512_set_epi16(
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, 63, 54, 45, 36, 27, 18, 9, 0,
    );
    let low4 = _mm512_set1_epi8(0x0f);
    // Register `h` holds blocks 2h, 2h + 4, 2h + 1, 2h + 5, four lanes
    // each; `even[2i + j]` and `odd[2i + j]` pick lanes `2j` and `2j + 1`
    // of block `i`'s four (register 1's lanes are 16..32).
    let even = _mm512_set_epi32(30, 28, 22, 20, 14, 12, 6, 4, 26, 24, 18, 16, 10, 8, 2, 0);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    let mut acc = _mm_setzero_ps();
    for (wc, gc) in w8.iter().zip(g) {
        let bytes: &[u8; 144] = bytemuck::cast_ref(wc);
        let (xs, _) = gc.qs.as_chunks::<2>();
        let window = |at: usize| -> __m512i { bytemuck::pod_read_unaligned(&bytes[at..at + 64]) };
        let first = window(0);
        let lanes: [__m512i; 2] = core::array::from_fn(|h| {
            let a = if h == 0 { first } else { window(36) };
            let q = _mm512_permutex2var_epi16(a, gather, window(36 * h + 44));
            let lo = _mm512_and_si512(q, low4);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), low4);
            let s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, bytemuck::cast(xs[2 * h]));
            _mm512_dpbusd_epi32(s, hi, bytemuck::cast(xs[2 * h + 1]))
        });
        let u = _mm512_add_epi32(
            _mm512_permutex2var_epi32(lanes[0], even, lanes[1]),
            _mm512_permutex2var_epi32(lanes[0], odd, lanes[1]),
        );
        let sums = _mm512_cvtepi64_epi32(_mm512_add_epi32(u, _mm512_srli_epi64::<32>(u)));
        let isum = _mm256_add_epi32(sums, bytemuck::cast(gc.off));
        let d8 = _mm512_permutex2var_epi16(first, scales, window(64));
        let d_w = _mm256_cvtph_ps(_mm512_castsi512_si128(d8));
        acc = super::avx2_q8::add_terms8(acc, d_w, bytemuck::cast(gc.d), isum);
    }
    super::avx2_q8::q4_0_groups_end(acc, w_rest, x_rest, 8 * w8.len())
}

/// Eight Q4_0 rows packed ([`BlockQ4_0x8`]) against the activation `x`
/// (with its groups of eight blocks, `g`, for their offsets): AVX2's
/// `dot_q4_0` of each row, bit for bit (NaN payloads aside), as
/// [`dot_q4_0_groups`] gives for one row.
///
/// Each `i32` lane of a 256-bit register is one row: per four weights one
/// `vpdpbusd` of the eight rows' levels by the activation's four values,
/// broadcast, onto lanes that start at the block's offset (`-8` times the
/// activation block's sum), so a block's eight steps leave each row's
/// exact block sum in its lane with nothing to reduce, and the block's
/// float step, AVX2's, runs once for the eight rows: `(d_w * d_x) * isum`
/// added to partial sum `b % 4`, the four sums added as `(s0 + s1) + (s2 +
/// s3)`. A group's blocks lie one after another, so the rows stream front
/// to back.
///
/// # Panics
///
/// If `w.len() != x.len()` or `g` is not `x`'s groups of eight.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q4_0_packed8(w: &[BlockQ4_0x8], g: &[NibbleGroup], x: &[ActBlock]) -> [f32; 8] {
    assert_eq!(w.len(), x.len(), "dot: block counts differ");
    assert_eq!(
        g.len(),
        x.len() / 8,
        "dot_q4_0_packed8: the groups do not match the blocks"
    );
    let mut acc = [_mm256_setzero_ps(); 4];
    let (w8, w_rest) = w.as_chunks::<8>();
    let (x8, x_rest) = x.as_chunks::<8>();
    for ((wc, xc), gc) in w8.iter().zip(x8).zip(g) {
        for i in 0..8 {
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
/// offset is `off`): the eight rows' terms `(d_w * d_x) * isum`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q4_0_packed_terms(wb: &BlockQ4_0x8, xb: &ActBlock, off: i32) -> __m256 {
    let low4 = _mm256_set1_epi8(0x0f);
    let q: [__m256i; 4] = bytemuck::cast(wb.qs);
    let (xq, _) = xb.qs.as_chunks::<4>();
    let four = |p: usize| _mm256_set1_epi32(i32::from_le_bytes(xq[p].map(|v| v as u8)));
    // Two chains (low and high nibbles) of four steps each, not one of
    // eight: the block's latency halves.
    let mut lo = _mm256_set1_epi32(off);
    let mut hi = _mm256_setzero_si256();
    for (p, &v) in q.iter().enumerate() {
        lo = _mm256_dpbusd_epi32(lo, _mm256_and_si256(v, low4), four(p));
        let h = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4);
        hi = _mm256_dpbusd_epi32(hi, h, four(p + 4));
    }
    let isum = _mm256_add_epi32(lo, hi);
    let d_w = _mm256_cvtph_ps(bytemuck::cast::<_, __m128i>(wb.d));
    _mm256_mul_ps(
        _mm256_mul_ps(d_w, _mm256_set1_ps(xb.d)),
        _mm256_cvtepi32_ps(isum),
    )
}

/// Sixteen Q4_K or Q5_K weight rows ([`K4Rows16`], block by block)
/// against `T` activation rows: `out[t][r]` is the single-row dot of
/// weight row `r` with activation row `t`, bit for bit (NaN payloads
/// aside), the steps `quant::kgroup::gemm_k4_rows16_reference` states.
///
/// Each `i32` lane is one weight row, as in [`gemm_q4_0_rows16`]: per four
/// weights one `vpdpbusd` of the sixteen rows' levels by the activation's
/// four values, broadcast; a sub-block's eight steps leave each row's
/// exact sub-block sum in its lane, one `vpmulld` scales it by the rows'
/// scales, and per block four `vpdpwssd` make the mins' term from the
/// activation's 32-value sums. The float step is the single-row kernel's,
/// lane by lane: `(d * d_x) * isum` fused into one sum, `(dmin * d_x) *
/// msum` subtracted from another. A sub-block's levels, loaded once, serve
/// all `T` activation rows.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_k4_rows16<const T: usize>(
    w: &[K4Rows16],
    x: [&[Q8KAct]; T],
) -> [[f32; ROWS16]; T] {
    for xt in x {
        assert_eq!(xt.len(), w.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm512_setzero_ps(); T];
    let mut acc_min = [_mm512_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        let mut isum = [_mm512_setzero_si512(); T];
        let (steps, _) = wb.q.as_chunks::<8>();
        for (j, step) in steps.iter().enumerate() {
            let q: [__m512i; 8] = bytemuck::cast(*step);
            let sc: __m512i = bytemuck::cast(wb.sc[j]);
            for (t, is) in isum.iter_mut().enumerate() {
                let (xq, _) = x[t][b].qs.as_chunks::<4>();
                let four = |p: usize| {
                    _mm512_set1_epi32(i32::from_le_bytes(xq[8 * j + p].map(|v| v as u8)))
                };
                // Two chains of four steps: half the latency of one.
                let mut s0 = _mm512_setzero_si512();
                let mut s1 = _mm512_setzero_si512();
                for p in 0..4 {
                    s0 = _mm512_dpbusd_epi32(s0, q[p], four(p));
                    s1 = _mm512_dpbusd_epi32(s1, q[p + 4], four(p + 4));
                }
                *is = _mm512_add_epi32(*is, _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
            }
        }
        let d: __m512 = bytemuck::cast(wb.d);
        let dmin: __m512 = bytemuck::cast(wb.dmin);
        let mins: [__m512i; 4] = bytemuck::cast(wb.mins);
        for t in 0..T {
            let xb = &x[t][b];
            let mut m = _mm512_setzero_si512();
            for (k, &mk) in mins.iter().enumerate() {
                m = _mm512_dpwssd_epi32(m, mk, _mm512_set1_epi32(xb.bs[k]));
            }
            let d_x = _mm512_set1_ps(xb.d);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, d_x), _mm512_cvtepi32_ps(isum[t]), acc[t]);
            let mins_t = _mm512_mul_ps(_mm512_mul_ps(dmin, d_x), _mm512_cvtepi32_ps(m));
            acc_min[t] = _mm512_sub_ps(acc_min[t], mins_t);
        }
    }
    core::array::from_fn(|t| bytemuck::cast(_mm512_add_ps(acc[t], acc_min[t])))
}

/// Sixteen Q6_K weight rows ([`Q6Rows16`], block by block) against `T`
/// activation rows: `out[t][r]` is the single-row dot of weight row `r`
/// with activation row `t`, bit for bit (NaN payloads aside), for
/// activation blocks whose sums (`bsums`) are their values' (every block
/// this crate quantizes): the steps `quant::kgroup::gemm_q6_rows16_reference`
/// states.
///
/// Each `i32` lane is one weight row, as in [`gemm_k4_rows16`]: per four
/// weights one `vpdpbusd` of the sixteen rows' levels plus 32 by the
/// activation's four values, broadcast, into sums started from `-32`
/// times the sub-block's activation sum, so a sub-block's four steps leave
/// each row's exact `sum (q - 32) * x` in its lane (at most `16 * 32 *
/// 128` in magnitude, and no partial sum beyond `32 * 2048 + 16 * 63 *
/// 128`);
/// one `vpmulld` scales it by the rows' scales (a block's sixteen at most
/// `2^27`). The float step is the single-row kernel's, lane by lane:
/// `(d * d_x)` rounded, then one FMA of the block's sum. A sub-block's
/// levels, loaded once, serve all `T` activation rows.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_q6_rows16<const T: usize>(
    w: &[Q6Rows16],
    x: [&[Q8KAct]; T],
) -> [[f32; ROWS16]; T] {
    for xt in x {
        assert_eq!(xt.len(), w.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm512_setzero_ps(); T];
    for (b, wb) in w.iter().enumerate() {
        let mut isum = [_mm512_setzero_si512(); T];
        let (steps, _) = wb.q.as_chunks::<4>();
        for (j, step) in steps.iter().enumerate() {
            let q: [__m512i; 4] = bytemuck::cast(*step);
            let sc: __m512i = bytemuck::cast(wb.sc[j]);
            for (t, is) in isum.iter_mut().enumerate() {
                let xb = &x[t][b];
                let (xq, _) = xb.qs.as_chunks::<4>();
                let four = |p: usize| {
                    _mm512_set1_epi32(i32::from_le_bytes(xq[4 * j + p].map(|v| v as u8)))
                };
                // Two chains of two steps: half the latency of one.
                let mut s0 = _mm512_set1_epi32(-32 * i32::from(xb.bsums[j]));
                let mut s1 = _mm512_setzero_si512();
                for p in 0..2 {
                    s0 = _mm512_dpbusd_epi32(s0, q[p], four(p));
                    s1 = _mm512_dpbusd_epi32(s1, q[p + 2], four(p + 2));
                }
                *is = _mm512_add_epi32(*is, _mm512_mullo_epi32(_mm512_add_epi32(s0, s1), sc));
            }
        }
        let d: __m512 = bytemuck::cast(wb.d);
        for t in 0..T {
            let d_x = _mm512_set1_ps(x[t][b].d);
            acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, d_x), _mm512_cvtepi32_ps(isum[t]), acc[t]);
        }
    }
    core::array::from_fn(|t| bytemuck::cast(acc[t]))
}

/// `K4Rows16::set_head` of sixteen rows at once: rows `0..8` from
/// `heads[0]` and `8..16` from `heads[1]` (two packed groups' heads), the
/// same scales, mins and scales' bits (`vcvtph2ps` widens every f16,
/// NaNs included, as `half` does). Four registers
/// of four heads are decoded in their 128-bit lanes (`k4_heads4`), then
/// one dword of every row gathered into a register (`vpermt2d`) for the
/// scales (`d`, `dmin`), the sub-block scales and the mins, which shifts
/// and masks spread a byte per lane: about 60 instructions where sixteen
/// heads decoded a row at a time took 5% of a Q4_K gate/up product's time.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn k4_tile_heads(t: &mut K4Rows16, heads: [&[[u8; 16]; 8]; 2]) {
    let h: [[[u8; 64]; 2]; 2] = [bytemuck::cast(*heads[0]), bytemuck::cast(*heads[1])];
    let regs: [__m512i; 4] = [h[0][0], h[0][1], h[1][0], h[1][1]].map(bytemuck::cast);
    // Dword `k` of each row's lane, rows in lane order.
    let gather = |v: &[__m512i; 4], k: i32| {
        let idx = _mm512_add_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
            _mm512_set1_epi32(k),
        );
        let lo = _mm512_permutex2var_epi32(v[0], idx, v[1]);
        let hi = _mm512_permutex2var_epi32(v[2], idx, v[3]);
        _mm512_inserti64x4::<1>(lo, _mm512_castsi512_si256(hi))
    };
    let dd = gather(&regs, 0);
    t.d = bytemuck::cast(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    t.dmin = bytemuck::cast(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<
        16,
    >(dd))));
    let decoded = regs.map(|v| k4_heads4(v));
    let byte = _mm512_set1_epi32(0xff);
    for half in 0..2 {
        // Bytes `4 * half..4 * half + 4` of the scales, then of the mins.
        let s = gather(&decoded, half as i32);
        t.sc[4 * half] = bytemuck::cast(_mm512_and_si512(s, byte));
        t.sc[4 * half + 1] = bytemuck::cast(_mm512_and_si512(_mm512_srli_epi32::<8>(s), byte));
        t.sc[4 * half + 2] = bytemuck::cast(_mm512_and_si512(_mm512_srli_epi32::<16>(s), byte));
        t.sc[4 * half + 3] = bytemuck::cast(_mm512_srli_epi32::<24>(s));
        let m = gather(&decoded, 2 + half as i32);
        // Mins `2k` and `2k + 1` in a lane's low and high halves.
        let (b1, b3) = (_mm512_set1_epi32(0xff00), _mm512_set1_epi32(0x00ff_0000));
        t.mins[2 * half] = bytemuck::cast(_mm512_or_si512(
            _mm512_and_si512(m, byte),
            _mm512_slli_epi32::<8>(_mm512_and_si512(m, b1)),
        ));
        t.mins[2 * half + 1] = bytemuck::cast(_mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32::<16>(m), byte),
            _mm512_and_si512(_mm512_srli_epi32::<8>(m), b3),
        ));
    }
}

/// `quant::kgroup::k4_tile_levels_reference`: a [`K4Rows16`] tile's
/// levels from block `b` of two packed groups of eight Q4_K (or, with
/// `qh`, Q5_K) rows. Each 64-byte nibble word of a group holds eight
/// bytes of each of its eight rows; one `vpermt2d` per half of those
/// bytes lays four bytes of all sixteen rows side by side, a mask and a
/// shift split the low and high nibbles (two sub-blocks), and Q5_K's
/// fifth bits, permuted the same way, are tested into bit 4 with a masked
/// add: per block 32 loads, 32 permutes and 64 stores, where the
/// byte-at-a-time form spends most of a prefill product's time.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn k4_tile_levels(
    t: &mut K4Rows16,
    qs: [&[[[u8; 8]; 8]; 16]; 2],
    qh: Option<[&[[[u8; 8]; 8]; 4]; 2]>,
) {
    // Dwords 2i (the first four bytes of row i's word) of both groups, then
    // dwords 2i + 1.
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    let low4 = _mm512_set1_epi8(0x0f);
    let sixteen = _mm512_set1_epi8(16);
    let halves = |a: __m512i, c: __m512i| {
        [
            _mm512_permutex2var_epi32(a, even, c),
            _mm512_permutex2var_epi32(a, odd, c),
        ]
    };
    // fifth[c]: bytes 4c..4c + 4 of each row's `qh`, sixteen rows.
    let fifth: Option<[__m512i; 8]> = qh.map(|qh| {
        let mut f = [_mm512_setzero_si512(); 8];
        for u in 0..4 {
            let [e, o] = halves(bytemuck::cast(qh[0][u]), bytemuck::cast(qh[1][u]));
            f[2 * u] = e;
            f[2 * u + 1] = o;
        }
        f
    });
    for (k, (w0, w1)) in qs[0].iter().zip(qs[1]).enumerate() {
        let h = k / 4;
        let pair = halves(bytemuck::cast(*w0), bytemuck::cast(*w1));
        for (e, v) in pair.into_iter().enumerate() {
            let c = 2 * (k % 4) + e;
            let mut lo = _mm512_and_si512(v, low4);
            let mut hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low4);
            if let Some(f) = &fifth {
                let bit = |j: usize| _mm512_set1_epi8(1i8.wrapping_shl(j as u32));
                lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(f[c], bit(2 * h)), lo, sixteen);
                hi = _mm512_mask_add_epi8(
                    hi,
                    _mm512_test_epi8_mask(f[c], bit(2 * h + 1)),
                    hi,
                    sixteen,
                );
            }
            t.q[8 * (2 * h) + c] = bytemuck::cast(lo);
            t.q[8 * (2 * h + 1) + c] = bytemuck::cast(hi);
        }
    }
}

/// Sixteen Q4_0 weight rows ([`Q4_0Rows16`], block by block) against `T`
/// activation rows: `out[t][r]` is AVX2's `dot_q4_0` of weight row `r`
/// with activation row `t`, bit for bit (NaN payloads aside), hence the
/// decode product's (`quant::kgroup::gemm_q4_0_rows16_reference` states the steps).
///
/// Each `i32` lane is one weight row: per four weights one `vpdpbusd` of
/// the sixteen rows' levels by the activation's four values, broadcast,
/// onto a lane that starts at the block's offset (`-8` times the
/// activation block's sum), so after a block's eight steps every lane
/// holds its row's exact block sum with no reduction across lanes. The
/// float step is AVX2's, lane by lane: `(d_w * d_x) * isum` added to
/// partial sum `b % 4`, the four sums added as `(s0 + s1) + (s2 + s3)`.
/// The blocks go by residue (`b % 4`), so that a row's activation `t`
/// needs one partial sum in a register at a time, and a block's levels,
/// unpacked once, serve all `T` activation rows.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_q4_0_rows16<const T: usize>(
    w: &[Q4_0Rows16],
    x: [&[Q4_0Act]; T],
) -> [[f32; ROWS16]; T] {
    for xt in x {
        assert_eq!(xt.len(), w.len(), "GEMM: block counts differ");
    }
    let a0 = q4_0_rows16_pass(w, x, 0);
    let a1 = q4_0_rows16_pass(w, x, 1);
    let a2 = q4_0_rows16_pass(w, x, 2);
    let a3 = q4_0_rows16_pass(w, x, 3);
    let mut out = [[0.0f32; ROWS16]; T];
    for (t, o) in out.iter_mut().enumerate() {
        *o = bytemuck::cast(_mm512_add_ps(
            _mm512_add_ps(a0[t], a1[t]),
            _mm512_add_ps(a2[t], a3[t]),
        ));
    }
    out
}

/// One of [`gemm_q4_0_rows16`]'s four running sums per batch row: blocks
/// `j, j + 4, ..` in order. (Four calls and their sums, rather than one
/// array of four sums per row filled in a loop, which the compiler zeroed
/// through a C library call first.)
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn q4_0_rows16_pass<const T: usize>(w: &[Q4_0Rows16], x: [&[Q4_0Act]; T], j: usize) -> [__m512; T] {
    let low4 = _mm512_set1_epi8(0x0f);
    let mut acc = [_mm512_setzero_ps(); T];
    for b in (j..w.len()).step_by(4) {
        let wb = &w[b];
        let q: [__m512i; 4] = bytemuck::cast(wb.qs);
        let lo = q.map(|v| _mm512_and_si512(v, low4));
        let hi = q.map(|v| _mm512_and_si512(_mm512_srli_epi16::<4>(v), low4));
        let d_w: __m512 = bytemuck::cast(wb.d);
        for t in 0..T {
            let xb = &x[t][b];
            let (xq, _) = xb.qs.as_chunks::<4>();
            let four = |p: usize| _mm512_set1_epi32(i32::from_le_bytes(xq[p].map(|v| v as u8)));
            let mut s = _mm512_set1_epi32(xb.off);
            for p in 0..4 {
                s = _mm512_dpbusd_epi32(s, lo[p], four(p));
                s = _mm512_dpbusd_epi32(s, hi[p], four(p + 4));
            }
            let d = _mm512_mul_ps(d_w, _mm512_set1_ps(xb.d));
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(s)));
        }
    }
    acc
}

/// The sums of a register's `i32` lane pairs `(2a, 2a + 1)`, as eight
/// lanes (exact while they fit; the GEMM's stay below `2^28`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn pair_sums(v: __m512i) -> __m256i {
    _mm512_cvtepi64_epi32(_mm512_add_epi32(v, _mm512_srli_epi64::<32>(v)))
}

/// `gemm_k4_reference(w, x)` (`quant::kgroup`), bit for bit (NaN payloads
/// aside): four Q4_K or Q5_K weight rows, unpacked, against the eight
/// activation rows of `x`.
///
/// Per step of eight columns, each weight row's eight levels are broadcast
/// to the eight 64-bit slots and one `vpdpbusd` adds their products with
/// the eight activation rows' values into two `i32` lanes per activation
/// row (a sub-block's four steps at most `16 * 31 * 128` per lane), and
/// one `vpmulld` multiplies those by the sub-block's scale. Each block's lane pairs are summed into one
/// exact integer per (weight row, activation row), the mins' term
/// likewise from the activation's sums, and the f32 part is the reference's,
/// lane by lane.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
// `s` indexes the activation steps and four weight rows alike.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_k4_4x8(w: [&[K4Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut acc_min = [_mm256_setzero_ps(); 4];
    for (b, g) in x.iter().enumerate() {
        let wb = [&w[0][b], &w[1][b], &w[2][b], &w[3][b]];
        let q8 = [
            wb[0].q.as_chunks::<8>().0,
            wb[1].q.as_chunks::<8>().0,
            wb[2].q.as_chunks::<8>().0,
            wb[3].q.as_chunks::<8>().0,
        ];
        let mut isum = [_mm512_setzero_si512(); 4];
        for j in 0..8 {
            let mut t = [_mm512_setzero_si512(); 4];
            for s in 4 * j..4 * j + 4 {
                let xv: __m512i = bytemuck::cast(g.qs[s]);
                for r in 0..4 {
                    let wq = _mm512_set1_epi64(i64::from_le_bytes(q8[r][s]));
                    t[r] = _mm512_dpbusd_epi32(t[r], wq, xv);
                }
            }
            for r in 0..4 {
                // The scale's upper `i16` half, sign-extended: the scale.
                let sc = _mm512_set1_epi32(wb[r].sc[j] >> 16);
                isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(t[r], sc));
            }
        }
        let bs: [__m512i; 2] = [bytemuck::cast(g.bs32[0]), bytemuck::cast(g.bs32[1])];
        let dx: __m256 = bytemuck::cast(g.d);
        for r in 0..4 {
            let mins: [i64; 2] = bytemuck::cast(wb[r].mins);
            let m = _mm512_add_epi32(
                _mm512_madd_epi16(bs[0], _mm512_set1_epi64(mins[0])),
                _mm512_madd_epi16(bs[1], _mm512_set1_epi64(mins[1])),
            );
            let d = _mm256_mul_ps(_mm256_set1_ps(wb[r].d), dx);
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(pair_sums(isum[r])), acc[r]);
            let dmin = _mm256_mul_ps(_mm256_set1_ps(wb[r].dmin), dx);
            let mins = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(pair_sums(m)));
            acc_min[r] = _mm256_sub_ps(acc_min[r], mins);
        }
    }
    let mut out = [[0.0; GROUP_ROWS]; 4];
    for r in 0..4 {
        out[r] = bytemuck::cast(_mm256_add_ps(acc[r], acc_min[r]));
    }
    out
}

/// `gemm_q6_reference(w, x)` (`quant::kgroup`), bit for bit (NaN payloads
/// aside): [`gemm_k4_4x8`]'s shape for Q6_K, with `vpmaddubsw` and
/// `vpmaddwd` (with `vpdpbusd` and a `vpmulld` per sub-block, as there,
/// prefill of a Q6_K file ran 4-7% slower on an AMD Zen 4 core: twice as
/// many scale multiplies per step). A 16-weight sub-block's two
/// steps add in `i16` (levels `0..=63`: at most `2 * 2 * 63 * 128`), its
/// signed scale widens them, and the levels' offset of 32 comes off as
/// `32 * sum_j scale_j * sum_j(x)` from the activation's 16-value sums.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
// `s` indexes the activation steps and four weight rows alike.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_q6_4x8(w: [&[Q6Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "K-quant GEMM: block counts differ");
    }
    let mut acc = [_mm256_setzero_ps(); 4];
    for (b, g) in x.iter().enumerate() {
        let wb = [&w[0][b], &w[1][b], &w[2][b], &w[3][b]];
        let q8 = [
            wb[0].q.as_chunks::<8>().0,
            wb[1].q.as_chunks::<8>().0,
            wb[2].q.as_chunks::<8>().0,
            wb[3].q.as_chunks::<8>().0,
        ];
        let mut isum = [_mm512_setzero_si512(); 4];
        for j in 0..16 {
            let mut t = [_mm512_setzero_si512(); 4];
            for s in 2 * j..2 * j + 2 {
                let xv: __m512i = bytemuck::cast(g.qs[s]);
                for r in 0..4 {
                    let wq = _mm512_set1_epi64(i64::from_le_bytes(q8[r][s]));
                    t[r] = _mm512_add_epi16(t[r], _mm512_maddubs_epi16(wq, xv));
                }
            }
            for r in 0..4 {
                let sc = _mm512_set1_epi32(wb[r].sc[j]);
                isum[r] = _mm512_add_epi32(isum[r], _mm512_madd_epi16(t[r], sc));
            }
        }
        let bs: [__m512i; 4] = core::array::from_fn(|t| bytemuck::cast(g.bs16[t]));
        let dx: __m256 = bytemuck::cast(g.d);
        for r in 0..4 {
            let sc: [i64; 4] = bytemuck::cast(wb[r].sc16);
            let mut off = _mm512_setzero_si512();
            for t in 0..4 {
                off = _mm512_add_epi32(off, _mm512_madd_epi16(bs[t], _mm512_set1_epi64(sc[t])));
            }
            let total = _mm512_sub_epi32(isum[r], _mm512_slli_epi32::<5>(off));
            let d = _mm256_mul_ps(_mm256_set1_ps(wb[r].d), dx);
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(pair_sums(total)), acc[r]);
        }
    }
    let mut out = [[0.0; GROUP_ROWS]; 4];
    for r in 0..4 {
        out[r] = bytemuck::cast(acc[r]);
    }
    out
}

/// `gemm_b32_reference::<Q8_0_SHIFT>(w, x)` (`quant::kgroup`), bit for bit
/// (NaN payloads aside): two Q8_0 weight rows, unpacked to unsigned bytes
/// (their values plus 128), against the eight activation rows of `x`.
/// (Q4_0 rounds otherwise on this kernel: [`gemm_q4_0_rows16`].)
///
/// Step `s` of a block (columns `8s..8s + 8`) is one 512-bit `vpdpbusd`
/// per weight row: the row's eight bytes broadcast to every 64-bit slot,
/// times the eight activation rows' values, onto the activation's offset
/// (`neg_bias`, `-128` times each half-step's sum), so its `i32` lanes `2a`, `2a + 1` are row `a`'s
/// lanes `2s`, `2s + 1` of the single-row kernel, exactly. Each lane's
/// `(d_w * d_x)` FMA goes into the register of its step and the block's
/// parity, which is the single-row kernel's accumulator lane for lane;
/// the final sums take each row's eight lanes in the single-row order.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn gemm_b32_2x8(w: [&[B32Levels]; 2], x: &[Q8Group]) -> [[f32; GROUP_ROWS]; 2] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "GEMM: block counts differ");
    }
    // acc[parity][r][s]
    let mut acc = [[[_mm512_setzero_ps(); 4]; 2]; 2];
    let (pairs, rest) = x.as_chunks::<2>();
    for (k, gs) in pairs.iter().enumerate() {
        for (p, g) in gs.iter().enumerate() {
            b32_block(&mut acc[p], [&w[0][2 * k + p], &w[1][2 * k + p]], g);
        }
    }
    if let [g] = rest {
        let b = x.len() - 1;
        b32_block(&mut acc[0], [&w[0][b], &w[1][b]], g);
    }
    let mut out = [[0.0; GROUP_ROWS]; 2];
    for r in 0..2 {
        // v[s][2a + h] = lane 2s + h of activation row a.
        let mut v = [[0.0f32; 16]; 4];
        for s in 0..4 {
            v[s] = bytemuck::cast(_mm512_add_ps(acc[0][r][s], acc[1][r][s]));
        }
        for a in 0..GROUP_ROWS {
            let l = |m: usize| v[m / 2][2 * a + m % 2];
            out[r][a] = ((l(0) + l(4)) + (l(2) + l(6))) + ((l(1) + l(5)) + (l(3) + l(7)));
        }
    }
    out
}

/// One block of [`gemm_b32_2x8`] for two weight rows into `acc[r][s]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn b32_block(acc: &mut [[__m512; 4]; 2], w: [&B32Levels; 2], g: &Q8Group) {
    let dx: __m512 = bytemuck::cast(g.d);
    let bias: [__m512i; 4] = bytemuck::cast(g.neg_bias);
    let xs: [__m512i; 4] = bytemuck::cast(g.qs);
    for r in 0..2 {
        let d = _mm512_mul_ps(_mm512_set1_ps(w[r].d), dx);
        let (q8, _) = w[r].q.as_chunks::<8>();
        for s in 0..4 {
            let wq = _mm512_set1_epi64(i64::from_le_bytes(q8[s]));
            let lanes = _mm512_dpbusd_epi32(bias[s], wq, xs[s]);
            acc[r][s] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[r][s]);
        }
    }
}

// Decode: eight weight rows against one activation.
//
// The single-row K-quant kernel spends most of a block on work that is
// per row but not per weight: decoding the packed scales, spreading each
// sub-block's scale across a register (`vpermw`), and summing the block's
// lanes into one integer (`vphaddd`). With eight rows side by side, one per
// 64-bit slot of a register, all of that is done once for the eight: each
// slot's lanes are its row's own, so a block's scales multiply lane by lane
// and the per-row sums fall out of the lane layout. The rows stay in GGML's
// layout; a block's 64-byte halves of eight rows are transposed (an 8 x 8
// transpose of 64-bit words, 24 shuffles) so that slot `r` holds row `r`'s
// eight bytes.

/// The `vpermw` indices that copy word `4r + q` of a register to words
/// `4r..4r + 4`: one row's scale for sub-block `q` of four, into that row's
/// four `i16` lanes.
const SPREAD_SCALE: [[i16; 32]; 4] = {
    let mut idx = [[0i16; 32]; 4];
    let mut q = 0;
    while q < 4 {
        let mut w = 0;
        while w < 32 {
            idx[q][w] = ((w & !3) | q) as i16;
            w += 1;
        }
        q += 1;
    }
    idx
};

/// `vpermt2d` indices gathering dword `k` of each 128-bit lane of two
/// registers (eight rows' heads, four per register) into eight lanes, for
/// `k = 0` then `k = 1` (the scales) and `k = 2` then `k = 3` (the mins).
const GATHER_SCALES: [i32; 16] = [0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29];
const GATHER_MINS: [i32; 16] = [2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31];

/// `vpshufb` pattern putting each 128-bit lane's even-indexed `i16`
/// words in its low 64 bits and its odd-indexed ones in its high 64.
const BSUM_HALVES: [u8; 32] = [
    0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, //
    0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
];

/// `v[t]`'s 64-bit word `r` becomes word `t` of the result's `r`-th
/// register: the transpose of an 8 x 8 matrix of 64-bit words (unpack
/// pairs, then 128-bit lanes twice).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn transpose_words(v: [__m512i; 8]) -> [__m512i; 8] {
    // u[2p] lane k: (v[2p][2k], v[2p + 1][2k]); u[2p + 1]: the odd words.
    let mut u = [_mm512_setzero_si512(); 8];
    for p in 0..4 {
        u[2 * p] = _mm512_unpacklo_epi64(v[2 * p], v[2 * p + 1]);
        u[2 * p + 1] = _mm512_unpackhi_epi64(v[2 * p], v[2 * p + 1]);
    }
    // For the even words (e = 0) and the odd ones (e = 1): lanes 0 and 2
    // of each row pair, then lanes 1 and 3.
    let mut out = [_mm512_setzero_si512(); 8];
    for e in 0..2 {
        let x01 = _mm512_shuffle_i64x2::<0b10_00_10_00>(u[e], u[2 + e]);
        let y01 = _mm512_shuffle_i64x2::<0b11_01_11_01>(u[e], u[2 + e]);
        let x45 = _mm512_shuffle_i64x2::<0b10_00_10_00>(u[4 + e], u[6 + e]);
        let y45 = _mm512_shuffle_i64x2::<0b11_01_11_01>(u[4 + e], u[6 + e]);
        out[e] = _mm512_shuffle_i64x2::<0b10_00_10_00>(x01, x45);
        out[4 + e] = _mm512_shuffle_i64x2::<0b11_01_11_01>(x01, x45);
        out[2 + e] = _mm512_shuffle_i64x2::<0b10_00_10_00>(y01, y45);
        out[6 + e] = _mm512_shuffle_i64x2::<0b11_01_11_01>(y01, y45);
    }
    out
}

/// `avx2::k4_head`'s decoding of the packed scales, in each 128-bit lane
/// of `v` (four rows' first 16 bytes): dword 0 of a lane becomes its row's
/// scales 0-3, dword 1 scales 4-7, dword 2 mins 0-3 and dword 3 mins 4-7.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_heads4(v: __m512i) -> __m512i {
    let w = _mm512_bsrli_epi128::<4>(v);
    let a = _mm512_shuffle_epi32::<0b10_01_10_00>(w);
    let low6 = _mm512_and_si512(
        a,
        _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f_3f3f, 0, 0x3f3f_3f3f, 0)),
    );
    let nib = _mm512_and_si512(
        _mm512_srlv_epi32(a, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0, 0, 4))),
        _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x0f0f_0f0f, 0, 0x0f0f_0f0f)),
    );
    let b = _mm512_shuffle_epi32::<0b01_00_00_00>(w);
    let top = _mm512_slli_epi32::<4>(_mm512_and_si512(
        _mm512_srli_epi32::<6>(b),
        _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x0303_0303, 0, 0x0303_0303)),
    ));
    _mm512_or_si512(low6, _mm512_or_si512(nib, top))
}

/// Four 16-byte rows in the four 128-bit lanes of a register.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn four_lanes(h: [&[u8; 16]; 4]) -> __m512i {
    let mut v = _mm512_castsi128_si512(bytemuck::cast(*h[0]));
    v = _mm512_inserti32x4::<1>(v, bytemuck::cast(*h[1]));
    v = _mm512_inserti32x4::<2>(v, bytemuck::cast(*h[2]));
    _mm512_inserti32x4::<3>(v, bytemuck::cast(*h[3]))
}

/// The products of one 32-byte chunk `c` of eight rows' nibbles (sub-block
/// `2c` in the low nibbles, `2c + 1` in the high ones), times the rows'
/// scales, as two registers (the low nibbles' and the high ones'): `t`
/// holds the chunk's four 64-bit words of each row, transposed (word `u`
/// of row `r` in slot `r` of `t[u]`), `fifth` the rows' fifth bits
/// likewise (used if `FIFTH`), `s_lo`/`s_hi` the two sub-blocks' scales in
/// each row's two `i32` lanes.
///
/// Per step of eight columns, one `vpdpbusd` per nibble half adds the
/// slot's four-byte products into its two `i32` lanes. Without fifth bits
/// the high nibbles are not shifted down: the masked byte (`16 q`, at most
/// 240) is multiplied as it is, so the second register is sixteen times
/// the high sub-block's scaled sum (per `i32` lane at most `16 * 240 *
/// 128 * 63`, about 31 million, and four chunks' sum about 124 million:
/// far inside `i32`), divided back by the caller once per block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_chunk8<const FIFTH: bool>(
    t: [__m512i; 4],
    fifth: &[__m512i; 4],
    c: usize,
    x8: &[[u8; 8]; 32],
    s_lo: __m512i,
    s_hi: __m512i,
) -> (__m512i, __m512i) {
    let low4 = _mm512_set1_epi8(0x0f);
    let sixteen = _mm512_set1_epi8(16);
    let mut lo = _mm512_setzero_si512();
    let mut hi = _mm512_setzero_si512();
    for u in 0..4 {
        let mut ql = _mm512_and_si512(t[u], low4);
        let mut qh = if FIFTH {
            _mm512_and_si512(_mm512_srli_epi16::<4>(t[u]), low4)
        } else {
            _mm512_andnot_si512(low4, t[u])
        };
        if FIFTH {
            // Bit `j` of a fifth-bits byte is sub-block `j`'s: 16 added to
            // the level where it is set.
            let bl = _mm512_test_epi8_mask(fifth[u], _mm512_set1_epi8(1 << (2 * c)));
            let bh = _mm512_test_epi8_mask(fifth[u], _mm512_set1_epi8(1 << (2 * c + 1)));
            ql = _mm512_mask_add_epi8(ql, bl, ql, sixteen);
            qh = _mm512_mask_add_epi8(qh, bh, qh, sixteen);
        }
        let xl = _mm512_set1_epi64(i64::from_le_bytes(x8[8 * c + u]));
        let xh = _mm512_set1_epi64(i64::from_le_bytes(x8[8 * c + 4 + u]));
        lo = _mm512_dpbusd_epi32(lo, ql, xl);
        hi = _mm512_dpbusd_epi32(hi, qh, xh);
    }
    (_mm512_mullo_epi32(lo, s_lo), _mm512_mullo_epi32(hi, s_hi))
}

/// Row `r`'s scale of sub-block `j` (word `4r + j % 4` of `sc[j / 4]`)
/// in both of its `i32` lanes (the odd words zeroed).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn spread_scale(sc: &[__m512i; 2], j: usize) -> __m512i {
    _mm512_maskz_permutexvar_epi16(0x5555_5555, bytemuck::cast(SPREAD_SCALE[j % 4]), sc[j / 4])
}

/// One block of eight Q4_K or Q5_K rows against one activation block,
/// added to the rows' running sums (lane `r` of `acc`/`acc_min` is row
/// `r`'s `acc`/`acc_min` of `k_kernels!`'s `k4_step`).
///
/// `ha`/`hb` hold rows 0-3 and 4-7's first 16 bytes (`d`, `dmin`, the
/// packed scales) in their 128-bit lanes, `t0`/`t1` the two 64-byte halves
/// of the rows' nibbles transposed (word `u` of row `r` in slot `r` of
/// `t_h[u]`: [`rows8_registers`], or a packed block as it is) and, if
/// `FIFTH` (Q5_K), `fifth` the rows' fifth bits likewise (word `u` of row
/// `r`'s 32 bytes in slot `r` of `fifth[u]`: [`fifth_registers`]). Per
/// 64-bit slot (row), a step of eight columns is one `vpdpbusd` of the
/// row's levels by the activation's eight values broadcast, into the
/// row's two `i32` lanes (a sub-block's four steps at most
/// `16 * 31 * 128`), and one `vpmulld` per sub-block multiplies them by
/// the row's scale (see [`k4_chunk8`]). The block's integer sum and its mins' sum per row are exact, so
/// they equal the single-row kernel's, and the f32 operations are the same
/// ones in the same order, lane by lane. (The mins' sum reads the
/// activation's stored `bsums` as they are, as the single-row kernel does,
/// so a block whose stored sums are not its values' gets its bits too.)
///
/// The loop over the blocks is this function's own, `load(b)` giving
/// block `b`'s registers (and asking for the lines ahead): a block's
/// body is too large for the compiler to inline as a function of its
/// own, and called once per block it passed its 22 registers and both
/// sums through the stack (one pass over 1,024 columns of packed Q4_K
/// rows in L2 ran at 27 GB/s so, on an AMD Zen 4).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn k4_rows8_dot<const FIFTH: bool>(
    x: &[BlockQ8K],
    mut load: impl FnMut(usize) -> K4Regs,
) -> [f32; 8] {
    let mut acc = _mm256_setzero_ps();
    let mut acc_min = _mm256_setzero_ps();
    for (b, xb) in x.iter().enumerate() {
        let ([ha, hb], [t0, t1], fifth) = load(b);
        // Heads: d and dmin of the eight rows, then their scales and mins.
        let dd = _mm512_castsi512_si256(_mm512_permutex2var_epi32(
            ha,
            bytemuck::cast(GATHER_SCALES),
            hb,
        ));
        let d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dd));
        let dmin = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32::<16>(dd)));
        let (sa, sb) = (k4_heads4(ha), k4_heads4(hb));
        let sc8 = _mm512_permutex2var_epi32(sa, bytemuck::cast(GATHER_SCALES), sb);
        let m8 = _mm512_permutex2var_epi32(sa, bytemuck::cast(GATHER_MINS), sb);
        // Word `4r + j` of `sc[h]`: row `r`'s scale of sub-block `4h + j`.
        let sc = [
            _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sc8)),
            _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(sc8)),
        ];
        // The mins' term: words `4r + j` of the mins times the activation's
        // 32-column sums, each the sum of two stored 16-column `bsums`. The
        // pair is not added in `i16` (stored sums need not be the values'
        // and could wrap): one `vpmaddwd` meets the mins with the pairs'
        // first halves, one with their second, each product exact in `i32`.
        // Each 128-bit lane of the sums (sub-blocks 0-3, then 4-7) with
        // the pairs' first halves in its low 64 bits and their second in
        // its high 64, each 64 bits then broadcast to the eight rows' slots.
        let bs: __m256i = bytemuck::cast(xb.bsums);
        let split = _mm256_shuffle_epi8(bs, bytemuck::cast(BSUM_HALVES));
        let (s03, s47) = (
            _mm256_castsi256_si128(split),
            _mm256_extracti128_si256::<1>(split),
        );
        let first03 = _mm512_broadcastq_epi64(s03);
        let second03 = _mm512_broadcastq_epi64(_mm_unpackhi_epi64(s03, s03));
        let first47 = _mm512_broadcastq_epi64(s47);
        let second47 = _mm512_broadcastq_epi64(_mm_unpackhi_epi64(s47, s47));
        let (m03, m47) = (
            _mm512_cvtepu8_epi16(_mm512_castsi512_si256(m8)),
            _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(m8)),
        );
        let mins = _mm512_add_epi32(
            _mm512_add_epi32(
                _mm512_madd_epi16(m03, first03),
                _mm512_madd_epi16(m03, second03),
            ),
            _mm512_add_epi32(
                _mm512_madd_epi16(m47, first47),
                _mm512_madd_epi16(m47, second47),
            ),
        );
        // The activation's values, eight columns to a word.
        let x8 = bytemuck::cast_ref::<_, [[u8; 8]; 32]>(&xb.qs);
        // Chunk `c` (sub-blocks `2c` and `2c + 1`): words `4(c % 2)..` of
        // half `c / 2`. Four calls, not a loop over `c`: as a loop the
        // compiler kept it rolled, indexing the halves on the stack (Q5_K
        // packed rows in L2 36 to 29 GB/s on an AMD Zen 4).
        let chunk =
            |t: &[__m512i; 8], k: usize| [t[4 * k], t[4 * k + 1], t[4 * k + 2], t[4 * k + 3]];
        let i0 = k4_chunk8::<FIFTH>(
            chunk(&t0, 0),
            &fifth,
            0,
            x8,
            spread_scale(&sc, 0),
            spread_scale(&sc, 1),
        );
        let i1 = k4_chunk8::<FIFTH>(
            chunk(&t0, 1),
            &fifth,
            1,
            x8,
            spread_scale(&sc, 2),
            spread_scale(&sc, 3),
        );
        let i2 = k4_chunk8::<FIFTH>(
            chunk(&t1, 0),
            &fifth,
            2,
            x8,
            spread_scale(&sc, 4),
            spread_scale(&sc, 5),
        );
        let i3 = k4_chunk8::<FIFTH>(
            chunk(&t1, 1),
            &fifth,
            3,
            x8,
            spread_scale(&sc, 6),
            spread_scale(&sc, 7),
        );
        let lo = _mm512_add_epi32(_mm512_add_epi32(i0.0, i1.0), _mm512_add_epi32(i2.0, i3.0));
        let hi = _mm512_add_epi32(_mm512_add_epi32(i0.1, i1.1), _mm512_add_epi32(i2.1, i3.1));
        // Without fifth bits the high halves' sum is sixteen times theirs
        // (see `k4_chunk8`): an exact multiple, divided back exactly.
        let hi = if FIFTH {
            hi
        } else {
            _mm512_srai_epi32::<4>(hi)
        };
        let isum = _mm512_add_epi32(lo, hi);
        let dx = _mm256_set1_ps(xb.d);
        let isum = _mm256_cvtepi32_ps(pair_sums(isum));
        let msum = _mm256_cvtepi32_ps(pair_sums(mins));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), isum, acc);
        acc_min = _mm256_sub_ps(acc_min, _mm256_mul_ps(_mm256_mul_ps(dmin, dx), msum));
    }
    bytemuck::cast(_mm256_add_ps(acc, acc_min))
}

/// One block of eight rows as [`k4_rows8_dot`] takes it: the heads, the
/// two halves of the nibbles and the fifth bits (zero for Q4_K).
type K4Regs = ([__m512i; 2], [[__m512i; 8]; 2], [__m512i; 4]);

/// [`k4_rows8_dot`]'s registers from eight rows' blocks in GGML's
/// layout: the heads gathered four to a register, the nibbles transposed
/// (48 shuffles; a packed block, [`BlockQ4Kx8`], already holds them so).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn rows8_registers(
    heads: [&[u8; 16]; 8],
    qs: [&[u8; 128]; 8],
) -> ([__m512i; 2], [[__m512i; 8]; 2]) {
    let ha = four_lanes([heads[0], heads[1], heads[2], heads[3]]);
    let hb = four_lanes([heads[4], heads[5], heads[6], heads[7]]);
    // The nibbles, 64 bytes (chunks 2h and 2h + 1) of each row at a time.
    let mut halves = [[_mm512_setzero_si512(); 8]; 2];
    for (h, half) in halves.iter_mut().enumerate() {
        let mut rows = [_mm512_setzero_si512(); 8];
        for (row, q) in rows.iter_mut().zip(qs) {
            *row = bytemuck::cast(q.as_chunks::<64>().0[h]);
        }
        *half = transpose_words(rows);
    }
    ([ha, hb], halves)
}

/// The fifth-bit registers [`k4_rows8_dot`] takes, from eight Q5_K rows'
/// blocks in GGML's layout (a packed block, [`BlockQ5Kx8`], holds them so).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn fifth_registers(qh: [&[u8; 32]; 8]) -> [__m512i; 4] {
    let rows = qh.map(|q| _mm512_castsi256_si512(bytemuck::cast(*q)));
    let t = transpose_words(rows);
    [t[0], t[1], t[2], t[3]]
}

/// How far ahead the eight-row Q4_K/Q5_K decode products ask for their
/// weights where they ask for them in L2 ([`weights_to_l2`](super::weights_to_l2)):
/// 20 KiB, whatever the row length (elsewhere two groups of eight rows).
///
/// Measured once [`k4_rows8_dot`] kept its block in registers and ran
/// 40 GB/s in L2: two groups of 1,024-column rows (9 KiB of Q4_K, 11 of
/// Q5_K) left Q5_K at 0.68-0.81 of the probe's speed on an AMD EPYC (Zen 4)
/// VM (`STREAM_TYPES=q4_kp,q5_kp cargo bench --bench stream`, alternated
/// runs), 16 KiB 0.84-0.89, 20 KiB 0.92-0.95, 24 KiB 0.91-0.95; Q4_K
/// 0.91-0.97 at 20 KiB, the same at 1,024 and 3,072 columns, and 0.87-0.93
/// at 24 KiB.
pub(super) const K_ROWS8_AHEAD_L2: usize = 20 << 10;

/// Asks for the slice of the group of eight rows after next (the rows two
/// groups after `w`'s; [`K_ROWS8_AHEAD_L2`] bytes on where the lines go
/// to L2) that matches block `b` of `nb`: a decode product's
/// rows are consecutive, so that group is one contiguous span of eight
/// rows' bytes, and over a group's `nb` blocks its span is asked for once,
/// line by line in address order, each line once (about 18 requests per
/// block of Q4_K rows). A hint only: the same bits with or without it.
///
/// Asking instead for each row's block `b` in the group after next (four
/// lines per row and block, many of them twice) streamed Q4_K_M's decode
/// products at 36-40 GB/s on two threads of an AMD EPYC (Zen 5) VM
/// (`inferno bench --kernels --model`, six runs in two orders), against
/// 36-48 this way; Q5_K_M 35-39 against 40-45; one thread unchanged
/// (28-36). The plain loop matters: the same lines asked for by a
/// `step_by` loop, which the compiler unrolled into bursts of eight, gave
/// no gain. (On an Intel Xeon with 1024-column Q4_K rows, one group ahead
/// or 4 KiB streamed 3-5% slower than two groups, and no prefetch 40%
/// slower.)
///
/// On an AMD Zen 4 the lines are asked for in L2 (`prefetcht2`) instead
/// of L1 ([`weights_to_l2`](super::weights_to_l2)).
#[inline]
fn prefetch_rows8<B>(w: [&[B]; 8], b: usize, to_l2: bool) {
    let row = core::mem::size_of_val(w[0]);
    let (span, nb) = (8 * row, w[0].len().max(1));
    let ahead = if to_l2 { K_ROWS8_AHEAD_L2 } else { 16 * row };
    let (lo, hi) = (b * span / nb, (b + 1) * span / nb);
    let mut line = lo & !63;
    while line < hi {
        if to_l2 {
            crate::unsafe_core::prefetch::prefetch_read_l2(w[0], ahead + line);
        } else {
            crate::unsafe_core::prefetch::prefetch_read(w[0], ahead + line);
        }
        line += 64;
    }
}

/// `[dot_q4_k(w[0], x), .., dot_q4_k(w[7], x)]`, bit for bit (NaN payloads
/// aside): eight Q4_K rows against one activation (see
/// [`k4_rows8_dot`]).
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q4_k_rows8(w: [&[BlockQ4K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "dot_q4_k_rows8: block counts differ");
    }
    let to_l2 = super::weights_to_l2();
    k4_rows8_dot::<false>(x, |b| {
        prefetch_rows8(w, b, to_l2);
        let heads = core::array::from_fn(|r| &bytemuck::cast_ref::<_, [[u8; 16]; 9]>(&w[r][b])[0]);
        let qs = core::array::from_fn(|r| &w[r][b].qs);
        let (h, t) = rows8_registers(heads, qs);
        (h, t, [_mm512_setzero_si512(); 4])
    })
}

/// [`dot_q4_k_rows8`] for Q5_K rows: `dot_q5_k` of each, bit for bit.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q5_k_rows8(w: [&[BlockQ5K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
    for wr in w {
        assert_eq!(wr.len(), x.len(), "dot_q5_k_rows8: block counts differ");
    }
    let to_l2 = super::weights_to_l2();
    k4_rows8_dot::<true>(x, |b| {
        prefetch_rows8(w, b, to_l2);
        let heads = core::array::from_fn(|r| &bytemuck::cast_ref::<_, [[u8; 16]; 11]>(&w[r][b])[0]);
        let qs = core::array::from_fn(|r| &w[r][b].qs);
        let qh = core::array::from_fn(|r| &w[r][b].qh);
        let (h, t) = rows8_registers(heads, qs);
        (h, t, fifth_registers(qh))
    })
}

/// [`dot_q4_k_rows8`] of eight rows packed ([`BlockQ4Kx8`]): each row's
/// `dot_q4_k`, bit for bit (NaN payloads aside). A packed block is the
/// registers [`k4_rows8_dot`] takes, loaded as they are, and a group's
/// blocks lie in order, so a product reads its matrix front to back; the
/// hints ask for the group after next, or [`K_ROWS8_AHEAD_L2`] bytes on
/// where they go to L2, [`prefetch_rows8`]'s distances.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q4_k_packed8(w: &[BlockQ4Kx8], x: &[BlockQ8K]) -> [f32; 8] {
    packed8::<_, false>(w, x, |b| {
        let heads: &[[u8; 64]; 2] = bytemuck::cast_ref(&b.heads);
        let qs: &[[u8; 64]; 16] = bytemuck::cast_ref(&b.qs);
        (*heads, *qs, None)
    })
}

/// [`dot_q4_k_packed8`] for Q5_K rows ([`BlockQ5Kx8`]): each row's
/// `dot_q5_k`, bit for bit.
///
/// # Panics
///
/// If `w.len() != x.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn dot_q5_k_packed8(w: &[BlockQ5Kx8], x: &[BlockQ8K]) -> [f32; 8] {
    packed8::<_, true>(w, x, |b| {
        let heads: &[[u8; 64]; 2] = bytemuck::cast_ref(&b.heads);
        let qs: &[[u8; 64]; 16] = bytemuck::cast_ref(&b.qs);
        let qh: &[[u8; 64]; 4] = bytemuck::cast_ref(&b.qh);
        (*heads, *qs, Some(*qh))
    })
}

/// The loop of [`dot_q4_k_packed8`] and [`dot_q5_k_packed8`]: `parts`
/// gives a packed block's heads, nibbles and (Q5_K) fifth bits as 64-byte
/// registers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn packed8<P, const FIFTH: bool>(
    w: &[P],
    x: &[BlockQ8K],
    parts: impl Fn(&P) -> ([[u8; 64]; 2], [[u8; 64]; 16], Option<[[u8; 64]; 4]>),
) -> [f32; 8] {
    assert_eq!(w.len(), x.len(), "packed dot: block counts differ");
    let block = core::mem::size_of::<P>();
    let to_l2 = super::weights_to_l2();
    let ahead = if to_l2 {
        K_ROWS8_AHEAD_L2
    } else {
        2 * core::mem::size_of_val(w)
    };
    k4_rows8_dot::<FIFTH>(x, |b| {
        let wb = &w[b];
        let mut line = (ahead + b * block) & !63;
        while line < ahead + (b + 1) * block {
            if to_l2 {
                crate::unsafe_core::prefetch::prefetch_read_l2(w, line);
            } else {
                crate::unsafe_core::prefetch::prefetch_read(w, line);
            }
            line += 64;
        }
        let (heads, qs, qh) = parts(wb);
        let h = heads.map(bytemuck::cast::<_, __m512i>);
        let t = core::array::from_fn(|half| {
            core::array::from_fn(|u| bytemuck::cast::<_, __m512i>(qs[8 * half + u]))
        });
        let fifth = match qh {
            Some(qh) => qh.map(bytemuck::cast::<_, __m512i>),
            None => [_mm512_setzero_si512(); 4],
        };
        (h, t, fifth)
    })
}

/// `out.extend(row.iter().map(f))`: a GEMM's unpacking of a weight row
/// (`f` one of `quant::kgroup`'s constructors, inlined here) compiled with
/// this instruction set, so its byte loops vectorize at this width. The
/// same levels as the portable build's: the same code.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn unpack_row<B, L>(row: &[B], out: &mut Vec<L>, f: impl Fn(&B) -> L) {
    // A plain loop, not `extend`: the iterator's own fold was compiled on
    // its own, for the baseline instruction set.
    out.reserve(row.len());
    for b in row {
        out.push(f(b));
    }
}

/// `out[i] = quantize_block_q8_k(&x[i])`, byte for byte, sixteen values
/// to a register: the portable quantizer's operations
/// (`quant::q8_k::quantize_block_q8_k`) on every lane, in the same order.
///
/// - The largest magnitude: `vmaxps` of each `|v|` with the running lane
///   (it keeps the lane when `v` is NaN, as `f32::max` ignores a NaN),
///   then the lanes' largest; the order of a maximum of non-NaN values
///   does not change it.
/// - The first value of that magnitude: the first lane of the first
///   register whose compare is set, sign included.
/// - Each value's `nearest_int(iscale * v)`: a multiply, then an add of
///   the magic constant (not fused), its low 23 bits less `2^22`, the
///   minimum with 127 and the low byte, as `as i8`.
/// - Each run of sixteen's sum: one register's lanes, the sixteen
///   registers summed together ([`sum_lanes16`]).
///
/// The compiled portable code took about 250 ns a block on an AMD Zen 4
/// core, this about 60. A Q5_K_M Qwen3-0.6B's `quantize` (`inferno bench
/// --trace`, one thread, two alternated rounds) fell from 21.9-22.3 to
/// 9.9-10.6 ms of a 128-token prefill, and from 0.18 to 0.08 ms of a
/// decode step (AVX2's, `INFERNO_KERNEL=avx2`: 20.5-21.5 to 13.2-13.5 ms
/// and 0.17-0.19 to 0.10-0.14).
///
/// # Panics
///
/// If `x.len() != out.len()`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
pub(crate) fn quantize_q8_k(x: &[[f32; crate::quant::QK_K]], out: &mut [BlockQ8K]) {
    assert_eq!(x.len(), out.len(), "quantize_q8_k: block counts differ");
    for (o, c) in out.iter_mut().zip(x) {
        quantize_block_q8_k(c, o);
    }
}

/// One block of [`quantize_q8_k`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn quantize_block_q8_k(x: &[f32; crate::quant::QK_K], out: &mut BlockQ8K) {
    let (c16, _) = x.as_chunks::<16>();
    let v: [__m512; 16] = core::array::from_fn(|i| bytemuck::cast(c16[i]));
    let mut lanes = _mm512_setzero_ps();
    for &vi in &v {
        lanes = _mm512_max_ps(_mm512_abs_ps(vi), lanes);
    }
    // No lane is NaN (nor -0.0), so the lanes' largest is the portable
    // fold's whatever the order.
    let amax = _mm512_reduce_max_ps(lanes);
    if amax == 0.0 {
        *out = bytemuck::Zeroable::zeroed();
        return;
    }
    let target = _mm512_set1_ps(amax);
    let mut max = amax;
    for (&vi, c) in v.iter().zip(c16) {
        let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(vi), target);
        if hit != 0 {
            max = c[hit.trailing_zeros() as usize];
            break;
        }
    }
    let iscale = -127.0 / max;
    let scale = _mm512_set1_ps(iscale);
    let magic = _mm512_set1_ps(12_582_912.0);
    let mantissa = _mm512_set1_epi32(0x007f_ffff);
    let half = _mm512_set1_epi32(0x0040_0000);
    let top = _mm512_set1_epi32(127);
    // Each level as the portable `as i8` leaves it (its low byte, sign
    // extended: only a block whose scale overflowed has levels outside
    // `-128..=127`), sixteen to a register.
    let levels: [__m512i; 16] = core::array::from_fn(|i| {
        let shifted = _mm512_add_ps(_mm512_mul_ps(scale, v[i]), magic);
        let n = _mm512_sub_epi32(
            _mm512_and_si512(_mm512_castps_si512(shifted), mantissa),
            half,
        );
        _mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(_mm512_min_epi32(n, top)))
    });
    let (qs, _) = out.qs.as_chunks_mut::<16>();
    for (q, &n) in qs.iter_mut().zip(&levels) {
        *q = bytemuck::cast(_mm512_cvtepi32_epi8(n));
    }
    // Each run of sixteen's sum (at most 16 * 128 in magnitude: fits an
    // `i16`), all sixteen by a transpose of adds.
    let sums = sum_lanes16(levels);
    out.bsums = bytemuck::cast(_mm512_cvtepi32_epi16(sums));
    out.d = 1.0 / iscale;
}

/// Lane `r` of the result: the sum of register `r`'s sixteen `i32` lanes
/// (wrapping), for the sixteen registers at once: adds of pairs
/// interleaved within 128-bit lanes, then across them (15 adds and 30
/// shuffles where a reduction each takes 16 of each).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")]
fn sum_lanes16(r: [__m512i; 16]) -> __m512i {
    // Per 128-bit lane of pair `p`: [a0 + a2, b0 + b2, a1 + a3, b1 + b3].
    let pairs: [__m512i; 8] = core::array::from_fn(|p| {
        let (a, b) = (r[2 * p], r[2 * p + 1]);
        _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b))
    });
    // Per 128-bit lane of quad `q`: the four registers' sums over it.
    let quads: [__m512i; 4] = core::array::from_fn(|q| {
        let (ab, cd) = (pairs[2 * q], pairs[2 * q + 1]);
        _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd))
    });
    // Across 128-bit lanes: [u0 + u1, u2 + u3, w0 + w1, w2 + w3], twice.
    let across = |u: __m512i, w: __m512i| {
        _mm512_add_epi32(
            _mm512_shuffle_i32x4::<0b10_00_10_00>(u, w),
            _mm512_shuffle_i32x4::<0b11_01_11_01>(u, w),
        )
    };
    across(across(quads[0], quads[1]), across(quads[2], quads[3]))
}
