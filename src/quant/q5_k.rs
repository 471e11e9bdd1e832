//! Q5_K: Q4_K with a fifth bit per weight (GGML's `block_q5_K`); its
//! reference quantizer, dequantization and the scalar dot product with
//! [`BlockQ8K`] activations.

use bytemuck::{Pod, Zeroable};

use super::kcommon::{
    check_blocks, check_output, f16_le_to_f32, make_qkx2_quants, scale_min_k4, whole_blocks, QK_K,
};
use super::q4_k::{
    dot_scale_min_blocks, dot_scale_min_blocks_x4, requantize, six_bit_scales, sub_block_weights,
    ScaleMinBlock,
};
use super::q8_k::BlockQ8K;
use super::quantize::QuantError;

/// One Q5_K super-block: 256 weights of 5 bits.
///
/// As [`BlockQ4K`](super::BlockQ4K) (same scales, mins and nibble
/// layout), plus `qh`: bit `2k` of `qh[l]` is the fifth bit of weight
/// `64k + l` and bit `2k + 1` that of weight `64k + 32 + l`. 176 bytes
/// with alignment 1, castable from the bytes of a GGUF tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5K {
    /// Super-scale of the sub-block scales, little-endian f16 bytes.
    pub d: [u8; 2],
    /// Super-scale of the sub-block mins, little-endian f16 bytes.
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed as in Q4_K.
    pub scales: [u8; 12],
    /// The fifth bits.
    pub qh: [u8; QK_K / 8],
    /// The low four bits, as nibbles.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ5K>() == 176);
const _: () = assert!(core::mem::align_of::<BlockQ5K>() == 1);

impl Default for BlockQ5K {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl BlockQ5K {
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
        assert!(j < 8, "Q5_K has 8 sub-blocks");
        scale_min_k4(j, &self.scales)
    }

    /// The 256 weights' 5-bit levels (`0..=31`), in order.
    #[inline(always)]
    pub fn levels(&self) -> [u8; QK_K] {
        let mut out = [0u8; QK_K];
        let (outs, _) = out.as_chunks_mut::<64>();
        let (qs, _) = self.qs.as_chunks::<32>();
        for (k, (o, q)) in outs.iter_mut().zip(qs).enumerate() {
            let (lo, hi) = o.split_at_mut(32);
            for (l, ((a, b), &byte)) in lo.iter_mut().zip(hi).zip(q).enumerate() {
                let h = self.qh[l] >> (2 * k);
                *a = (byte & 0xf) | ((h & 1) << 4);
                *b = (byte >> 4) | ((h & 2) << 3);
            }
        }
        out
    }
}

/// Quantizes one super-block as GGML's `quantize_row_q5_K_ref` (no
/// importance matrix): Q4_K's procedure with 5-bit levels and a narrower
/// scale search (16 candidates).
pub fn quantize_block_q5_k(x: &[f32; QK_K]) -> BlockQ5K {
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    let (xs, _) = x.as_chunks::<32>();
    let (ls_all, _) = levels.as_chunks_mut::<32>();
    for (j, (xb, lb)) in xs.iter().zip(ls_all.iter_mut()).enumerate() {
        let weights = sub_block_weights(xb);
        let (scale, min) = make_qkx2_quants(xb, &weights, 31, -0.5, 0.1, 15, lb);
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
    let mut block = BlockQ5K {
        d,
        dmin,
        scales: packed,
        qh: [0; QK_K / 8],
        qs: [0; QK_K / 2],
    };
    requantize(x, &block.scales, block.d, block.dmin, 31, &mut levels);
    let (qs, _) = block.qs.as_chunks_mut::<32>();
    let (ls, _) = levels.as_chunks::<64>();
    for (k, (q, l)) in qs.iter_mut().zip(ls).enumerate() {
        for (j, b) in q.iter_mut().enumerate() {
            let (l1, l2) = (l[j], l[j + 32]);
            block.qh[j] |= ((l1 >> 4) << (2 * k)) | ((l2 >> 4) << (2 * k + 1));
            *b = (l1 & 0xf) | ((l2 & 0xf) << 4);
        }
    }
    block
}

/// Quantizes `x` into `out`, one super-block per 256 values, byte for byte
/// as GGML's `quantize_row_q5_K_ref`.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 256`.
pub fn quantize_row_q5_k_into(x: &[f32], out: &mut [BlockQ5K]) -> Result<(), QuantError> {
    check_output(whole_blocks(x.len(), QK_K)?, out.len())?;
    let (chunks, _) = x.as_chunks::<QK_K>();
    for (b, c) in out.iter_mut().zip(chunks) {
        *b = quantize_block_q5_k(c);
    }
    Ok(())
}

/// [`quantize_row_q5_k_into`] into a new vector.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256.
pub fn quantize_row_q5_k(x: &[f32]) -> Result<Vec<BlockQ5K>, QuantError> {
    let mut out = vec![BlockQ5K::zeroed(); whole_blocks(x.len(), QK_K)?];
    quantize_row_q5_k_into(x, &mut out)?;
    Ok(out)
}

/// Expands Q5_K blocks to f32 as GGML's `dequantize_row_q5_K`, bit for
/// bit: `d1 * q - m1` with `d1 = d * sc`, `m1 = dmin * m`, each operation
/// rounded to f32.
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 256 * blocks.len()`.
pub fn dequantize_row_q5_k_into(blocks: &[BlockQ5K], out: &mut [f32]) -> Result<(), QuantError> {
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

/// [`dequantize_row_q5_k_into`] into a new vector.
pub fn dequantize_row_q5_k(blocks: &[BlockQ5K]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK_K];
    if let Err(e) = dequantize_row_q5_k_into(blocks, &mut out) {
        unreachable!("buffer sized from the input: {e}");
    }
    out
}

/// Dot product of a Q5_K weight row with Q8_K activations, as GGML's
/// scalar `ggml_vec_dot_q5_K_q8_K_generic` (the same float steps as
/// [`dot_q4_k_q8_k`](super::dot_q4_k_q8_k)).
///
/// # Errors
///
/// [`QuantError::BlockCountMismatch`] if the rows hold different numbers
/// of blocks.
pub fn dot_q5_k_q8_k(w: &[BlockQ5K], x: &[BlockQ8K]) -> Result<f32, QuantError> {
    check_blocks(w.len(), x.len())?;
    Ok(dot_q5_k_blocks(w, x))
}

impl ScaleMinBlock for BlockQ5K {
    fn levels(&self) -> [u8; QK_K] {
        BlockQ5K::levels(self)
    }
    fn scales(&self) -> &[u8; 12] {
        &self.scales
    }
    fn d_f32(&self) -> f32 {
        BlockQ5K::d_f32(self)
    }
    fn dmin_f32(&self) -> f32 {
        BlockQ5K::dmin_f32(self)
    }
}

/// The scalar Q5_K kernel: Q4_K's ([`dot_scale_min_blocks`]) on five-bit
/// levels.
pub(crate) fn dot_q5_k_blocks(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    dot_scale_min_blocks(w, x)
}

/// The scalar four-row Q5_K kernel ([`dot_scale_min_blocks_x4`]).
pub(crate) fn dot_q5_k_blocks_x4(w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
    dot_scale_min_blocks_x4(w, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kcommon::pack_scale_min_k4;
    use half::f16;

    #[test]
    fn fifth_bits_land_on_the_right_weights() {
        let mut b = BlockQ5K {
            d: f16::from_f32(1.0).to_le_bytes(),
            dmin: f16::from_f32(0.5).to_le_bytes(),
            scales: pack_scale_min_k4(&[1; 8], &[0, 0, 0, 0, 0, 0, 0, 2]),
            ..BlockQ5K::zeroed()
        };
        b.qs[0] = 0x21; // weights 0 and 32: 1 and 2
        b.qh[0] = 0b0000_0011; // fifth bits of weights 0 and 32
        b.qh[31] = 0b1000_0000; // fifth bit of weight 192 + 32 + 31 = 255
        b.qs[96 + 31] = 0xf0; // weight 255's low bits: 15
        let l = b.levels();
        assert_eq!((l[0], l[32], l[1], l[255]), (17, 18, 0, 31));
        let y = dequantize_row_q5_k(&[b]);
        assert_eq!((y[0], y[32], y[255]), (17.0, 18.0, 31.0 - 1.0));
    }

    #[test]
    fn dot_of_hand_built_blocks() {
        let mut w = BlockQ5K {
            d: f16::from_f32(0.5).to_le_bytes(),
            dmin: f16::from_f32(1.0).to_le_bytes(),
            scales: pack_scale_min_k4(&[2; 8], &[1; 8]),
            ..BlockQ5K::zeroed()
        };
        w.qs[5] = 0x03;
        w.qh[5] = 1; // weight 5: 16 + 3 = 19, value 0.5 * 2 * 19 - 1 = 18
        let mut qs = [0i8; QK_K];
        qs[5] = 3;
        qs[100] = 7; // weight 100: level 0, value -1
        let x = BlockQ8K {
            d: 2.0,
            qs,
            bsums: BlockQ8K::sums_of(&qs),
        };
        // 18 * 6 + (-1) * 14 = 94.
        assert_eq!(dot_q5_k_q8_k(&[w], &[x]), Ok(94.0));
    }
}
