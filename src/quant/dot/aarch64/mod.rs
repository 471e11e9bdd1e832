//! aarch64 kernels: NEON.

pub(crate) mod neon;
