//! aarch64 kernels: NEON, and NEON with the dot-product extension.

pub(crate) mod float;
pub(crate) mod kquant;
pub(crate) mod neon;
pub(crate) mod neon_dot;
