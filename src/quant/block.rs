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
}

#[cfg(test)]
mod tests {
    use super::*;

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
