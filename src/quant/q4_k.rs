//! Q4_K: 256 weights in 4 bits each, in eight sub-blocks of 32 with a
//! 6-bit scale and a 6-bit min each, under two f16 super-scales (GGML's
//! `block_q4_K`); its reference quantizer, dequantization and the scalar
//! dot product with [`BlockQ8K`] activations.

use bytemuck::{Pod, Zeroable};

use super::kcommon::{
    check_blocks, check_output, f16_le_to_f32, f32_to_f16_le, make_qkx2_quants, nearest_int,
    pack_scale_min_k4, scale_min_k4, whole_blocks, QK_K,
};
use super::q8_k::BlockQ8K;
use super::quantize::QuantError;

/// One Q4_K super-block: 256 weights of 4 bits.
///
/// Sub-block `j` (weights `32j..32j+32`) has a 6-bit scale `sc_j` and min
/// `m_j` packed into `scales`, and weight `i` of it is
/// `d * sc_j * q_i - dmin * m_j`. The nibbles are laid out by 64: byte
/// `32k + l` of `qs` holds weight `64k + l` in its low nibble and weight
/// `64k + 32 + l` in its high nibble. 144 bytes with alignment 1, so the
/// bytes of a GGUF tensor cast to `&[BlockQ4K]` at any address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4K {
    /// Super-scale of the sub-block scales, little-endian f16 bytes.
    pub d: [u8; 2],
    /// Super-scale of the sub-block mins, little-endian f16 bytes.
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed (see
    /// [`BlockQ4K::scale_min`]).
    pub scales: [u8; 12],
    /// 256 weights as nibbles.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ4K>() == 144);
const _: () = assert!(core::mem::align_of::<BlockQ4K>() == 1);

impl Default for BlockQ4K {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl BlockQ4K {
    /// `d` widened (exactly) to f32.
    #[inline(always)]
    pub fn d_f32(&self) -> f32 {
        f16_le_to_f32(self.d)
    }

    /// `dmin` widened (exactly) to f32.
    #[inline(always)]
    pub fn dmin_f32(&self) -> f32 {
        f16_le_to_f32(self.dmin)
    }

    /// The 6-bit scale and min of sub-block `j` (`0..8`).
    ///
    /// # Panics
    ///
    /// If `j >= 8`.
    #[inline(always)]
    pub fn scale_min(&self, j: usize) -> (u8, u8) {
        assert!(j < 8, "Q4_K has 8 sub-blocks");
        scale_min_k4(j, &self.scales)
    }

    /// The 256 weights' 4-bit levels (`0..=15`), in order.
    #[inline(always)]
    pub fn levels(&self) -> [u8; QK_K] {
        let mut out = [0u8; QK_K];
        let (outs, _) = out.as_chunks_mut::<64>();
        let (qs, _) = self.qs.as_chunks::<32>();
        for (o, q) in outs.iter_mut().zip(qs) {
            let (lo, hi) = o.split_at_mut(32);
            for ((l, h), &b) in lo.iter_mut().zip(hi).zip(q) {
                *l = b & 0xf;
                *h = b >> 4;
            }
        }
        out
    }
}

/// Quantizes one super-block as GGML's `quantize_row_q4_K_ref` (no
/// importance matrix).
///
/// Each sub-block of 32 gets a scale and min from GGML's
/// `make_qkx2_quants` (21 candidate scales, each value weighted by the
/// sub-block's RMS plus its own magnitude); the eight scales and mins are
/// then quantized to 6 bits against the largest of each, and the weights
/// requantized against the rounded scales.
pub fn quantize_block_q4_k(x: &[f32; QK_K]) -> BlockQ4K {
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    let (xs, _) = x.as_chunks::<32>();
    let (ls_all, _) = levels.as_chunks_mut::<32>();
    for (j, (xb, lb)) in xs.iter().zip(ls_all.iter_mut()).enumerate() {
        let weights = sub_block_weights(xb);
        let (scale, min) = make_qkx2_quants(xb, &weights, 15, -1.0, 0.1, 20, lb);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let (packed, d, dmin) = six_bit_scales(&scales, &mins, max_scale, max_min);
    let mut block = BlockQ4K {
        d,
        dmin,
        scales: packed,
        qs: [0; QK_K / 2],
    };
    requantize(x, &block.scales, block.d, block.dmin, 15, &mut levels);
    let (qs, _) = block.qs.as_chunks_mut::<32>();
    let (ls, _) = levels.as_chunks::<64>();
    for (q, l) in qs.iter_mut().zip(ls) {
        for (k, b) in q.iter_mut().enumerate() {
            *b = l[k] | (l[k + 32] << 4);
        }
    }
    block
}

/// The weights GGML's Q4_K and Q5_K reference quantizers give the values
/// of a sub-block: its RMS plus each value's magnitude.
pub(crate) fn sub_block_weights(xb: &[f32; 32]) -> [f32; 32] {
    let mut sum_x2 = 0.0f32;
    for &v in xb {
        sum_x2 += v * v;
    }
    let av_x = (sum_x2 / 32.0).sqrt();
    xb.map(|v| av_x + v.abs())
}

/// Quantizes the eight sub-block scales and mins to 6 bits against their
/// maxima (GGML's Q4_K/Q5_K reference): returns the packed bytes and the
/// f16 super-scales `max / 63`.
pub(crate) fn six_bit_scales(
    scales: &[f32; 8],
    mins: &[f32; 8],
    max_scale: f32,
    max_min: f32,
) -> ([u8; 12], [u8; 2], [u8; 2]) {
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    // C stores nearest_int's int into a uint8_t (modulo 256) and then caps
    // it at 63.
    let ls = scales.map(|s| (nearest_int(inv_scale * s) as u8).min(63));
    let lm = mins.map(|m| (nearest_int(inv_min * m) as u8).min(63));
    (
        pack_scale_min_k4(&ls, &lm),
        f32_to_f16_le(max_scale / 63.0),
        f32_to_f16_le(max_min / 63.0),
    )
}

/// Requantizes every sub-block whose rounded scale is nonzero against the
/// stored scale and min: `l = clamp(round((x + dmin * m) / (d * sc)), 0,
/// nmax)`. Sub-blocks whose scale rounds to zero keep the levels the
/// scale search gave them, as in GGML.
pub(crate) fn requantize(
    x: &[f32; QK_K],
    packed: &[u8; 12],
    d: [u8; 2],
    dmin: [u8; 2],
    nmax: i32,
    levels: &mut [u8; QK_K],
) {
    let (xs, _) = x.as_chunks::<32>();
    let (ls, _) = levels.as_chunks_mut::<32>();
    for (j, (xb, lb)) in xs.iter().zip(ls.iter_mut()).enumerate() {
        let (sc, m) = scale_min_k4(j, packed);
        let dj = f16_le_to_f32(d) * f32::from(sc);
        if dj == 0.0 {
            continue;
        }
        let dm = f16_le_to_f32(dmin) * f32::from(m);
        for (l, &v) in lb.iter_mut().zip(xb) {
            *l = nearest_int((v + dm) / dj).clamp(0, nmax) as u8;
        }
    }
}

/// Quantizes `x` into `out`, one super-block per 256 values, byte for byte
/// as GGML's `quantize_row_q4_K_ref`.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 256`.
pub fn quantize_row_q4_k_into(x: &[f32], out: &mut [BlockQ4K]) -> Result<(), QuantError> {
    check_output(whole_blocks(x.len(), QK_K)?, out.len())?;
    let (chunks, _) = x.as_chunks::<QK_K>();
    for (b, c) in out.iter_mut().zip(chunks) {
        *b = quantize_block_q4_k(c);
    }
    Ok(())
}

/// [`quantize_row_q4_k_into`] into a new vector.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256.
pub fn quantize_row_q4_k(x: &[f32]) -> Result<Vec<BlockQ4K>, QuantError> {
    let mut out = vec![BlockQ4K::zeroed(); whole_blocks(x.len(), QK_K)?];
    quantize_row_q4_k_into(x, &mut out)?;
    Ok(out)
}

/// Expands Q4_K blocks to f32 as GGML's `dequantize_row_q4_K`, bit for
/// bit: per sub-block `d1 = d * sc`, `m1 = dmin * m`, then `d1 * q - m1`,
/// each operation rounded to f32 (no fused multiply-add).
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 256 * blocks.len()`.
pub fn dequantize_row_q4_k_into(blocks: &[BlockQ4K], out: &mut [f32]) -> Result<(), QuantError> {
    check_output(blocks.len() * QK_K, out.len())?;
    let (chunks, _) = out.as_chunks_mut::<QK_K>();
    for (chunk, b) in chunks.iter_mut().zip(blocks) {
        let (d, min) = (b.d_f32(), b.dmin_f32());
        let levels = b.levels();
        let (outs, _) = chunk.as_chunks_mut::<32>();
        let (ls, _) = levels.as_chunks::<32>();
        for (j, (o, l)) in outs.iter_mut().zip(ls).enumerate() {
            let (sc, m) = scale_min_k4(j, &b.scales);
            let d1 = d * f32::from(sc);
            let m1 = min * f32::from(m);
            for (y, &q) in o.iter_mut().zip(l) {
                *y = d1 * f32::from(q) - m1;
            }
        }
    }
    Ok(())
}

/// [`dequantize_row_q4_k_into`] into a new vector.
pub fn dequantize_row_q4_k(blocks: &[BlockQ4K]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK_K];
    if let Err(e) = dequantize_row_q4_k_into(blocks, &mut out) {
        unreachable!("buffer sized from the input: {e}");
    }
    out
}

/// The mins' correction of a Q4_K or Q5_K block: `sum_j bsums[j] * m_{j/2}`
/// (each min covers two 16-value sums). At most `16 * 32768 * 63 < 2^25`
/// in magnitude, whatever the bytes.
#[inline(always)]
pub(crate) fn min_correction(scales: &[u8; 12], x: &BlockQ8K) -> i32 {
    let mut sumi = 0i32;
    for (j, &s) in x.bsums.iter().enumerate() {
        sumi += i32::from(s) * i32::from(scale_min_k4(j / 2, scales).1);
    }
    sumi
}

/// The eight lane sums of `sc_(g/4) * q[8g + l] * x[8g + l]` over the 32
/// groups `g` of eight, for lanes `l = 0..8` (GGML's `aux32`), with levels
/// given per sub-block of 32. Exact: at most `32 * 63 * 31 * 128 < 2^23`.
#[inline(always)]
pub(crate) fn lane_sums_by_32(levels: &[u8; QK_K], scales: &[u8; 12], x: &[i8; QK_K]) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    let (ls, _) = levels.as_chunks::<32>();
    let (xs, _) = x.as_chunks::<32>();
    for (j, (l, q8)) in ls.iter().zip(xs).enumerate() {
        let scale = i32::from(scale_min_k4(j, scales).0);
        let (lg, _) = l.as_chunks::<8>();
        let (xg, _) = q8.as_chunks::<8>();
        for (lg, xg) in lg.iter().zip(xg) {
            for (a, (&q, &v)) in aux32.iter_mut().zip(lg.iter().zip(xg)) {
                *a += scale * (i32::from(q) * i32::from(v));
            }
        }
    }
    aux32
}

/// Dot product of a Q4_K weight row with Q8_K activations, as GGML's
/// scalar `ggml_vec_dot_q4_K_q8_K_generic`: per block the integer lane
/// sums, `sums[l] += (d * d_x) * aux32[l]` in eight f32 lanes and
/// `sumf -= (dmin * d_x) * sumi`; the lanes are added to `sumf` at the end.
///
/// Every product is rounded before its sum, as the C source reads. A
/// compiler allowed to contract (GCC's default for GNU C) turns those two
/// updates into fused multiply-adds when the target has them, as in
/// llama.cpp's x86 builds; with just those two fused, this arithmetic
/// gives the C kernel's bits (compared on 200 rows of 4 blocks against
/// llama-cpp-python's `libggml-cpu`), so the difference to such a build is
/// one rounding per block.
///
/// # Errors
///
/// [`QuantError::BlockCountMismatch`] if the rows hold different numbers
/// of blocks.
pub fn dot_q4_k_q8_k(w: &[BlockQ4K], x: &[BlockQ8K]) -> Result<f32, QuantError> {
    check_blocks(w.len(), x.len())?;
    Ok(dot_q4_k_blocks(w, x))
}

/// A K-quant block with sub-block scales and mins packed as Q4_K packs
/// them (Q4_K and Q5_K), so one scalar dot serves both.
pub(crate) trait ScaleMinBlock {
    /// The 256 unsigned levels.
    fn levels(&self) -> [u8; QK_K];
    /// The packed six-bit scales and mins.
    fn scales(&self) -> &[u8; 12];
    /// The super-block scale, widened.
    fn d_f32(&self) -> f32;
    /// The super-block min, widened.
    fn dmin_f32(&self) -> f32;
}

impl ScaleMinBlock for BlockQ4K {
    fn levels(&self) -> [u8; QK_K] {
        BlockQ4K::levels(self)
    }
    fn scales(&self) -> &[u8; 12] {
        &self.scales
    }
    fn d_f32(&self) -> f32 {
        BlockQ4K::d_f32(self)
    }
    fn dmin_f32(&self) -> f32 {
        BlockQ4K::dmin_f32(self)
    }
}

/// The scalar kernel of [`dot_q4_k_q8_k`] (and of Q5_K's), blocks paired
/// in order (the caller checks the counts; extra blocks on either side are
/// ignored).
pub(crate) fn dot_scale_min_blocks<B: ScaleMinBlock>(w: &[B], x: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let aux32 = lane_sums_by_32(&wb.levels(), wb.scales(), &xb.qs);
        let sumi = min_correction(wb.scales(), xb);
        let d = wb.d_f32() * xb.d;
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
        let dmin = wb.dmin_f32() * xb.d;
        sumf -= dmin * sumi as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// [`dot_scale_min_blocks`] of one weight row with four activation rows:
/// four calls, so each result is that call's bits. (Decoding the weight
/// levels once and running the four rows' sums from them measured no
/// faster than four calls on an Intel Xeon: the decoding is a small part
/// of this kernel's work, unlike the SIMD kernels'.)
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
pub(crate) fn dot_scale_min_blocks_x4<B: ScaleMinBlock>(w: &[B], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
    }
    x.map(|xi| dot_scale_min_blocks(w, xi))
}

/// The scalar Q4_K kernel ([`dot_scale_min_blocks`]).
pub(crate) fn dot_q4_k_blocks(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    dot_scale_min_blocks(w, x)
}

/// The scalar four-row Q4_K kernel ([`dot_scale_min_blocks_x4`]).
pub(crate) fn dot_q4_k_blocks_x4(w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_scale_min_blocks_x4(w, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kcommon::pack_scale_min_k4;
    use half::f16;

    fn block(d: f32, dmin: f32, ls: [u8; 8], lm: [u8; 8], qs: [u8; 128]) -> BlockQ4K {
        BlockQ4K {
            d: f16::from_f32(d).to_le_bytes(),
            dmin: f16::from_f32(dmin).to_le_bytes(),
            scales: pack_scale_min_k4(&ls, &lm),
            qs,
        }
    }

    #[test]
    fn dequantizes_hand_built_block() {
        let mut qs = [0u8; 128];
        qs[0] = 0x3f; // weight 0: 15, weight 32: 3
        qs[32] = 0x21; // weight 64: 1, weight 96: 2
        let b = block(
            0.5,
            0.25,
            [1, 2, 3, 4, 63, 6, 7, 8],
            [0, 4, 0, 0, 1, 0, 0, 63],
            qs,
        );
        let y = dequantize_row_q4_k(&[b]);
        assert_eq!(y[0], 0.5 * 15.0); // sub-block 0: scale 1, min 0
        assert_eq!(y[32], 0.5 * 2.0 * 3.0 - 0.25 * 4.0); // scale 2, min 4
        assert_eq!(y[64], 0.5 * 3.0); // scale 3
        assert_eq!(y[96], 0.5 * 4.0 * 2.0); // scale 4
        assert_eq!(y[128], -0.25); // scale 63, min 1, level 0
        assert_eq!(y[255], -0.25 * 63.0); // scale 8, min 63, level 0
    }

    #[test]
    fn dot_of_hand_built_blocks() {
        let mut qs = [0u8; 128];
        qs[0] = 0x02; // weight 0: level 2 in sub-block 0
        let w = block(
            1.0,
            0.5,
            [3, 0, 0, 0, 0, 0, 0, 0],
            [0, 2, 0, 0, 0, 0, 0, 0],
            qs,
        );
        let mut x = BlockQ8K {
            d: 0.25,
            qs: [0; 256],
            bsums: [0; 16],
        };
        x.qs[0] = 10;
        x.qs[40] = -4; // in sub-block 1 (min 2), weight level 0
        x.bsums = BlockQ8K::sums_of(&x.qs);
        // w0 = 1 * 3 * 2 = 6, w40 = -0.5 * 2 = -1: 6 * 2.5 + (-1) * (-1) = 16.
        assert_eq!(dot_q4_k_q8_k(&[w], &[x]), Ok(16.0));
        assert_eq!(
            dot_q4_k_q8_k(&[w], &[]),
            Err(QuantError::BlockCountMismatch {
                weights: 1,
                activations: 0
            })
        );
    }

    #[test]
    fn quantizes_zeros_to_zeros() {
        let b = quantize_block_q4_k(&[0.0; QK_K]);
        assert_eq!(b, BlockQ4K::zeroed());
        assert_eq!(
            quantize_row_q4_k(&[0.0; 255]),
            Err(QuantError::RowNotWholeBlocks {
                len: 255,
                block: 256
            })
        );
    }
}
