//! x86_64 kernels: AVX2 (with FMA and F16C) and AVX-512 VNNI.

pub(crate) mod avx2;
pub(crate) mod avx512vnni;
