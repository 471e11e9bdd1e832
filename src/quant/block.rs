//! The Q8_0 block, laid out exactly as GGML's `block_q8_0`.

use bytemuck::{Pod, Zeroable};
use half::f16;

/// Number of weights in one Q8_0 block (GGML's `QK8_0`).
pub const QK8_0: usize = 32;

/// One Q8_0 block: 32 signed 8-bit weights sharing one f16 scale.
///
/// The value of weight `i` is `d * qs[i]`. The layout mirrors GGML's
/// `block_q8_0` (`ggml/src/ggml-common.h`): a 2-byte little-endian f16 `d`
/// followed by 32 `i8`, 34 bytes with no padding. The scale is stored as raw
/// bytes so the struct has alignment 1: blocks follow each other every 34
/// bytes in a file, so most of them sit at odd addresses, and a `&[u8]`
/// straight from a GGUF file casts to `&[BlockQ8_0]` with
/// [`bytemuck::cast_slice`] at any address, without copying.
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// The scale, as raw little-endian f16 bytes (kept as bytes so the block
    /// has alignment 1; read it with [`BlockQ8_0::scale`]).
    pub d: [u8; 2],
    /// The 32 quantized weights.
    pub qs: [i8; QK8_0],
}

const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);
const _: () = assert!(core::mem::align_of::<BlockQ8_0>() == 1);

impl BlockQ8_0 {
    /// Builds a block from its scale and weights.
    #[inline]
    pub fn new(d: f16, qs: [i8; QK8_0]) -> Self {
        Self {
            d: d.to_le_bytes(),
            qs,
        }
    }

    /// The block's scale `d`.
    #[inline(always)]
    pub fn scale(&self) -> f16 {
        f16::from_le_bytes(self.d)
    }

    /// The block's scale `d` widened to f32 (exactly, as
    /// `half::f16::to_f32` does).
    ///
    /// Kernels call this once per block. `half`'s conversion checks at run
    /// time for a hardware instruction and calls out of line where the
    /// build does not enable one (aarch64 without `fp16`, x86_64 without
    /// `f16c`); this one is a few integer operations that inline into the
    /// block loop.
    #[inline(always)]
    pub fn scale_f32(&self) -> f32 {
        f16_bits_to_f32(u16::from_le_bytes(self.d))
    }
}

/// Exact IEEE half to single conversion, without branches on the value
/// except for infinities and NaNs (whose NaNs come out quiet, as the
/// hardware conversions make them).
#[inline(always)]
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exponent = (h >> 10) & 0x1f;
    let mantissa = u32::from(h & 0x3ff);
    let magnitude = if exponent == 0x1f {
        // Infinity (mantissa 0) or NaN (made quiet).
        let quiet = if mantissa == 0 { 0 } else { 0x0040_0000 };
        0x7f80_0000 | quiet | (mantissa << 13)
    } else if exponent == 0 {
        // Zero and subnormal halves: the mantissa counts units of 2^-24,
        // and the integer converts exactly. (The bit trick below would
        // work too, but it multiplies an f32 subnormal, which x86 CPUs do
        // in a microcode assist of about a hundred cycles; the scales of
        // Q4_K and Q6_K blocks of real weights are often subnormal halves,
        // and that assist made those kernels five times slower.)
        const TWO_POW_M24: f32 = f32::from_bits((127 - 24) << 23);
        (mantissa as f32 * TWO_POW_M24).to_bits()
    } else {
        // Normal halves: moving the exponent and mantissa bits into place
        // reads them as a (normal) float 2^112 too small (the exponent
        // biases differ by 112), and multiplying by 2^112 is exact.
        const TWO_POW_112: f32 = f32::from_bits((112 + 127) << 23);
        (f32::from_bits(u32::from(h & 0x7fff) << 13) * TWO_POW_112).to_bits()
    };
    f32::from_bits(sign | magnitude)
}

/// A quantized weight block format: what a
/// [`BlockMatrix`](crate::matvec::BlockMatrix) can hold.
pub trait WeightBlock: bytemuck::Pod + Send + Sync + core::fmt::Debug {
    /// Weights one block holds (a row holds a whole number of blocks).
    const WEIGHTS: usize;
    /// GGML's name of the format, for messages.
    const NAME: &'static str;
}

impl WeightBlock for BlockQ8_0 {
    const WEIGHTS: usize = QK8_0;
    const NAME: &'static str = "Q8_0";
}

impl WeightBlock for super::BlockQ4_0 {
    const WEIGHTS: usize = super::QK4_0;
    const NAME: &'static str = "Q4_0";
}

impl WeightBlock for super::BlockQ4K {
    const WEIGHTS: usize = super::QK_K;
    const NAME: &'static str = "Q4_K";
}

/// A packed block covers 256 columns of each of eight rows: a
/// [`BlockMatrix`](crate::matvec::BlockMatrix) of them is one row per
/// group of eight (see [`PackedMatrix`](crate::matvec::PackedMatrix)).
impl WeightBlock for super::BlockQ4Kx8 {
    const WEIGHTS: usize = super::QK_K;
    const NAME: &'static str = "Q4_K";
}

/// As [`BlockQ4Kx8`](super::BlockQ4Kx8), for Q4_0: 32 columns of each
/// of eight rows.
impl WeightBlock for super::BlockQ4_0x8 {
    const WEIGHTS: usize = super::QK4_0;
    const NAME: &'static str = "Q4_0";
}

/// As [`BlockQ4Kx8`](super::BlockQ4Kx8), for Q5_K.
impl WeightBlock for super::BlockQ5Kx8 {
    const WEIGHTS: usize = super::QK_K;
    const NAME: &'static str = "Q5_K";
}

impl WeightBlock for super::BlockQ5K {
    const WEIGHTS: usize = super::QK_K;
    const NAME: &'static str = "Q5_K";
}

impl WeightBlock for super::BlockQ6K {
    const WEIGHTS: usize = super::QK_K;
    const NAME: &'static str = "Q6_K";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_f32_matches_half_for_every_value() {
        // Under Miri (this is safe code; Miri looks for undefined
        // behaviour, not wrong values) a stride of 97 through every
        // exponent and sign, plus the special values, keeps it to seconds.
        let stride = if cfg!(miri) { 97 } else { 1 };
        let specials = [
            0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00,
        ];
        let nans = [0x7c01, 0x7e00, 0xfe00, 0xffff];
        let all = (0..=u16::MAX).step_by(stride);
        for bits in all.chain(specials).chain(nans) {
            let block = BlockQ8_0 {
                d: bits.to_le_bytes(),
                qs: [0; QK8_0],
            };
            // NaNs too: same payload, made quiet.
            let expected = f16::from_bits(bits).to_f32();
            let got = block.scale_f32();
            assert_eq!(got.to_bits(), expected.to_bits(), "{bits:#06x}");
        }
    }

    #[test]
    fn casts_from_unaligned_bytes() {
        let mut bytes = [0u8; 1 + 2 * 34];
        let one = f16::from_f32(1.0).to_le_bytes();
        bytes[1] = one[0];
        bytes[2] = one[1];
        bytes[3] = 0x7f; // qs[0] = 127
        let blocks: &[BlockQ8_0] = bytemuck::cast_slice(&bytes[1..]);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].scale(), f16::from_f32(1.0));
        assert_eq!(blocks[0].qs[0], 127);
        assert_eq!(blocks[1], BlockQ8_0::default());
    }
}
