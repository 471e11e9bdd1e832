//! Quantized block formats, GGML-compatible quantization, and the dot-product
//! kernels over them.
//!
//! * [`BlockQ8_0`]: GGML's 34-byte Q8_0 block, castable from file bytes.
//! * [`quantize_row_q8_0`] / [`dequantize_row_q8_0`]: bit-identical to
//!   GGML's reference quantizer.
//! * [`QuantizedVector`] / [`QuantizedBatch`]: activations quantized once
//!   per matvec into reusable buffers.
//! * [`Kernel`]: the scalar, AVX2, AVX-512 VNNI, AVX-VNNI and NEON dot
//!   kernels, chosen once at run time.
//! * [`BlockQ4_0`], [`BlockQ4K`], [`BlockQ5K`], [`BlockQ6K`]: the weight
//!   formats of the Q4_0, Q4_K_M, Q5_K_M and Q6_K files, castable from file
//!   bytes like [`BlockQ8_0`], with GGML's reference quantizers (the same
//!   bytes as llama.cpp), bit-identical dequantization, and scalar dot
//!   products; [`BlockQ8K`] is the activation format the K-quant dots take.
//! * `half::f16` and `half::bf16` are [`WeightBlock`]s of one value each,
//!   the elements of unquantized F16 and BF16 matrices; their products
//!   read the activation rounded to f16 or bfloat16, as GGML's do (the
//!   `quant::float` module says why).
//!
//! # The K-quant formats
//!
//! A K-quant super-block covers [`QK_K`] = 256 weights in sub-blocks of 32
//! (Q4_K, Q5_K) or 16 (Q6_K), each with its own small integer scale (and,
//! for Q4_K and Q5_K, a min), under f16 super-scales: two levels of
//! scaling keep the per-weight cost near 4.5, 5.5 and 6.6 bits. The dot
//! products multiply the integer levels by [`BlockQ8K`] activations
//! exactly in `i32` and apply the scales once per sub-block; the mins
//! need no per-weight work, since `sum_i m * x_i` only needs the sums of
//! the activations, which [`BlockQ8K`] carries per 16 values. The
//! reference quantizers and dequantizers perform GGML's float operations
//! in GGML's order (see `kcommon.rs`), so their results match llama.cpp's
//! bit for bit; `tests/kquant_fixtures.rs` checks that against fixtures
//! made with GGML itself.
//!
//! # Quantization
//!
//! [`quantize_row_q8_0`] follows `quantize_row_q8_0_ref` of GGML
//! (`ggml/src/ggml-quants.c`) step for step, so a row quantized here holds
//! the same bytes as one quantized by llama.cpp or the `gguf` Python package:
//!
//! 1. `amax` is the running `MAX(amax, |x|)` over the block, with GGML's
//!    macro `MAX(a, b) = a > b ? a : b` (this matters for NaN, see below);
//! 2. `d = amax / 127` in f32, `id = d != 0 ? 1 / d : 0`;
//! 3. `qs[j] = round(x[j] * id)`, rounding half away from zero;
//! 4. `d` is stored as f16, rounded to nearest even (`id` uses the f32 `d`).
//!
//! # Activations round ties to even
//!
//! Weights in a file were quantized by GGML's reference code, which rounds
//! half away from zero. Activations are quantized at run time, and there
//! GGML's CPU backend uses its vector code (x86 AVX and Arm NEON), which
//! rounds with the hardware's default mode: half to even. Ties are common
//! when the input has few significant bits (an attention output over one
//! position is a row of `f16` values), and one flipped value moves
//! llama.cpp's logits by about 6e-3 (relative L2) on the test model. So
//! [`QuantizedVector`] and [`QuantizedBatch`] hold
//! [`quantize_row_q8_0_even`]'s blocks; [`quantize_row_q8_0`] stays the
//! reference for weights.
//!
//! # Non-finite and extreme inputs
//!
//! GGML's C code converts `round(x * id)` to `int8_t`, which is undefined
//! behaviour in C when the value is NaN, infinite or outside the `int8_t`
//! range. Those cases only arise from non-finite or extremely small
//! inputs; this crate defines them as `NaN -> 0` and saturation to
//! `-127..=127`, so every quantized value stays within `-127..=127` (the
//! SIMD kernels rely on that for activations). Concretely:
//!
//! * GGML's `MAX` returns its second argument when a comparison involves
//!   NaN, so a NaN element resets the running `amax` to NaN and the next
//!   non-NaN element resets it to that element's magnitude: everything up
//!   to the NaN is forgotten. The NaN element quantizes to 0, and earlier
//!   elements larger than the final `amax` saturate to `+-127`;
//! * a NaN as the last element to touch `amax` makes `d` NaN: every `qs` is
//!   0 and the stored scale is a NaN;
//! * an infinite `amax` gives `d = inf`, `id = 0`: every `qs` is 0 and the
//!   stored scale is `inf`, so dequantizing gives NaN (`inf * 0`);
//! * a finite `amax` above about `127 * 65504` overflows the f16 scale to
//!   `inf`; the `qs` are still the usual ones;
//! * an `amax` below about `127 * 2^-128` makes `1 / d` overflow to `inf`,
//!   so nonzero elements saturate to `+-127` and zeros give NaN, hence 0; the
//!   f16 scale underflows to 0, so the block dequantizes to zeros as it
//!   would in GGML whatever the `qs` bytes.

pub(crate) mod activation;
pub(crate) mod block;
pub mod dot;
pub(crate) mod float;
pub(crate) mod kcommon;
pub(crate) mod kgroup;
pub(crate) mod packed;
pub(crate) mod q4_0;
pub(crate) mod q4_k;
pub(crate) mod q5_k;
pub(crate) mod q6_k;
pub(crate) mod q8_k;
pub(crate) mod quantize;

pub use activation::{ActForms, QuantizedBatch, QuantizedVector};
pub(crate) use activation::{BatchLayouts, Spread};
pub use block::{BlockQ8_0, WeightBlock, QK8_0};
pub use dot::{Kernel, KernelEnvError, KernelError, FORCE_SCALAR_ENV, KERNEL_ENV};
pub use kcommon::QK_K;
pub use packed::{
    pack_q4_0_rows8, pack_q4_k_rows8, pack_q5_k_rows8, pack_rows8, BlockQ4Kx8, BlockQ4_0x8,
    BlockQ5Kx8, PackedBlock, PACK_ROWS,
};
pub use q4_0::{
    dequantize_row_q4_0, dequantize_row_q4_0_into, dot_q4_0_act, dot_q4_0_q8_0,
    quantize_block_q4_0, quantize_row_q4_0, quantize_row_q4_0_into, BlockQ4_0, QK4_0,
};
pub use q4_k::{
    dequantize_row_q4_k, dequantize_row_q4_k_into, dot_q4_k_q8_k, quantize_block_q4_k,
    quantize_row_q4_k, quantize_row_q4_k_into, BlockQ4K,
};
pub use q5_k::{
    dequantize_row_q5_k, dequantize_row_q5_k_into, dot_q5_k_q8_k, quantize_block_q5_k,
    quantize_row_q5_k, quantize_row_q5_k_into, BlockQ5K,
};
pub use q6_k::{
    dequantize_row_q6_k, dequantize_row_q6_k_into, dot_q6_k_q8_k, quantize_block_q6_k,
    quantize_row_q6_k, quantize_row_q6_k_into, BlockQ6K,
};
pub use q8_k::{
    dequantize_row_q8_k, dequantize_row_q8_k_into, quantize_block_q8_k, quantize_row_q8_k,
    quantize_row_q8_k_into, BlockQ8K,
};
pub use quantize::{
    dequantize_row_q8_0, dequantize_row_q8_0_into, quantize_block_q8_0, quantize_block_q8_0_even,
    quantize_row_q8_0, quantize_row_q8_0_even, quantize_row_q8_0_into, QuantError,
};
