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
//! rely on. On aarch64 this module also holds `sdot`, the one instruction
//! of the dot-product extension the kernels use, as inline assembly
//! (`[SIMD-SDOT]`), because its intrinsic is not stable Rust.

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2Token, Avx512VnniToken, AvxVnniToken};

#[cfg(target_arch = "aarch64")]
pub(crate) use arm::{sdot, NeonDotToken, NeonToken};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use half::f16;

    use crate::quant::activation::{ActBlock, NibbleGroup, PairBlock};
    use crate::quant::block::{BlockQ8_0, QK8_0};
    use crate::quant::dot::x86_64::{avx2, avx512vnni, avxvnni};
    use crate::quant::dot::KRow;
    use crate::quant::kgroup::{
        B32Levels, B32Signed, K4Levels, K4Rows16, Q4_0Act, Q4_0Rows16, Q6Levels, Q6Rows16, Q8Group,
        Q8KAct, Q8KGroup, GROUP_ROWS, ROWS16,
    };
    use crate::quant::packed::{BlockQ4Kx8, BlockQ4_0x8, BlockQ5Kx8};
    use crate::quant::q4_0::BlockQ4_0;
    use crate::quant::q4_k::BlockQ4K;
    use crate::quant::q5_k::BlockQ5K;
    use crate::quant::q6_k::BlockQ6K;
    use crate::quant::q8_k::BlockQ8K;
    use crate::quant::QK_K;

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
        pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::dot_q8_x4_equals_dot_q8
            unsafe { avx2::dot_q8_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0(self, w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves every feature the kernel
            // enables. Checked by: src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { avx2::dot_q4_0(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_groups(
            self,
            w: &[BlockQ4_0],
            g: &[NibbleGroup],
            x: &[ActBlock],
        ) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::q4_0_groups_equal_dot_q4_0
            unsafe { avx2::dot_q4_0_groups(w, g, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_x4(self, w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves every feature the kernel
            // enables. Checked by: src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { avx2::dot_q4_0_x4(w, x) }
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
        pub(crate) fn quantize_q8_k(self, x: &[[f32; QK_K]], out: &mut [BlockQ8K]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::quantize_q8_k_is_the_portable_quantizer
            unsafe { avx2::quantize_q8_k(x, out) }
        }

        #[inline]
        pub(crate) fn unpack_row<B, L>(self, row: &[B], out: &mut Vec<L>, f: impl Fn(&B) -> L) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/matvec/weight.rs::prefill_rows_equal_decode_dots_for_every_batch_size
            unsafe { avx2::unpack_row(row, out, f) }
        }

        #[inline]
        pub(crate) fn dot_q4_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_q4_k_dot_matches_scalar
            unsafe { avx2::dot_q4_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_rows8(self, w: [&[BlockQ4K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::k_rows8_equal_dot_k
            unsafe { avx2::dot_q4_k_rows8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_rows8(self, w: [&[BlockQ5K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::k_rows8_equal_dot_k
            unsafe { avx2::dot_q5_k_rows8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_packed8(self, w: &[BlockQ4Kx8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::packed_k_equals_dot_k
            unsafe { avx2::dot_q4_k_packed8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_packed8(self, w: &[BlockQ5Kx8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::packed_k_equals_dot_k
            unsafe { avx2::dot_q5_k_packed8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_packed8(
            self,
            w: &[BlockQ4_0x8],
            g: &[NibbleGroup],
            x: &[ActBlock],
        ) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::packed_q4_0_equals_dot_q4_0
            unsafe { avx2::dot_q4_0_packed8(w, g, x) }
        }

        #[inline]
        pub(crate) fn gemm_k4_4x8(
            self,
            w: [&[K4Levels]; 4],
            x: &[Q8KGroup],
        ) -> [[f32; GROUP_ROWS]; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::k_gemm_equals_the_reference_and_dot_k
            unsafe { avx2::gemm_k4_4x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_b32s_1x8(self, w: &[B32Signed], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::b32_gemm_equals_the_reference_and_the_dots
            unsafe { avx2::gemm_b32s_1x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_b32s_2x8(
            self,
            w: [&[B32Signed]; 2],
            x: &[Q8Group],
        ) -> [[f32; GROUP_ROWS]; 2] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::b32_gemm_equals_the_reference_and_the_dots
            unsafe { avx2::gemm_b32s_2x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_q4_0_1x8(self, w: &[B32Levels], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::b32_gemm_equals_the_reference_and_the_dots
            unsafe { avx2::gemm_q4_0_1x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_q4_0_4x8(
            self,
            w: [&[B32Levels]; 4],
            x: &[Q8Group],
        ) -> [[f32; GROUP_ROWS]; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::b32_gemm_equals_the_reference_and_the_dots
            unsafe { avx2::gemm_q4_0_4x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_q6_4x8(
            self,
            w: [&[Q6Levels]; 4],
            x: &[Q8KGroup],
        ) -> [[f32; GROUP_ROWS]; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features this kernel enables.
            // Checked by: src/quant/dot/mod.rs::k_gemm_equals_the_reference_and_dot_k
            unsafe { avx2::gemm_q6_4x8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_q5_k_dot_matches_scalar
            unsafe { avx2::dot_q5_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_q6_k_dot_matches_scalar
            unsafe { avx2::dot_q6_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_summed(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::q6_k_summed_equals_dot_q6_k
            unsafe { avx2::dot_q6_k_summed(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q6_k(
            self,
            w: &[BlockQ6K],
            nb: usize,
            x: &[BlockQ8K],
            out: &mut [f32],
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c. Checked by:
            // src/quant/dot/mod.rs::matvec_q6_k_equals_dot_q6_k
            unsafe { avx2::matvec_q6_k(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_x4(self, w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx2::dot_q4_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_x4(self, w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx2::dot_q5_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_x4(self, w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx2::dot_q6_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_k_x8(self, w: KRow<'_>, x: [&[BlockQ8K]; 8]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x8_equals_dot_k
            unsafe { avx2::dot_k_x8(w, x) }
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

        #[inline]
        pub(crate) fn dot_f16(self, x: &[f32], k: &[f16]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::avx2_f16_kernels_match_scalar
            unsafe { avx2::dot_f16(x, k) }
        }

        #[inline]
        pub(crate) fn sum_bytes(self, bytes: &[u8], prefetch: bool) -> u64 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::sum_bytes_is_the_word_checksum
            unsafe { avx2::sum_bytes(bytes, prefetch) }
        }

        #[inline]
        pub(crate) fn dot_f16_x2(self, x: [&[f32]; 2], k: &[f16]) -> [f32; 2] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::dot_f16_x2_is_two_dot_f16
            unsafe { avx2::dot_f16_x2(x, k) }
        }

        #[inline]
        pub(crate) fn scores_f16_x2(
            self,
            q: [&[f32]; 2],
            k: &[f16],
            scale: f32,
            out: [&mut [f32]; 2],
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::scores_f16_x2_are_each_rows_dot
            unsafe { avx2::scores_f16_x2(q, k, scale, out) }
        }

        #[inline]
        pub(crate) fn softmax(self, x: &mut [f32]) -> (f32, f64) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::softmax_kernels_are_the_portable_softmax
            unsafe { avx2::softmax(x) }
        }

        #[inline]
        pub(crate) fn swiglu(self, gate: &mut [f32], up: &[f32]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::swiglu_kernels_are_the_portable_swiglu
            unsafe { avx2::swiglu(gate, up) }
        }

        #[inline]
        pub(crate) fn argmax(self, x: &[f32]) -> u32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/sample.rs::tests::argmax_equals_one_running_maximum
            unsafe { avx2::argmax(x) }
        }

        #[inline]
        pub(crate) fn round_f16(self, x: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::f16_conversions_are_the_portable_ones
            unsafe { avx2::round_f16(x) }
        }

        #[inline]
        pub(crate) fn to_f16(self, src: &[f32], dst: &mut [f16]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::f16_conversions_are_the_portable_ones
            unsafe { avx2::to_f16(src, dst) }
        }

        #[inline]
        pub(crate) fn weighted_sum_f16_x2(
            self,
            out: [&mut [f32]; 2],
            ps: [&[f32]; 2],
            v: &[f16],
            stride: usize,
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::weighted_sum_f16_is_axpy_in_order
            unsafe { avx2::weighted_sum_f16_x2(out, ps, v, stride) }
        }

        #[inline]
        pub(crate) fn weighted_sum_f16(
            self,
            out: &mut [f32],
            ps: &[f32],
            v: &[f16],
            stride: usize,
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::weighted_sum_f16_is_axpy_in_order
            unsafe { avx2::weighted_sum_f16(out, ps, v, stride) }
        }

        /// Used by the tests, as the reference of `weighted_sum_f16`.
        #[cfg(test)]
        pub(crate) fn axpy_f16(self, out: &mut [f32], p: f32, v: &[f16]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::avx2_f16_kernels_match_scalar
            unsafe { avx2::axpy_f16(out, p, v) }
        }
    }

    /// Proof that the CPU has AVX-512 F, VL, BW and VNNI, plus AVX2, FMA
    /// and F16C (every CPU with AVX-512 VNNI has BW).
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Avx512VnniToken(());

    impl Avx512VnniToken {
        /// `Some` only if the running CPU has avx512f, avx512vl,
        /// avx512bw, avx512vnni, avx2, fma and f16c (never under Miri).
        pub(crate) fn new() -> Option<Self> {
            Avx2Token::new()?;
            let ok = std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vnni");
            ok.then_some(Self(()))
        }

        /// The AVX2 token this CPU also earns (for the f32 kernels).
        #[inline]
        pub(crate) fn avx2(self) -> Avx2Token {
            Avx2Token(())
        }

        #[inline]
        pub(crate) fn sum_bytes(self, bytes: &[u8], prefetch: bool) -> u64 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::sum_bytes_is_the_word_checksum
            unsafe { avx512vnni::sum_bytes(bytes, prefetch) }
        }

        #[inline]
        pub(crate) fn dot_f16_x2(self, x: [&[f32]; 2], k: &[f16]) -> [f32; 2] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::dot_f16_x2_is_two_dot_f16
            unsafe { avx512vnni::dot_f16_x2(x, k) }
        }

        #[inline]
        pub(crate) fn scores_f16_x2(
            self,
            q: [&[f32]; 2],
            k: &[f16],
            scale: f32,
            out: [&mut [f32]; 2],
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::scores_f16_x2_are_each_rows_dot
            unsafe { avx512vnni::scores_f16_x2(q, k, scale, out) }
        }

        #[inline]
        pub(crate) fn softmax(self, x: &mut [f32]) -> (f32, f64) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::softmax_kernels_are_the_portable_softmax
            unsafe { avx512vnni::softmax(x) }
        }

        #[inline]
        pub(crate) fn swiglu(self, gate: &mut [f32], up: &[f32]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::swiglu_kernels_are_the_portable_swiglu
            unsafe { avx512vnni::swiglu(gate, up) }
        }

        #[inline]
        pub(crate) fn argmax(self, x: &[f32]) -> u32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/sample.rs::tests::argmax_equals_one_running_maximum
            unsafe { avx512vnni::argmax(x) }
        }

        #[inline]
        pub(crate) fn round_f16(self, x: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::f16_conversions_are_the_portable_ones
            unsafe { avx512vnni::round_f16(x) }
        }

        #[inline]
        pub(crate) fn weighted_sum_f16_x2(
            self,
            out: [&mut [f32]; 2],
            ps: [&[f32]; 2],
            v: &[f16],
            stride: usize,
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::weighted_sum_f16_is_axpy_in_order
            unsafe { avx512vnni::weighted_sum_f16_x2(out, ps, v, stride) }
        }

        #[inline]
        pub(crate) fn scores_f16_x4(
            self,
            q: [&[f32]; 4],
            k: &[f16],
            scale: f32,
            out: [&mut [f32]; 4],
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::four_query_attention_kernels_are_two_pairs
            unsafe { avx512vnni::scores_f16_x4(q, k, scale, out) }
        }

        #[inline]
        pub(crate) fn weighted_sum_f16_x4(
            self,
            out: [&mut [f32]; 4],
            ps: [&[f32]; 4],
            v: &[f16],
            stride: usize,
        ) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::four_query_attention_kernels_are_two_pairs
            unsafe { avx512vnni::weighted_sum_f16_x4(out, ps, v, stride) }
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature `dot_q8` enables. Checked by:
            // tests/prop_quant.rs::avx512vnni_dot_matches_scalar
            unsafe { avx512vnni::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn quantize_q8_k(self, x: &[[f32; QK_K]], out: &mut [BlockQ8K]) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::quantize_q8_k_is_the_portable_quantizer
            unsafe { avx512vnni::quantize_q8_k(x, out) }
        }

        #[inline]
        pub(crate) fn unpack_row<B, L>(self, row: &[B], out: &mut Vec<L>, f: impl Fn(&B) -> L) {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/matvec/weight.rs::prefill_rows_equal_decode_dots_for_every_batch_size
            unsafe { avx512vnni::unpack_row(row, out, f) }
        }

        #[inline]
        pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_q8_x4_equals_dot_q8
            unsafe { avx512vnni::dot_q8_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q8_x4_pairs(
            self,
            w: &[BlockQ8_0],
            pairs: [&[PairBlock]; 4],
            x: [&[ActBlock]; 4],
        ) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::avx512_pairs_equal_dot_q8
            unsafe { avx512vnni::dot_q8_x4_pairs(w, pairs, x) }
        }

        #[inline]
        pub(crate) fn dot_q8_2x4_pairs(
            self,
            w: [&[BlockQ8_0]; 2],
            pairs: [&[PairBlock]; 4],
            x: [&[ActBlock]; 4],
        ) -> [[f32; 4]; 2] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::avx512_pairs_equal_dot_q8
            unsafe { avx512vnni::dot_q8_2x4_pairs(w, pairs, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_groups(
            self,
            w: &[BlockQ4_0],
            g: &[NibbleGroup],
            x: &[ActBlock],
        ) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma, f16c,
            // avx512f, avx512vl, avx512bw and avx512vnni.
            // Checked by: src/quant/dot/mod.rs::q4_0_groups_equal_dot_q4_0
            unsafe { avx512vnni::dot_q4_0_groups(w, g, x) }
        }

        #[inline]
        pub(crate) fn gemm_k4_4x8(
            self,
            w: [&[K4Levels]; 4],
            x: &[Q8KGroup],
        ) -> [[f32; GROUP_ROWS]; 4] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k_gemm_equals_the_reference_and_dot_k
            unsafe { avx512vnni::gemm_k4_4x8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_packed8(
            self,
            w: &[BlockQ4_0x8],
            g: &[NibbleGroup],
            x: &[ActBlock],
        ) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::packed_q4_0_equals_dot_q4_0
            unsafe { avx512vnni::dot_q4_0_packed8(w, g, x) }
        }

        #[inline]
        pub(crate) fn gemm_k4_rows16<const T: usize>(
            self,
            w: &[K4Rows16],
            x: [&[Q8KAct]; T],
        ) -> [[f32; ROWS16]; T] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k4_rows16_gemm_equals_the_reference_and_dot_k
            unsafe { avx512vnni::gemm_k4_rows16(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_q6_rows16<const T: usize>(
            self,
            w: &[Q6Rows16],
            x: [&[Q8KAct]; T],
        ) -> [[f32; ROWS16]; T] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::q6_rows16_gemm_equals_the_reference_and_dot_q6_k
            unsafe { avx512vnni::gemm_q6_rows16(w, x) }
        }

        #[inline]
        pub(crate) fn q6_tile_rows(self, tile: &mut [Q6Rows16], rows: [&[BlockQ6K]; ROWS16]) {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::q6_rows16_gemm_equals_the_reference_and_dot_q6_k
            unsafe { avx512vnni::q6_tile_rows(tile, rows) }
        }

        #[inline]
        pub(crate) fn k4_tile_levels(
            self,
            t: &mut K4Rows16,
            qs: [&[[[u8; 8]; 8]; 16]; 2],
            qh: Option<[&[[[u8; 8]; 8]; 4]; 2]>,
        ) {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k4_rows16_gemm_equals_the_reference_and_dot_k
            unsafe { avx512vnni::k4_tile_levels(t, qs, qh) }
        }

        #[inline]
        pub(crate) fn k4_tile_heads(self, t: &mut K4Rows16, heads: [&[[u8; 16]; 8]; 2]) {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k4_tile_heads_equal_set_head
            unsafe { avx512vnni::k4_tile_heads(t, heads) }
        }

        #[inline]
        pub(crate) fn gemm_q4_0_rows16<const T: usize>(
            self,
            w: &[Q4_0Rows16],
            x: [&[Q4_0Act]; T],
        ) -> [[f32; ROWS16]; T] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::q4_0_rows16_gemm_equals_the_reference_and_the_dots
            unsafe { avx512vnni::gemm_q4_0_rows16(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_b32_2x8(
            self,
            w: [&[B32Levels]; 2],
            x: &[Q8Group],
        ) -> [[f32; GROUP_ROWS]; 2] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::b32_gemm_equals_the_reference_and_the_dots
            unsafe { avx512vnni::gemm_b32_2x8(w, x) }
        }

        #[inline]
        pub(crate) fn gemm_q6_4x8(
            self,
            w: [&[Q6Levels]; 4],
            x: &[Q8KGroup],
        ) -> [[f32; GROUP_ROWS]; 4] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k_gemm_equals_the_reference_and_dot_k
            unsafe { avx512vnni::gemm_q6_4x8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avx512vnni::dot_q4_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_rows8(self, w: [&[BlockQ4K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `Avx512VnniToken::new`
            // found every feature this kernel enables (avx512bw included).
            // Checked by: src/quant/dot/mod.rs::k_rows8_equal_dot_k
            unsafe { avx512vnni::dot_q4_k_rows8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_packed8(self, w: &[BlockQ4Kx8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q4_k_rows8`. Checked by:
            // src/quant/dot/mod.rs::packed_k_equals_dot_k
            unsafe { avx512vnni::dot_q4_k_packed8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_packed8(self, w: &[BlockQ5Kx8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q4_k_rows8`. Checked by:
            // src/quant/dot/mod.rs::packed_k_equals_dot_k
            unsafe { avx512vnni::dot_q5_k_packed8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_rows8(self, w: [&[BlockQ5K]; 8], x: &[BlockQ8K]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q4_k_rows8`. Checked by:
            // src/quant/dot/mod.rs::k_rows8_equal_dot_k
            unsafe { avx512vnni::dot_q5_k_rows8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_x4(self, w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx512vnni::dot_q4_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avx512vnni::dot_q5_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_x4(self, w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx512vnni::dot_q5_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avx512vnni::dot_q6_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_summed(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::q6_k_summed_equals_dot_q6_k
            unsafe { avx512vnni::dot_q6_k_summed(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q6_k(
            self,
            w: &[BlockQ6K],
            nb: usize,
            x: &[BlockQ8K],
            out: &mut [f32],
        ) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::matvec_q6_k_equals_dot_q6_k
            unsafe { avx512vnni::matvec_q6_k(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_x4(self, w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avx512vnni::dot_q6_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_k_x8(self, w: KRow<'_>, x: [&[BlockQ8K]; 8]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x8_equals_dot_k
            unsafe { avx512vnni::dot_k_x8(w, x) }
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
        pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_q8_x4_equals_dot_q8
            unsafe { avxvnni::dot_q8_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avxvnni::dot_q4_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_x4(self, w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avxvnni::dot_q4_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avxvnni::dot_q5_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_x4(self, w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avxvnni::dot_q5_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::vnni_k_dots_equal_avx2
            unsafe { avxvnni::dot_q6_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_summed(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::q6_k_summed_equals_dot_q6_k
            unsafe { avxvnni::dot_q6_k_summed(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q6_k(
            self,
            w: &[BlockQ6K],
            nb: usize,
            x: &[BlockQ8K],
            out: &mut [f32],
        ) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::matvec_q6_k_equals_dot_q6_k
            unsafe { avxvnni::matvec_q6_k(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_x4(self, w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { avxvnni::dot_q6_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_k_x8(self, w: KRow<'_>, x: [&[BlockQ8K]; 8]) -> [f32; 8] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x8_equals_dot_k
            unsafe { avxvnni::dot_k_x8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0(self, w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves every feature the kernel
            // enables. Checked by: src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { avxvnni::dot_q4_0(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_x4(self, w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves every feature the kernel
            // enables. Checked by: src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { avxvnni::dot_q4_0_x4(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::avxvnni_matvec_matches_dot
            unsafe { avxvnni::matvec_q8(w, nb, x, out) }
        }
    }

    // ---- F16 and BF16 weight rows (`quant::dot::x86_64::float`) ----
    //
    // The AVX-512 VNNI and AVX-VNNI kernels reach these through
    // `avx2()`: the same code, the same bits.

    use crate::quant::dot::x86_64::float;

    impl Avx2Token {
        #[inline]
        pub(crate) fn dot_f16w(self, w: &[f16], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c, the
            // features `float::dot_f16w` enables. Checked by:
            // tests/prop_quant.rs::avx2_f16_weight_dot_matches_scalar
            unsafe { float::dot_f16w(w, x) }
        }

        #[inline]
        pub(crate) fn dot_f16w_x4(self, w: &[f16], x: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::float_dot_x4_equals_dot
            unsafe { float::dot_f16w_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_bf16w(self, w: &[half::bf16], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: tests/prop_quant.rs::avx2_bf16_weight_dot_matches_scalar
            unsafe { float::dot_bf16w(w, x) }
        }

        #[inline]
        pub(crate) fn dot_bf16w_x4(self, w: &[half::bf16], x: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves avx2, fma and f16c.
            // Checked by: src/quant/dot/mod.rs::float_dot_x4_equals_dot
            unsafe { float::dot_bf16w_x4(w, x) }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use core::arch::aarch64::{int32x4_t, int8x16_t};
    use core::arch::asm;

    use crate::quant::activation::ActBlock;
    use crate::quant::block::BlockQ8_0;
    use crate::quant::dot::aarch64::{kquant, neon, neon_dot};
    use crate::quant::q4_0::BlockQ4_0;
    use crate::quant::q4_k::BlockQ4K;
    use crate::quant::q5_k::BlockQ5K;
    use crate::quant::q6_k::BlockQ6K;
    use crate::quant::q8_k::BlockQ8K;

    /// `sdot`: to each `i32` lane `k` of `acc`, adds the dot product of the
    /// signed bytes `4k..4k + 4` of `a` and of `b` (wrapping, like the
    /// instruction; a Q8_0 block adds at most `8 * 128 * 128` to a lane
    /// that starts at zero, so the kernels never wrap).
    ///
    /// The intrinsic `vdotq_s32` is not stable Rust; the instruction is.
    /// Being a `#[target_feature]` function, this is callable without
    /// `unsafe` only from code compiled with `dotprod`, i.e. from the
    /// kernels a `NeonDotToken` guards.
    #[inline]
    #[target_feature(enable = "neon,dotprod")]
    pub(crate) fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        // SAFETY: [SIMD-SDOT] one `sdot` on three vector registers the
        // compiler allocates: it reads `a`, `b` and `acc`, writes only
        // `acc`, and touches no memory, stack or flags, as the options
        // declare; `dotprod` is enabled on this function, so it runs only
        // where the CPU has the instruction. Checked by:
        // tests/prop_quant.rs::neon_dot_equals_neon_bit_for_bit
        unsafe {
            asm!(
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        acc
    }

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
        pub(crate) fn dot_q4_0(self, w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves neon, the feature
            // `neon::dot_q4_0` enables. Checked by:
            // src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { neon::dot_q4_0(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_0_x4(self, w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q4_0`. Checked by:
            // src/quant/dot/mod.rs::dot_q4_0_kernels_agree
            unsafe { neon::dot_q4_0_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `NeonToken::new` found
            // neon, the feature `dot_q8` enables. Checked by:
            // tests/prop_quant.rs::neon_dot_matches_scalar
            unsafe { neon::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_q8_x4_equals_dot_q8
            unsafe { neon::dot_q8_x4(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::neon_matvec_matches_dot
            unsafe { neon::matvec_q8(w, nb, x, out) }
        }

        #[inline]
        pub(crate) fn dot_q4_k(self, w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::neon_k_dots_equal_scalar
            unsafe { kquant::dot_q4_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q4_k_x4(self, w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { kquant::dot_q4_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k(self, w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::neon_k_dots_equal_scalar
            unsafe { kquant::dot_q5_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q5_k_x4(self, w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { kquant::dot_q5_k_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k(self, w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::neon_k_dots_equal_scalar
            unsafe { kquant::dot_q6_k(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q6_k_x4(self, w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_k_x4_equals_dot_k
            unsafe { kquant::dot_q6_k_x4(w, x) }
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

    /// Proof that the CPU has NEON and the dot-product extension.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct NeonDotToken(());

    impl NeonDotToken {
        /// `Some` only if the running CPU has neon and dotprod (never
        /// under Miri).
        pub(crate) fn new() -> Option<Self> {
            NeonToken::new()?;
            std::arch::is_aarch64_feature_detected!("dotprod").then_some(Self(()))
        }

        /// The NEON token this CPU also earns (for the f32 kernels).
        #[inline]
        pub(crate) fn neon(self) -> NeonToken {
            NeonToken(())
        }

        #[inline]
        pub(crate) fn dot_q8(self, w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            // SAFETY: [SIMD-TOKEN] `self` exists, so `NeonDotToken::new`
            // found neon and dotprod, the features `dot_q8` enables.
            // Checked by: tests/prop_quant.rs::neon_dot_dot_matches_scalar
            unsafe { neon_dot::dot_q8(w, x) }
        }

        #[inline]
        pub(crate) fn dot_q8_x4(self, w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // src/quant/dot/mod.rs::dot_q8_x4_equals_dot_q8
            unsafe { neon_dot::dot_q8_x4(w, x) }
        }

        #[inline]
        pub(crate) fn matvec_q8(self, w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            // SAFETY: [SIMD-TOKEN] as in `dot_q8`. Checked by:
            // tests/prop_quant.rs::neon_dot_matvec_matches_dot
            unsafe { neon_dot::matvec_q8(w, nb, x, out) }
        }
    }

    // ---- F16 and BF16 weight rows (`quant::dot::aarch64::float`) ----
    //
    // `NeonDotToken` reaches these through `neon()`.

    use crate::quant::dot::aarch64::float;
    use half::{bf16, f16};

    impl NeonToken {
        #[inline]
        pub(crate) fn dot_f16w(self, w: &[f16], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves neon, the feature
            // `float::dot_f16w` enables. Checked by:
            // tests/prop_quant.rs::neon_f16_weight_dot_matches_scalar
            unsafe { float::dot_f16w(w, x) }
        }

        #[inline]
        pub(crate) fn dot_f16w_x4(self, w: &[f16], x: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves neon. Checked by:
            // src/quant/dot/mod.rs::float_dot_x4_equals_dot
            unsafe { float::dot_f16w_x4(w, x) }
        }

        #[inline]
        pub(crate) fn dot_bf16w(self, w: &[bf16], x: &[f32]) -> f32 {
            // SAFETY: [SIMD-TOKEN] the token proves neon. Checked by:
            // tests/prop_quant.rs::neon_bf16_weight_dot_matches_scalar
            unsafe { float::dot_bf16w(w, x) }
        }

        #[inline]
        pub(crate) fn dot_bf16w_x4(self, w: &[bf16], x: [&[f32]; 4]) -> [f32; 4] {
            // SAFETY: [SIMD-TOKEN] the token proves neon. Checked by:
            // src/quant/dot/mod.rs::float_dot_x4_equals_dot
            unsafe { float::dot_bf16w_x4(w, x) }
        }
    }
}
