//! Q4_0: 32 weights in 4 bits each around one f16 scale (GGML's
//! `block_q4_0`), its reference quantizer, dequantization and the scalar
//! dot product with Q8_0 activations.

use bytemuck::{Pod, Zeroable};

use super::activation::ActBlock;
use super::block::BlockQ8_0;
use super::kcommon::{check_blocks, check_output, f16_le_to_f32, f32_to_f16_le, whole_blocks};
use super::quantize::QuantError;
use super::QuantizedVector;

/// Number of weights in one Q4_0 block (GGML's `QK4_0`).
pub const QK4_0: usize = 32;

/// One Q4_0 block: 32 weights of 4 bits sharing an f16 scale.
///
/// Weight `j` (for `j < 16`) is `d * ((qs[j] & 0xf) - 8)` and weight
/// `j + 16` is `d * ((qs[j] >> 4) - 8)`: the low nibbles hold the first
/// half of the block, the high nibbles the second. 18 bytes with alignment
/// 1 (the scale is kept as bytes, as in [`BlockQ8_0`]), so the bytes of a
/// GGUF tensor cast to `&[BlockQ4_0]` at any address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// The scale, as raw little-endian f16 bytes.
    pub d: [u8; 2],
    /// 32 weights as nibbles, offset by 8.
    pub qs: [u8; QK4_0 / 2],
}

const _: () = assert!(core::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(core::mem::align_of::<BlockQ4_0>() == 1);

impl BlockQ4_0 {
    /// The scale `d` widened (exactly) to f32.
    #[inline(always)]
    pub fn scale_f32(&self) -> f32 {
        f16_le_to_f32(self.d)
    }

    /// The 32 weights as signed levels `-8..=7`, in order.
    #[inline(always)]
    pub fn levels(&self) -> [i8; QK4_0] {
        let mut out = [0i8; QK4_0];
        let (lo, hi) = out.split_at_mut(QK4_0 / 2);
        for ((l, h), &q) in lo.iter_mut().zip(hi).zip(&self.qs) {
            *l = (q & 0xf) as i8 - 8;
            *h = (q >> 4) as i8 - 8;
        }
        out
    }
}

/// Quantizes one block of 32 values as GGML's `quantize_row_q4_0_ref`.
///
/// The scale is `d = max / -8` where `max` is the value of largest
/// magnitude (its sign kept, the first one on ties), so that value maps to
/// level -8 exactly and the rest to `trunc(x / d + 8.5)` capped at 15. For
/// NaN or infinite input, where C's float-to-`int8_t` conversion is
/// undefined, the conversion here saturates (NaN gives 0).
pub fn quantize_block_q4_0(x: &[f32; QK4_0]) -> BlockQ4_0 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let level = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
    let mut qs = [0u8; QK4_0 / 2];
    let (lo, hi) = x.split_at(QK4_0 / 2);
    for ((q, &a), &b) in qs.iter_mut().zip(lo).zip(hi) {
        *q = level(a) | (level(b) << 4);
    }
    BlockQ4_0 {
        d: f32_to_f16_le(d),
        qs,
    }
}

/// Quantizes `x` into `out` with [`quantize_block_q4_0`], one block per 32
/// values, byte for byte as GGML's `quantize_row_q4_0_ref`.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 32;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 32`.
pub fn quantize_row_q4_0_into(x: &[f32], out: &mut [BlockQ4_0]) -> Result<(), QuantError> {
    check_output(whole_blocks(x.len(), QK4_0)?, out.len())?;
    let (chunks, _) = x.as_chunks::<QK4_0>();
    for (b, c) in out.iter_mut().zip(chunks) {
        *b = quantize_block_q4_0(c);
    }
    Ok(())
}

/// [`quantize_row_q4_0_into`] into a new vector.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 32.
pub fn quantize_row_q4_0(x: &[f32]) -> Result<Vec<BlockQ4_0>, QuantError> {
    let mut out = vec![BlockQ4_0::default(); whole_blocks(x.len(), QK4_0)?];
    quantize_row_q4_0_into(x, &mut out)?;
    Ok(out)
}

/// Expands Q4_0 blocks to f32 as GGML's `dequantize_row_q4_0`:
/// `level * d` in f32, bit for bit.
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 32 * blocks.len()`.
pub fn dequantize_row_q4_0_into(blocks: &[BlockQ4_0], out: &mut [f32]) -> Result<(), QuantError> {
    check_output(blocks.len() * QK4_0, out.len())?;
    let (chunks, _) = out.as_chunks_mut::<QK4_0>();
    for (chunk, b) in chunks.iter_mut().zip(blocks) {
        let d = b.scale_f32();
        for (o, l) in chunk.iter_mut().zip(b.levels()) {
            *o = f32::from(l) * d;
        }
    }
    Ok(())
}

/// [`dequantize_row_q4_0_into`] into a new vector.
pub fn dequantize_row_q4_0(blocks: &[BlockQ4_0]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK4_0];
    if let Err(e) = dequantize_row_q4_0_into(blocks, &mut out) {
        unreachable!("buffer sized from the input: {e}");
    }
    out
}

/// Exact integer dot product of a Q4_0 block's levels with 32 activation
/// values.
#[inline(always)]
fn block_isum(w: &BlockQ4_0, x: &[i8; 32]) -> i32 {
    let (lo, hi) = x.split_at(QK4_0 / 2);
    let mut s0 = 0i32;
    let mut s1 = 0i32;
    for ((&q, &a), &b) in w.qs.iter().zip(lo).zip(hi) {
        s0 += (i32::from(q & 0xf) - 8) * i32::from(a);
        s1 += (i32::from(q >> 4) - 8) * i32::from(b);
    }
    s0 + s1
}

/// The scalar Q4_0 x Q8_0 dot over blocks given as `(d_x, qs_x)`, in
/// GGML's order: per block `sumf += (isum * d_w) * d_x` in f32, blocks in
/// order (`ggml_vec_dot_q4_0_q8_0_generic`).
#[inline(always)]
fn dot_with<'a>(w: &[BlockQ4_0], x: impl Iterator<Item = (f32, &'a [i8; 32])>) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, (dx, qx)) in w.iter().zip(x) {
        // |isum| <= 32 * 8 * 128 < 2^24: exact in f32.
        sumf += block_isum(wb, qx) as f32 * wb.scale_f32() * dx;
    }
    sumf
}

/// Dot product of a Q4_0 weight row with a row of Q8_0 blocks, as GGML's
/// scalar `ggml_vec_dot_q4_0_q8_0` reads (GGML's FMA-capable builds fuse
/// the last multiply with the running sum; this kernel rounds it first).
///
/// # Errors
///
/// [`QuantError::BlockCountMismatch`] if the rows hold different numbers
/// of blocks.
pub fn dot_q4_0_q8_0(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> Result<f32, QuantError> {
    check_blocks(w.len(), x.len())?;
    Ok(dot_with(w, x.iter().map(|b| (b.scale_f32(), &b.qs))))
}

/// [`dot_q4_0_q8_0`] with the activation already quantized into a
/// [`QuantizedVector`] (the form the matvec kernels take); the same bits.
///
/// # Errors
///
/// [`QuantError::BlockCountMismatch`] if `x.cols() != 32 * w.len()`.
pub fn dot_q4_0_act(w: &[BlockQ4_0], x: &QuantizedVector) -> Result<f32, QuantError> {
    check_blocks(w.len(), x.act().len())?;
    Ok(dot_q4_0_act_blocks(w, x.act()))
}

/// The scalar Q4_0 kernel over activation blocks (lengths checked by the
/// caller; extra blocks on either side are ignored).
pub(crate) fn dot_q4_0_act_blocks(w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
    dot_with(w, x.iter().map(|b| (b.d, &b.qs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn levels_split_nibbles() {
        let mut b = BlockQ4_0 {
            d: f16::from_f32(0.5).to_le_bytes(),
            qs: [0x80; 16],
        };
        b.qs[0] = 0x0f; // first weight 7, weight 16 is -8
        let l = b.levels();
        assert_eq!((l[0], l[16], l[1], l[17]), (7, -8, -8, 0));
        let y = dequantize_row_q4_0(&[b]);
        assert_eq!((y[0], y[16], y[1], y[17]), (3.5, -4.0, -4.0, 0.0));
    }

    #[test]
    fn quantizes_the_extreme_to_minus_eight() {
        let mut x = [0.0f32; 32];
        x[3] = -2.0;
        x[4] = 1.0;
        x[20] = 0.25;
        let b = quantize_block_q4_0(&x);
        // d = -2 / -8 = 0.25, so -2 -> -8, 1 -> 4, 0.25 -> 1, 0 -> 0.
        assert_eq!(b.scale_f32(), 0.25);
        let l = b.levels();
        assert_eq!((l[3], l[4], l[20], l[0]), (-8, 4, 1, 0));
        // A positive extreme gives a negative scale and caps at 15 - 8.
        let b = quantize_block_q4_0(&[1.0; 32]);
        assert_eq!(b.scale_f32(), -0.125);
        assert_eq!(b.levels(), [-8; 32]);
    }

    #[test]
    fn dot_matches_hand_sum() {
        let w = BlockQ4_0 {
            d: f16::from_f32(2.0).to_le_bytes(),
            qs: [0x9a; 16], // levels 2 (low) and 1 (high)
        };
        let mut qs = [1i8; 32];
        qs[0] = -3;
        let x = BlockQ8_0::new(f16::from_f32(0.5), qs);
        // isum = 2 * (15 - 3) + 1 * 16 = 40; 40 * 2 * 0.5 = 40.
        assert_eq!(dot_q4_0_q8_0(&[w], &[x]), Ok(40.0));
        assert_eq!(
            dot_q4_0_q8_0(&[w, w], &[x]),
            Err(QuantError::BlockCountMismatch {
                weights: 2,
                activations: 1
            })
        );
    }

    #[test]
    fn rejects_bad_lengths() {
        assert_eq!(
            quantize_row_q4_0(&[0.0; 33]),
            Err(QuantError::RowNotWholeBlocks { len: 33, block: 32 })
        );
        let mut out = [BlockQ4_0::default(); 1];
        assert_eq!(
            quantize_row_q4_0_into(&[0.0; 64], &mut out),
            Err(QuantError::OutputLength {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(
            dequantize_row_q4_0_into(&out, &mut [0.0; 31]),
            Err(QuantError::OutputLength {
                expected: 32,
                got: 31
            })
        );
    }
}
