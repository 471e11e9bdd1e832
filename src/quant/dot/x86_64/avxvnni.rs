//! AVX-VNNI kernels: the VEX-encoded `vpdpbusd` of CPUs that have VNNI
//! without AVX-512 (Intel Alder Lake and later client cores, AMD Zen 5).
//! The same computation as the AVX-512 VNNI kernel (see there), so the
//! same bits.

use core::arch::x86_64::*;

use crate::quant::activation::ActBlock;
use crate::quant::block::BlockQ8_0;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_k::BlockQ4K;
use crate::quant::q5_k::BlockQ5K;
use crate::quant::q6_k::BlockQ6K;
use crate::quant::q8_k::BlockQ8K;

/// The weight side of a block: its bytes with the top bit flipped.
type Weight = __m256i;

/// [`Weight`] of a block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn prep(w: &BlockQ8_0) -> Weight {
    let qw: __m256i = bytemuck::cast(w.qs);
    _mm256_xor_si256(qw, _mm256_set1_epi8(i8::MIN))
}

/// Eight `i32` lanes whose sum is the block's exact integer dot product.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn lanes(w_unsigned: Weight, x: &ActBlock) -> __m256i {
    let qx: __m256i = bytemuck::cast(x.qs);
    let bias: __m256i = bytemuck::cast(x.neg_bias);
    _mm256_dpbusd_avx_epi32(bias, w_unsigned, qx)
}

q8_kernels!("avx2,fma,f16c,avxvnni");

/// `acc + vpmaddwd(a, b)` in one `vpdpwssd` (the multiply-add of `i16`
/// pairs accumulating into the `i32` lanes), for the K-quant kernels
/// (`k_kernels!`): the same lanes as AVX2's `vpmaddwd` then `vpaddd`, one
/// instruction fewer per 32 weights, and the f32 part is AVX2's, so the
/// AVX-VNNI K-quant kernels return the AVX2 kernels' bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpwssd_avx_epi32(acc, a, b)
}

k_prep_256!("avx2,fma,f16c,avxvnni");
k_kernels!("avx2,fma,f16c,avxvnni");

/// Q4_0 lanes (`q4_0_kernels!`): one `vpdpbusd` of the unsigned levels by
/// the activations onto the activation's `-8 * sum`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn q4_lanes(q: __m256i, x: &ActBlock) -> __m256i {
    _mm256_dpbusd_avx_epi32(q4_0_bias(x), q, bytemuck::cast(x.qs))
}

q4_0_kernels!("avx2,fma,f16c,avxvnni");
