//! Q6_K: 256 weights in 6 bits each, sixteen sub-blocks of 16 with a
//! signed 8-bit scale each, under one f16 super-scale (GGML's
//! `block_q6_K`); its reference quantizer, dequantization and the scalar
//! dot product with [`BlockQ8K`] activations.

use bytemuck::{Pod, Zeroable};

use super::kcommon::{
    check_blocks, check_output, f16_le_to_f32, f32_to_f16_le, make_qx_quants_rmse1, nearest_int,
    whole_blocks, GROUP_MAX_EPS, QK_K,
};
use super::q8_k::BlockQ8K;
use super::quantize::QuantError;

/// One Q6_K super-block: 256 weights of 6 bits, symmetric around 32.
///
/// Weight `i` in sub-block `j = i / 16` is `d * scales[j] * (q_i - 32)`.
/// Within each half of 128 weights (`ql` by 64 bytes, `qh` by 32), byte
/// `l` of `ql` holds weights `l` (low nibble) and `l + 64` (high), byte
/// `l + 32` weights `l + 32` and `l + 96`, and `qh[l]` the top two bits of
/// weights `l`, `l + 32`, `l + 64` and `l + 96` (bits 0-1, 2-3, 4-5, 6-7).
/// 210 bytes with alignment 1, castable from the bytes of a GGUF tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ6K {
    /// The low four bits, as nibbles.
    pub ql: [u8; QK_K / 2],
    /// The top two bits, four weights a byte.
    pub qh: [u8; QK_K / 4],
    /// The sixteen sub-block scales.
    pub scales: [i8; QK_K / 16],
    /// The super-scale, little-endian f16 bytes.
    pub d: [u8; 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ6K>() == 210);
const _: () = assert!(core::mem::align_of::<BlockQ6K>() == 1);

impl Default for BlockQ6K {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl BlockQ6K {
    /// `d` widened (exactly) to f32.
    #[inline(always)]
    pub fn d_f32(&self) -> f32 {
        f16_le_to_f32(self.d)
    }

    /// The 256 weights as signed levels `q - 32` (`-32..=31`), in order.
    #[inline(always)]
    pub fn levels(&self) -> [i8; QK_K] {
        let mut out = [0i8; QK_K];
        let (halves, _) = out.as_chunks_mut::<128>();
        let (ql, _) = self.ql.as_chunks::<64>();
        let (qh, _) = self.qh.as_chunks::<32>();
        for ((o, ql), qh) in halves.iter_mut().zip(ql).zip(qh) {
            for (l, &h) in qh.iter().enumerate() {
                let (a, b) = (ql[l], ql[l + 32]);
                o[l] = ((a & 0xf) | ((h & 3) << 4)) as i8 - 32;
                o[l + 32] = ((b & 0xf) | (((h >> 2) & 3) << 4)) as i8 - 32;
                o[l + 64] = ((a >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                o[l + 96] = ((b >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        out
    }
}

/// Quantizes one super-block as GGML's `quantize_row_q6_K_ref` (no
/// importance matrix).
///
/// Each sub-block of 16 gets a scale from GGML's `make_qx_quants` (values
/// weighted by their squares, 19 candidate scales); the scales are
/// quantized to 8 bits against the one of largest magnitude, which maps
/// to -128, and the weights requantized against the rounded scales. A
/// block whose scales are all below `1e-15` is all zero bytes.
pub fn quantize_block_q6_k(x: &[f32; QK_K]) -> BlockQ6K {
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    let (xs, _) = x.as_chunks::<16>();
    let (ls, _) = levels.as_chunks_mut::<16>();
    for ((s, xb), lb) in scales.iter_mut().zip(xs).zip(ls.iter_mut()) {
        *s = make_qx_quants_rmse1(xb, 32, lb);
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = *s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        return BlockQ6K::zeroed();
    }
    let iscale = -128.0 / max_scale;
    let mut block = BlockQ6K {
        d: f32_to_f16_le(1.0 / iscale),
        // C stores the int into an int8_t: modulo 256 (only -128 wraps
        // here, and only for non-finite input).
        scales: scales.map(|s| nearest_int(iscale * s).min(127) as i8),
        ..BlockQ6K::zeroed()
    };
    let d = block.d_f32();
    let (ls, _) = levels.as_chunks_mut::<16>();
    for ((lb, xb), &sc) in ls.iter_mut().zip(xs).zip(&block.scales) {
        let dj = d * f32::from(sc);
        if dj == 0.0 {
            continue;
        }
        for (l, &v) in lb.iter_mut().zip(xb) {
            *l = (nearest_int(v / dj).clamp(-32, 31) + 32) as u8;
        }
    }
    let (ql, _) = block.ql.as_chunks_mut::<64>();
    let (qh, _) = block.qh.as_chunks_mut::<32>();
    let (lh, _) = levels.as_chunks::<128>();
    for ((ql, qh), lv) in ql.iter_mut().zip(qh.iter_mut()).zip(lh) {
        for l in 0..32 {
            let (q1, q2, q3, q4) = (lv[l], lv[l + 32], lv[l + 64], lv[l + 96]);
            ql[l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
            ql[l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
            qh[l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    block
}

/// Quantizes `x` into `out`, one super-block per 256 values, byte for byte
/// as GGML's `quantize_row_q6_K_ref`.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 256`.
pub fn quantize_row_q6_k_into(x: &[f32], out: &mut [BlockQ6K]) -> Result<(), QuantError> {
    check_output(whole_blocks(x.len(), QK_K)?, out.len())?;
    let (chunks, _) = x.as_chunks::<QK_K>();
    for (b, c) in out.iter_mut().zip(chunks) {
        *b = quantize_block_q6_k(c);
    }
    Ok(())
}

/// [`quantize_row_q6_k_into`] into a new vector.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256.
pub fn quantize_row_q6_k(x: &[f32]) -> Result<Vec<BlockQ6K>, QuantError> {
    let mut out = vec![BlockQ6K::zeroed(); whole_blocks(x.len(), QK_K)?];
    quantize_row_q6_k_into(x, &mut out)?;
    Ok(out)
}

/// Expands Q6_K blocks to f32 as GGML's `dequantize_row_q6_K`, bit for
/// bit: `(d * scale) * (q - 32)`, each product rounded to f32.
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 256 * blocks.len()`.
pub fn dequantize_row_q6_k_into(blocks: &[BlockQ6K], out: &mut [f32]) -> Result<(), QuantError> {
    check_output(blocks.len() * QK_K, out.len())?;
    let (chunks, _) = out.as_chunks_mut::<QK_K>();
    for (chunk, b) in chunks.iter_mut().zip(blocks) {
        let d = b.d_f32();
        let levels = b.levels();
        let (outs, _) = chunk.as_chunks_mut::<16>();
        let (ls, _) = levels.as_chunks::<16>();
        for ((o, l), &sc) in outs.iter_mut().zip(ls).zip(&b.scales) {
            let ds = d * f32::from(sc);
            for (y, &q) in o.iter_mut().zip(l) {
                *y = ds * f32::from(q);
            }
        }
    }
    Ok(())
}

/// [`dequantize_row_q6_k_into`] into a new vector.
pub fn dequantize_row_q6_k(blocks: &[BlockQ6K]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK_K];
    if let Err(e) = dequantize_row_q6_k_into(blocks, &mut out) {
        unreachable!("buffer sized from the input: {e}");
    }
    out
}

/// The eight lane sums of `scale_(g/2) * q[8g + l] * x[8g + l]` over the 32
/// groups `g` of eight (GGML's `aux32` for Q6_K). Exact: at most
/// `32 * 128 * 32 * 128 < 2^24` in magnitude, whatever the bytes.
#[inline(always)]
pub(crate) fn lane_sums_q6(levels: &[i8; QK_K], scales: &[i8; 16], x: &[i8; QK_K]) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    let (ls, _) = levels.as_chunks::<16>();
    let (xs, _) = x.as_chunks::<16>();
    for ((l, q8), &sc) in ls.iter().zip(xs).zip(scales) {
        let scale = i32::from(sc);
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

/// Dot product of a Q6_K weight row with Q8_K activations, as GGML's
/// scalar `ggml_vec_dot_q6_K_q8_K_generic`: per block the integer lane
/// sums and `sums[l] += (d * d_x) * aux32[l]` in eight f32 lanes, added
/// together in lane order at the end. (As for
/// [`dot_q4_k_q8_k`](super::dot_q4_k_q8_k), GGML's FMA-capable builds fuse
/// the lane update; this kernel rounds the product first.)
///
/// # Errors
///
/// [`QuantError::BlockCountMismatch`] if the rows hold different numbers
/// of blocks.
pub fn dot_q6_k_q8_k(w: &[BlockQ6K], x: &[BlockQ8K]) -> Result<f32, QuantError> {
    check_blocks(w.len(), x.len())?;
    Ok(dot_q6_k_blocks(w, x))
}

/// The scalar kernel of [`dot_q6_k_q8_k`], blocks paired in order (the
/// caller checks the counts; extra blocks on either side are ignored).
pub(crate) fn dot_q6_k_blocks(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    for (wb, xb) in w.iter().zip(x) {
        let aux32 = lane_sums_q6(&wb.levels(), &wb.scales, &xb.qs);
        let d = wb.d_f32() * xb.d;
        for (s, &a) in sums.iter_mut().zip(&aux32) {
            *s += d * a as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

/// [`dot_q6_k_blocks`] of one weight row with four activation rows, each
/// result bit for bit that call's (the same operations in the same order
/// per row), decoding each weight block's levels once for the four rows.
///
/// # Panics
///
/// If any `x[i].len() != w.len()`.
pub(crate) fn dot_q6_k_blocks_x4(w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    for xi in x {
        assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
    }
    let mut sums = [[0.0f32; 8]; 4];
    for (b, wb) in w.iter().enumerate() {
        let levels = wb.levels();
        for i in 0..4 {
            let xb = &x[i][b];
            let aux32 = lane_sums_q6(&levels, &wb.scales, &xb.qs);
            let d = wb.d_f32() * xb.d;
            for (s, &a) in sums[i].iter_mut().zip(&aux32) {
                *s += d * a as f32;
            }
        }
    }
    sums.map(|row| {
        let mut sumf = 0.0f32;
        for s in row {
            sumf += s;
        }
        sumf
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn levels_follow_ggml_layout() {
        let mut b = BlockQ6K {
            d: f16::from_f32(0.5).to_le_bytes(),
            scales: [2; 16],
            ..BlockQ6K::zeroed()
        };
        b.ql[0] = 0x5f; // weight 0 low bits 15, weight 64 low bits 5
        b.ql[32] = 0x01; // weight 32 low bits 1
        b.qh[0] = 0b1110_0111; // weight 0: 3, 32: 1, 64: 2, 96: 3
        b.ql[64 + 31] = 0xa0; // second half: weight 128 + 64 + 31 low bits 10
        b.qh[32 + 31] = 0b0001_0000; // its top bits: 1
        let l = b.levels();
        assert_eq!(l[0], 63 - 32);
        assert_eq!(l[32], 17 - 32);
        assert_eq!(l[64], 37 - 32);
        assert_eq!(l[96], 48 - 32);
        assert_eq!(l[223], 26 - 32);
        assert_eq!(l[1], -32);
        let y = dequantize_row_q6_k(&[b]);
        assert_eq!((y[0], y[223], y[1]), (31.0, -6.0, -32.0));
    }

    #[test]
    fn dot_of_hand_built_blocks() {
        let mut w = BlockQ6K {
            d: f16::from_f32(0.25).to_le_bytes(),
            ..BlockQ6K::zeroed()
        };
        w.scales[0] = -4;
        w.scales[15] = 8;
        // All levels are -32 (zero bytes): only sub-blocks 0 and 15 count.
        let mut qs = [0i8; QK_K];
        qs[3] = 2; // sub-block 0: 0.25 * -4 * -32 = 32 per unit
        qs[250] = -1; // sub-block 15: 0.25 * 8 * -32 = -64 per unit
        qs[100] = 100; // scale 0: contributes nothing
        let x = BlockQ8K {
            d: 0.5,
            qs,
            bsums: BlockQ8K::sums_of(&qs),
        };
        // 32 * 1 + (-64) * (-0.5) = 64.
        assert_eq!(dot_q6_k_q8_k(&[w], &[x]), Ok(64.0));
    }

    #[test]
    fn quantizes_zeros_to_zero_bytes() {
        assert_eq!(quantize_block_q6_k(&[0.0; QK_K]), BlockQ6K::zeroed());
        assert_eq!(quantize_block_q6_k(&[1e-20; QK_K]), BlockQ6K::zeroed());
    }
}
