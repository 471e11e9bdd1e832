//! Q8_K: the activation format the K-quant dot products take (GGML's
//! `block_q8_K`): 256 values of 8 bits, an f32 scale, and the sums of
//! each 16 values, which fold the K-quant mins into one multiply per
//! block.

use bytemuck::{Pod, Zeroable};

use super::kcommon::{check_output, nearest_int, whole_blocks, QK_K};
use super::quantize::QuantError;

/// One Q8_K block: 256 signed 8-bit values, their f32 scale and the sum
/// of each run of 16 values.
///
/// Value `i` is `d * qs[i]`. GGML's layout (292 bytes, no padding); the
/// f32 scale gives it alignment 4. Activations are quantized at run time
/// into owned buffers and never read from files, so the alignment costs
/// nothing; a byte slice casts to `&[BlockQ8K]` only when 4-aligned.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8K {
    /// The scale.
    pub d: f32,
    /// The 256 quantized values.
    pub qs: [i8; QK_K],
    /// `bsums[j] = qs[16j] + ... + qs[16j + 15]`.
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(core::mem::size_of::<BlockQ8K>() == 292);
const _: () = assert!(core::mem::align_of::<BlockQ8K>() == 4);

impl Default for BlockQ8K {
    fn default() -> Self {
        Self::zeroed()
    }
}

impl BlockQ8K {
    /// The sums of each run of 16 values of `qs` (what `bsums` must hold).
    pub fn sums_of(qs: &[i8; QK_K]) -> [i16; QK_K / 16] {
        let (runs, _) = qs.as_chunks::<16>();
        let mut out = [0i16; QK_K / 16];
        for (o, r) in out.iter_mut().zip(runs) {
            // |sum| <= 16 * 128: fits.
            *o = r.iter().map(|&q| i16::from(q)).sum();
        }
        out
    }
}

/// Quantizes one block of 256 values as GGML's `quantize_row_q8_K_ref`.
///
/// The scale maps the value of largest magnitude (the first one on ties,
/// sign kept) to -127: `iscale = -127 / max`, `qs[i] = min(127,
/// nearest_int(iscale * x[i]))` and `d = 1 / iscale`. A block of zeros
/// gets `d = 0` and zero values (and zero sums; GGML leaves its sums
/// unwritten there). Finite input gives values in `-127..=127`; for NaN
/// or infinite input the result follows GGML's release-build arithmetic
/// (the conversion to `i8` wraps, as C's does on every GGML target) and
/// never panics.
pub fn quantize_block_q8_k(x: &[f32; QK_K]) -> BlockQ8K {
    // GGML scans for `|x| > amax` value by value, a chain the compiler
    // cannot vectorize; this finds the same value in two vector passes: the
    // largest magnitude over eight independent lanes (`f32::max` ignores a
    // NaN operand, as the scan's comparison does), then the first value of
    // that magnitude (the one the scan keeps on ties), sign included.
    let (c8, _) = x.as_chunks::<8>();
    let mut lanes = [0.0f32; 8];
    for c in c8 {
        for (l, v) in lanes.iter_mut().zip(c) {
            *l = l.max(v.abs());
        }
    }
    let amax = lanes.into_iter().fold(0.0f32, f32::max);
    if amax == 0.0 {
        return BlockQ8K::zeroed();
    }
    // The first value of that magnitude: sixteen at a time (a vector
    // compare) until a chunk holds one, then the one in that chunk.
    let (c16, _) = x.as_chunks::<16>();
    let max = c16
        .iter()
        .find(|c| c.iter().fold(false, |hit, v| hit | (v.abs() == amax)))
        .and_then(|c| c.iter().copied().find(|v| v.abs() == amax))
        .unwrap_or(amax);
    let iscale = -127.0 / max;
    let mut qs = [0i8; QK_K];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    BlockQ8K {
        d: 1.0 / iscale,
        qs,
        bsums: BlockQ8K::sums_of(&qs),
    }
}

/// Quantizes `x` into `out`, one block per 256 values, as GGML's
/// `quantize_row_q8_K_ref`.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 256`.
pub fn quantize_row_q8_k_into(x: &[f32], out: &mut [BlockQ8K]) -> Result<(), QuantError> {
    check_output(whole_blocks(x.len(), QK_K)?, out.len())?;
    let (chunks, _) = x.as_chunks::<QK_K>();
    for (b, c) in out.iter_mut().zip(chunks) {
        *b = quantize_block_q8_k(c);
    }
    Ok(())
}

/// [`quantize_row_q8_k_into`] into a new vector.
///
/// # Errors
///
/// [`QuantError::RowNotWholeBlocks`] if `x.len()` is not a multiple of 256.
pub fn quantize_row_q8_k(x: &[f32]) -> Result<Vec<BlockQ8K>, QuantError> {
    let mut out = vec![BlockQ8K::zeroed(); whole_blocks(x.len(), QK_K)?];
    quantize_row_q8_k_into(x, &mut out)?;
    Ok(out)
}

/// Expands Q8_K blocks to f32 as GGML's `dequantize_row_q8_K`:
/// `d * qs[i]`.
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 256 * blocks.len()`.
pub fn dequantize_row_q8_k_into(blocks: &[BlockQ8K], out: &mut [f32]) -> Result<(), QuantError> {
    check_output(blocks.len() * QK_K, out.len())?;
    let (chunks, _) = out.as_chunks_mut::<QK_K>();
    for (chunk, b) in chunks.iter_mut().zip(blocks) {
        for (o, &q) in chunk.iter_mut().zip(&b.qs) {
            *o = b.d * f32::from(q);
        }
    }
    Ok(())
}

/// [`dequantize_row_q8_k_into`] into a new vector.
pub fn dequantize_row_q8_k(blocks: &[BlockQ8K]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK_K];
    if let Err(e) = dequantize_row_q8_k_into(blocks, &mut out) {
        unreachable!("buffer sized from the input: {e}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_the_extreme_to_minus_127() {
        let mut x = [0.0f32; QK_K];
        x[5] = 2.0;
        x[6] = -1.0;
        x[17] = 0.5;
        let b = quantize_block_q8_k(&x);
        assert_eq!(b.d, 1.0 / (-127.0 / 2.0));
        assert_eq!((b.qs[5], b.qs[6], b.qs[17]), (-127, 64, -32));
        assert_eq!((b.bsums[0], b.bsums[1], b.bsums[2]), (-63, -32, 0));
        let y = dequantize_row_q8_k(&[b]);
        assert_eq!(y[6], b.d * 64.0);
    }

    /// GGML's scan, value by value, as the reference the two-pass search
    /// must agree with.
    fn scan_max(x: &[f32; QK_K]) -> (f32, f32) {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        (max, amax)
    }

    #[test]
    #[cfg_attr(miri, ignore = "proptest is too slow under Miri")]
    fn two_pass_max_is_the_scans_on_ties_nan_and_infinities() {
        use proptest::prelude::*;
        let value = prop_oneof![
            4 => -3.0f32..3.0,
            1 => Just(2.5f32),
            1 => Just(-2.5f32),
            1 => Just(f32::NAN),
            1 => Just(f32::INFINITY),
            1 => Just(f32::NEG_INFINITY),
            1 => Just(0.0f32),
            1 => Just(-0.0f32),
        ];
        proptest!(|(v in prop::collection::vec(value, QK_K))| {
            let x: [f32; QK_K] = v.try_into().unwrap();
            let (max, amax) = scan_max(&x);
            let b = quantize_block_q8_k(&x);
            if amax == 0.0 {
                prop_assert_eq!(b, BlockQ8K::zeroed());
            } else {
                let iscale = -127.0 / max;
                prop_assert_eq!(b.d.to_bits(), (1.0 / iscale).to_bits());
                for (q, &v) in b.qs.iter().zip(&x) {
                    prop_assert_eq!(*q, nearest_int(iscale * v).min(127) as i8);
                }
            }
        });
    }

    #[test]
    fn zeros_and_hostile_values_do_not_panic() {
        assert_eq!(quantize_block_q8_k(&[0.0; QK_K]), BlockQ8K::zeroed());
        for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1e-45] {
            let mut x = [1.0f32; QK_K];
            x[3] = v;
            let b = quantize_block_q8_k(&x);
            assert_eq!(b.bsums, BlockQ8K::sums_of(&b.qs));
        }
        assert_eq!(
            quantize_row_q8_k(&[0.0; 100]),
            Err(QuantError::RowNotWholeBlocks {
                len: 100,
                block: 256
            })
        );
    }
}
