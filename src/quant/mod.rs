//! Quantized block formats and the dot-product kernels over them.

mod block;

pub use block::{BlockQ8_0, QK8_0};
