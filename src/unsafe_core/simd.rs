//! Feature-checked calls into the `#[target_feature]` kernels.
//!
//! The kernels in `crate::quant::dot` are safe functions compiled for an
//! instruction set the baseline target lacks; calling one on a CPU without
//! that instruction set is undefined behaviour, so the call needs `unsafe`
//! everywhere except inside a function with the same features. Each token
//! type below can only be built by its constructor, which checks the CPU at
//! run time; holding a token is the proof that the call is sound, and the
//! token's methods make the call. Tokens are `Copy` and zero-sized.
//!
//! Under Miri every constructor returns `None`: Miri does not model these
//! instructions, so the scalar kernels are what Miri runs.
//!
//! `[SIMD-TOKEN]` in `SAFETY.md` is the one invariant all of these calls
//! rely on.

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2Token, Avx512VnniToken, AvxVnniToken};

#[cfg(target_arch = "aarch64")]
pub(crate) use arm::NeonToken;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::quant::activation::ActBlock;
    use crate::quant::block::{BlockQ8_0, QK8_0};
    use crate::quant::dot::x86_64::{avx2, avx512vnni, avxvnni};

    /// Proof that the CPU has AVX2, FMA and F16C.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Avx2Token(());

    impl Avx2Token {
        /// `Some` only if the running CPU has AVX2, FMA and F16C (never
        /// under Miri).
        pub(crate) fn new() -> Option<Self> {
            if cfg!(miri) {
                return None;
            }
            let ok = std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c");
            ok.then_some(Self(()))
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx2Token::new` found
            // avx2, fma and f16c on this CPU: the features `dot_q8` enables.
            // Checked by: tests/prop_quant.rs::avx2_dot_matches_scalar
            unsafe { avx2::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`: the token proves avx2,
            // fma and f16c. Checked by:
            // tests/prop_quant.rs::avx2_matvec_matches_dot
            unsafe { avx2::matvec_q8(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn quantize_act(self, x: &[[f32; QK8_0]], out: &mut [ActBlock]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_quantize_matches_scalar
            unsafe { avx2::quantize_act(x, out) }
        }

        #[inline]
        pub(crate) fn dot_f32(self, w: &[f32], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_f32_dot_matches_scalar
            unsafe { avx2::dot_f32(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_f32(self, w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_matvec.rs::f32_pool_equals_single
            unsafe { avx2::matvec_f32(w, cols, x, out) }
        }
    }

    /// Proof that the CPU has AVX-512 F, VL and VNNI, plus AVX2, FMA and
    /// F16C.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Avx512VnniToken(());

    impl Avx512VnniToken {
        /// `Some` only if the running CPU has avx512f, avx512vl,
        /// avx512vnni, avx2, fma and f16c (never under Miri).
        pub(crate) fn new() -> Option<Self> {
            Avx2Token::new()?;
            let ok = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512vnni");
            ok.then_some(Self(()))
        }

        /// The AVX2 token this CPU also earns (for the f32 kernels).
        #[inline]
        pub(crate) fn avx2(self) -> Avx2Token {
            Avx2Token(())
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature `dot_q8` enables. Checked by:
            // tests/prop_quant.rs::avx512vnni_dot_matches_scalar
            unsafe { avx512vnni::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::avx512vnni_matvec_matches_dot
            unsafe { avx512vnni::matvec_q8(w, nb, x, out) }
        }
    }

    /// Proof that the CPU has AVX-VNNI, plus AVX2, FMA and F16C.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct AvxVnniToken(());

    impl AvxVnniToken {
        /// `Some` only if the running CPU has avxvnni, avx2, fma and f16c
        /// (never under Miri).
        pub(crate) fn new() -> Option<Self> {
            Avx2Token::new()?;
            std::is_x86_feature_detected!("avxvnni").then_some(Self(()))
        }

        /// The AVX2 token this CPU also earns (for the f32 kernels).
        #[inline]
        pub(crate) fn avx2(self) -> Avx2Token {
            Avx2Token(())
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `AvxVnniToken::new`
            // found every feature `dot_q8` enables. Checked by:
            // tests/prop_quant.rs::avxvnni_dot_matches_scalar
            unsafe { avxvnni::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::avxvnni_matvec_matches_dot
            unsafe { avxvnni::matvec_q8(w, nb, x, out) }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use crate::quant::activation::ActBlock;
    use crate::quant::block::BlockQ8_0;
    use crate::quant::dot::aarch64::neon;

    /// Proof that the CPU has NEON (always true on aarch64 Linux and
    /// macOS, but the kernels' `#[target_feature]` still asks for a check).
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct NeonToken(());

    impl NeonToken {
        /// `Some` only if the running CPU has NEON (never under Miri).
        pub(crate) fn new() -> Option<Self> {
            if cfg!(miri) {
                return None;
            }
            std::arch::is_aarch64_feature_detected!("neon").then_some(Self(()))
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `NeonToken::new` found
            // neon, the feature `dot_q8` enables. Checked by:
            // tests/prop_quant.rs::neon_dot_matches_scalar
            unsafe { neon::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::neon_matvec_matches_dot
            unsafe { neon::matvec_q8(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn dot_f32(self, w: &[f32], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::neon_f32_dot_matches_scalar
            unsafe { neon::dot_f32(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_f32(self, w: &[f32], cols: usize, x: &[f32], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_matvec.rs::f32_pool_equals_single
            unsafe { neon::matvec_f32(w, cols, x, out) }
        }
    }
}
