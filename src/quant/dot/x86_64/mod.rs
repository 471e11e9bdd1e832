//! x86_64 kernels: AVX2 (with FMA and F16C), AVX-512 VNNI and AVX-VNNI.
//!
//! The three Q8_0 kernels differ only in the integer part of a block: each
//! module defines `prep` (the weight block's side, computed once per block
//! and shared by every activation row it meets) and `lanes` (eight exact
//! `i32` lanes whose sum is the block's integer dot product), and the lanes
//! are the same in all three. Everything else, the f32 part and the loops,
//! is `q8_kernels!` expanded in each module, so the three kernels return
//! the same bits.

/// How far ahead of the weight block it is working on (in bytes) the
/// decode matvec asks for a cache line. A decode step streams hundreds of
/// megabytes of weights once each; on the Intel Xeon VMs this crate is
/// measured on, the hardware prefetchers alone kept a single thread at
/// about half the read bandwidth of a plain load loop, and a prefetch
/// 4 KiB ahead brought the kernel to within 15% of it (2 KiB and 16 KiB
/// measured within a few percent of 4 KiB; 512 bytes was too close).
pub(crate) const PREFETCH_AHEAD: usize = 4096;

/// The Q8_0 kernels of one x86 instruction set, given that module's
/// `prep(&BlockQ8_0) -> Weight` and `lanes(Weight, &ActBlock) -> __m256i`,
/// compiled with `$features` so both inline:
///
/// * `dot_q8`: blocks alternate between two 8-lane accumulators (hiding
///   the FMA latency), an odd last block goes to the first, and one fixed
///   horizontal sum ends the row; each block adds
///   `(d_w * d_x) * f32(lanes)` with one FMA;
/// * `dot_q8_x4`: `dot_q8` of one weight row with four activation rows,
///   bit for bit, computing each weight block's `prep` and scale once;
/// * `matvec_q8`: `dot_q8` of every row, prefetching [`PREFETCH_AHEAD`]
///   bytes ahead (a hint: the same bits as `dot_q8`).
macro_rules! q8_kernels {
    ($features:literal) => {
        /// One block's term added to `acc`: `d8 * d_x` (the weight scale,
        /// in every lane, times the activation scale, one rounding as in
        /// the scalar kernel) fused-multiply-added with the lanes of
        /// `lanes(ws, x)`.
        #[inline]
        #[target_feature(enable = $features)]
        fn term_fma(acc: __m256, ws: Weight, d8: __m256, x: &ActBlock) -> __m256 {
            let d = _mm256_mul_ps(d8, _mm256_set1_ps(x.d));
            _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes(ws, x)), acc)
        }

        /// Adds one block's term to `acc`.
        #[inline]
        #[target_feature(enable = $features)]
        fn block_fma(acc: __m256, w: &BlockQ8_0, x: &ActBlock) -> __m256 {
            term_fma(acc, prep(w), super::avx2::scale8(w), x)
        }

        /// The row loop of `dot_q8`, prefetching ahead of `w` if `PREFETCH`.
        #[inline]
        #[target_feature(enable = $features)]
        fn row_loop<const PREFETCH: bool>(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            assert_eq!(w.len(), x.len(), "dot_q8: block counts differ");
            let (w2, w_rest) = w.as_chunks::<2>();
            let (x2, x_rest) = x.as_chunks::<2>();
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            for (k, ([wa, wb], [xa, xb])) in w2.iter().zip(x2).enumerate() {
                if PREFETCH {
                    let at = k * core::mem::size_of::<[BlockQ8_0; 2]>();
                    crate::unsafe_core::prefetch::prefetch_read(w, at + super::PREFETCH_AHEAD);
                }
                acc0 = block_fma(acc0, wa, xa);
                acc1 = block_fma(acc1, wb, xb);
            }
            if let ([wl], [xl]) = (w_rest, x_rest) {
                acc0 = block_fma(acc0, wl, xl);
            }
            super::avx2::hsum(_mm256_add_ps(acc0, acc1))
        }

        /// Dot product of a Q8_0 weight row with a quantized activation.
        ///
        /// # Panics
        ///
        /// If `w.len() != x.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q8(w: &[BlockQ8_0], x: &[ActBlock]) -> f32 {
            row_loop::<false>(w, x)
        }

        /// `[dot_q8(w, x[0]), .., dot_q8(w, x[3])]`, bit for bit (a NaN
        /// result, from a NaN or infinite scale, may carry another NaN
        /// payload), computing each weight block's `prep` and scale once for
        /// the four rows. A prefill's matmul spends its time here: its
        /// weight rows sit in cache, so the work per block, not memory, is
        /// what limits it. Each row keeps `dot_q8`'s two accumulators and
        /// its final sum.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q8_x4(w: &[BlockQ8_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "dot_q8: block counts differ");
            }
            let mut even = [_mm256_setzero_ps(); 4];
            let mut odd = [_mm256_setzero_ps(); 4];
            let (w2, w_rest) = w.as_chunks::<2>();
            for (k, [wa, wb]) in w2.iter().enumerate() {
                let (pa, pb) = (prep(wa), prep(wb));
                let (da, db) = (super::avx2::scale8(wa), super::avx2::scale8(wb));
                for i in 0..4 {
                    even[i] = term_fma(even[i], pa, da, &x[i][2 * k]);
                    odd[i] = term_fma(odd[i], pb, db, &x[i][2 * k + 1]);
                }
            }
            if let [wl] = w_rest {
                let (p, d) = (prep(wl), super::avx2::scale8(wl));
                for i in 0..4 {
                    even[i] = term_fma(even[i], p, d, &x[i][w.len() - 1]);
                }
            }
            core::array::from_fn(|i| super::avx2::hsum(_mm256_add_ps(even[i], odd[i])))
        }

        /// `out[r] = dot_q8(row r of w, x)` for the `out.len()` rows of `nb`
        /// blocks, prefetching [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD)
        /// bytes ahead of the row being read.
        ///
        /// # Panics
        ///
        /// If `x.len() != nb` or `w.len() != nb * out.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            crate::quant::dot::scalar::for_rows(w, nb, x.len(), out, |row| {
                row_loop::<true>(row, x)
            });
        }
    };
}

pub(crate) mod avx2;
pub(crate) mod avx512vnni;
pub(crate) mod avxvnni;
