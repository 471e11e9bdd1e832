//! AVX-512 VNNI kernels (256-bit `vpdpbusd` from AVX512-VL).
//!
//! `vpdpbusd` multiplies unsigned by signed bytes and adds each group of
//! four products into an `i32` lane, without saturation. The weight bytes
//! are made unsigned by flipping their top bit (`w + 128`), which adds
//! `128 * (x[4j] + .. + x[4j+3])` to lane `j`; the accumulator starts at
//! the activation's precomputed `-128 * (x[4j] + .. + x[4j+3])`, so every
//! lane ends exactly where the AVX2 kernel's lane does, for any weight
//! byte including -128. The f32 part is the AVX2 kernel's, so the two
//! kernels return the same bits.
//!
//! The lanes stay 256 bits wide: a Q8_0 block holds 32 bytes, and pairing
//! two blocks in one 512-bit register costs three inserts and a scale
//! permute per pair, which measured no faster than two 256-bit blocks on an
//! Intel Xeon, while keeping the AVX2 kernel's bits lets every x86 machine
//! agree.

use core::arch::x86_64::*;

use crate::quant::activation::ActBlock;
use crate::quant::block::BlockQ8_0;

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
