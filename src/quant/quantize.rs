//! Q8_0 quantization and dequantization, bit-identical to GGML's reference
//! (the rule is documented on the [`quant`](crate::quant) module).

use half::f16;
use thiserror::Error;

use super::block::{BlockQ8_0, QK8_0};

/// Why a quantization or dequantization call was rejected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum QuantError {
    /// Q8_0 rows hold whole blocks of [`QK8_0`] values.
    #[error("row length {len} is not a multiple of the Q8_0 block size 32")]
    LengthNotMultiple {
        /// The rejected length.
        len: usize,
    },
    /// The output slice does not match the input.
    #[error("output holds {got} elements, {expected} needed")]
    OutputLength {
        /// Number of elements the input requires.
        expected: usize,
        /// Number of elements given.
        got: usize,
    },
    /// A row of a block format (Q4_0, the K-quants, Q8_K) holds whole
    /// blocks; the variant names the block size, which differs by format.
    #[error("row length {len} is not a multiple of the block size {block}")]
    RowNotWholeBlocks {
        /// The rejected length.
        len: usize,
        /// Values per block of the format.
        block: usize,
    },
    /// The two operands of a dot product hold different numbers of blocks.
    #[error("weights hold {weights} blocks, activations {activations}")]
    BlockCountMismatch {
        /// Blocks in the weight row.
        weights: usize,
        /// Blocks in the activation row.
        activations: usize,
    },
    /// A batch's values do not form whole rows of a nonzero length.
    #[error("{len} values do not form whole rows of {cols}")]
    BatchShape {
        /// Number of values given.
        len: usize,
        /// The requested row length.
        cols: usize,
    },
}

/// Rounds half away from zero, as C's `roundf`, for `|v| <= 127`.
///
/// Truncation plus a look at the exact remainder: for `|v| < 2^23` the
/// truncated integer and `v - t` are both exact in f32, so this equals
/// `v.round()` without a libm call, and it compiles to vector code.
#[inline(always)]
fn round_away(v: f32) -> i8 {
    let t = v as i32; // truncates toward zero; |v| <= 127 here
    let frac = v - t as f32; // exact
    let q = t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5);
    q as i8 // -127..=127
}

/// GGML's running `amax = MAX(amax, |x|)` over the block, in order.
///
/// Without NaN the running maximum is the plain maximum, which does not
/// depend on the order, so it is taken over eight independent lanes (one
/// vector max per 8 values); a block holding a NaN takes the sequential
/// loop, whose result depends on where the NaN sits.
#[inline(always)]
fn block_amax(x: &[f32; QK8_0]) -> f32 {
    // GGML's MAX(a, b) = a > b ? a : b: yields `b` whenever the comparison
    // is false, including when either side is NaN.
    let ggml_max = |a: f32, b: f32| if a > b { a } else { b };
    let (lanes, _) = x.as_chunks::<8>();
    let mut m = [0.0f32; 8];
    let mut nan = false;
    for lane in lanes {
        for (m, &v) in m.iter_mut().zip(lane) {
            nan |= v.is_nan();
            *m = ggml_max(*m, v.abs());
        }
    }
    if nan {
        return x.iter().fold(0.0, |amax, &v| ggml_max(amax, v.abs()));
    }
    m.into_iter().fold(0.0, ggml_max)
}

/// Quantizes one block of 32 values; returns the scale and the weights.
///
/// See the [`quant`](crate::quant) module documentation for the exact
/// rule.
#[inline]
pub fn quantize_block_q8_0(x: &[f32; QK8_0]) -> (f16, [i8; QK8_0]) {
    quantize_block(x, round_away)
}

/// [`quantize_block_q8_0`] with ties rounded to even instead of away from
/// zero: how GGML's CPU backend quantizes activations at run time (its
/// x86 and Arm vector code rounds with the hardware's default mode), so
/// this is what llama.cpp multiplies Q8_0 weights with.
#[inline]
pub fn quantize_block_q8_0_even(x: &[f32; QK8_0]) -> (f16, [i8; QK8_0]) {
    quantize_block(x, round_even)
}

/// Rounds half to even, for `|v| <= 127`.
#[inline(always)]
fn round_even(v: f32) -> i8 {
    v.round_ties_even() as i8 // -127..=127
}

#[inline(always)]
fn quantize_block(x: &[f32; QK8_0], round: fn(f32) -> i8) -> (f16, [i8; QK8_0]) {
    let amax = block_amax(x);
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; QK8_0];
    for (q, &v) in qs.iter_mut().zip(x) {
        let s = v * id;
        // NaN fails both comparisons and maps to 0; +-inf and the tiny-amax
        // overflow saturate to +-127. Finite blocks never reach the clamps:
        // |v * id| <= 127 up to an ulp, which rounds to 127.
        let s = if s.is_nan() {
            0.0
        } else {
            s.clamp(-127.0, 127.0)
        };
        *q = round(s);
    }
    (f16::from_f32(d), qs)
}

/// Quantizes `x` into `out`, one block per 32 values, with no allocation.
///
/// # Errors
///
/// [`QuantError::LengthNotMultiple`] if `x.len()` is not a multiple of 32;
/// [`QuantError::OutputLength`] if `out.len() != x.len() / 32`.
pub fn quantize_row_q8_0_into(x: &[f32], out: &mut [BlockQ8_0]) -> Result<(), QuantError> {
    let nb = blocks_for(x.len())?;
    if out.len() != nb {
        return Err(QuantError::OutputLength {
            expected: nb,
            got: out.len(),
        });
    }
    let (chunks, _) = x.as_chunks::<QK8_0>();
    for (block, chunk) in out.iter_mut().zip(chunks) {
        let (d, qs) = quantize_block_q8_0(chunk);
        *block = BlockQ8_0::new(d, qs);
    }
    Ok(())
}

/// Quantizes a row of f32 values to Q8_0 blocks, byte for byte as GGML's
/// `quantize_row_q8_0_ref`.
///
/// ```
/// use inferno_cpu::quant::quantize_row_q8_0;
/// let mut x = [0.0f32; 32];
/// x[0] = 1.27;
/// x[1] = -0.5;
/// let blocks = quantize_row_q8_0(&x)?;
/// assert_eq!(blocks[0].qs[0], 127);
/// assert_eq!(blocks[0].qs[1], -50);
/// assert_eq!(blocks[0].scale().to_f32(), half::f16::from_f32(0.01).to_f32());
/// # Ok::<(), inferno_cpu::quant::QuantError>(())
/// ```
///
/// # Errors
///
/// [`QuantError::LengthNotMultiple`] if `x.len()` is not a multiple of 32.
pub fn quantize_row_q8_0(x: &[f32]) -> Result<Vec<BlockQ8_0>, QuantError> {
    let mut out = vec![BlockQ8_0::default(); blocks_for(x.len())?];
    quantize_row_q8_0_into(x, &mut out)?;
    Ok(out)
}

/// Quantizes a row of activations as GGML's CPU backend does at run time:
/// [`quantize_row_q8_0`] with ties rounded to even
/// ([`quantize_block_q8_0_even`]). [`QuantizedVector`](super::QuantizedVector)
/// holds exactly these blocks.
///
/// ```
/// use inferno_cpu::quant::{quantize_row_q8_0, quantize_row_q8_0_even};
/// let mut x = [0.0f32; 32];
/// x[0] = 127.0;
/// x[1] = 2.5; // a tie: 2 here, 3 in the reference quantizer
/// assert_eq!(quantize_row_q8_0_even(&x)?[0].qs[1], 2);
/// assert_eq!(quantize_row_q8_0(&x)?[0].qs[1], 3);
/// # Ok::<(), inferno_cpu::quant::QuantError>(())
/// ```
///
/// # Errors
///
/// [`QuantError::LengthNotMultiple`] if `x.len()` is not a multiple of 32.
pub fn quantize_row_q8_0_even(x: &[f32]) -> Result<Vec<BlockQ8_0>, QuantError> {
    let nb = blocks_for(x.len())?;
    let (chunks, _) = x.as_chunks::<QK8_0>();
    let out: Vec<BlockQ8_0> = chunks
        .iter()
        .map(|c| {
            let (d, qs) = quantize_block_q8_0_even(c);
            BlockQ8_0::new(d, qs)
        })
        .collect();
    debug_assert_eq!(out.len(), nb);
    Ok(out)
}

/// Expands Q8_0 blocks back to f32 into `out`: `out[32 * b + j] = d_b * qs_b[j]`,
/// with `d_b` widened exactly from f16 (GGML's `dequantize_row_q8_0`).
///
/// # Errors
///
/// [`QuantError::OutputLength`] if `out.len() != 32 * blocks.len()`.
pub fn dequantize_row_q8_0_into(blocks: &[BlockQ8_0], out: &mut [f32]) -> Result<(), QuantError> {
    let expected = blocks.len() * QK8_0;
    if out.len() != expected {
        return Err(QuantError::OutputLength {
            expected,
            got: out.len(),
        });
    }
    let (chunks, _) = out.as_chunks_mut::<QK8_0>();
    for (chunk, block) in chunks.iter_mut().zip(blocks) {
        let d = block.scale().to_f32();
        for (o, &q) in chunk.iter_mut().zip(&block.qs) {
            *o = d * f32::from(q);
        }
    }
    Ok(())
}

/// Expands Q8_0 blocks back to a new vector of f32.
pub fn dequantize_row_q8_0(blocks: &[BlockQ8_0]) -> Vec<f32> {
    let mut out = vec![0.0; blocks.len() * QK8_0];
    // The length matches by construction.
    if let Err(e) = dequantize_row_q8_0_into(blocks, &mut out) {
        unreachable!("dequantize buffer sized from the input: {e}");
    }
    out
}

/// Number of blocks for a row of `len` values.
pub(crate) fn blocks_for(len: usize) -> Result<usize, QuantError> {
    if len.is_multiple_of(QK8_0) {
        Ok(len / QK8_0)
    } else {
        Err(QuantError::LengthNotMultiple { len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_away_matches_roundf() {
        // Every quarter step and the neighbours of each half in -127..=127.
        let mut v = -127.0f32;
        while v <= 127.0 {
            for x in [v, v.next_up(), v.next_down()] {
                if x.abs() <= 127.0 {
                    assert_eq!(i32::from(round_away(x)), x.round() as i32, "{x}");
                }
            }
            v += 0.25;
        }
    }

    #[test]
    fn all_zero_block_has_zero_scale() {
        let (d, qs) = quantize_block_q8_0(&[0.0; 32]);
        assert_eq!(d.to_bits(), 0);
        assert_eq!(qs, [0; 32]);
    }

    #[test]
    fn rejects_partial_blocks() {
        assert_eq!(
            quantize_row_q8_0(&[1.0; 33]),
            Err(QuantError::LengthNotMultiple { len: 33 })
        );
        let mut out = [BlockQ8_0::default(); 2];
        assert_eq!(
            quantize_row_q8_0_into(&[1.0; 32], &mut out),
            Err(QuantError::OutputLength {
                expected: 1,
                got: 2
            })
        );
        assert_eq!(
            dequantize_row_q8_0_into(&out, &mut [0.0; 63]),
            Err(QuantError::OutputLength {
                expected: 64,
                got: 63
            })
        );
    }

    #[test]
    fn half_rounds_away_from_zero() {
        // amax 127 gives d = 1, id = 1, so x * id is x itself.
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -2.5;
        x[3] = 0.5;
        x[4] = -0.49999997;
        let (d, qs) = quantize_block_q8_0(&x);
        assert_eq!(d.to_f32(), 1.0);
        assert_eq!(&qs[..5], &[127, 3, -3, 1, 0]);
    }
}
