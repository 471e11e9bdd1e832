//! Quantized block formats, GGML-compatible quantization, and the dot-product
//! kernels over them.
//!
//! * [`BlockQ8_0`]: GGML's 34-byte Q8_0 block, castable from file bytes.
//! * [`quantize_row_q8_0`] / [`dequantize_row_q8_0`]: bit-identical to
//!   GGML's reference quantizer.
//! * [`QuantizedVector`] / [`QuantizedBatch`]: activations quantized once
//!   per matvec into reusable buffers.
//! * [`Kernel`]: the scalar, AVX2, AVX-512 VNNI and NEON dot kernels, chosen
//!   once at run time.

pub(crate) mod activation;
pub(crate) mod block;
pub mod dot;
pub(crate) mod quantize;

pub use activation::{QuantizedBatch, QuantizedVector};
pub use block::{BlockQ8_0, QK8_0};
pub use dot::{Kernel, KernelError, FORCE_SCALAR_ENV};
pub use quantize::{
    dequantize_row_q8_0, dequantize_row_q8_0_into, quantize_block_q8_0, quantize_row_q8_0,
    quantize_row_q8_0_into, QuantError,
};
