//! x86_64 kernels: AVX2 (with FMA and F16C), AVX-512 VNNI and AVX-VNNI.
//!
//! The three Q8_0 kernels share everything but the integer part of a block
//! (`block_lanes` in the VNNI kernels, inside `row_fma` in AVX2), which
//! yields the same eight exact `i32` lanes in each;
//! the f32 part is the `q8_row_loop!` macro below, so they return the same
//! bits.

/// The Q8_0 row loop shared by the x86 kernels, expanded inside each
/// kernel so it is compiled with that kernel's features: blocks alternate
/// between two 8-lane accumulators (hiding the FMA latency), an odd last
/// block goes to the first, and one fixed horizontal sum ends the row.
/// `$block_fma(acc, w, x)` adds one block's term.
macro_rules! q8_row_loop {
    ($w:expr, $x:expr, $block_fma:ident) => {{
        let (w, x): (&[BlockQ8_0], &[ActBlock]) = ($w, $x);
        assert_eq!(w.len(), x.len(), "dot_q8: block counts differ");
        let (w2, w_rest) = w.as_chunks::<2>();
        let (x2, x_rest) = x.as_chunks::<2>();
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        for ([wa, wb], [xa, xb]) in w2.iter().zip(x2) {
            acc0 = $block_fma(acc0, wa, xa);
            acc1 = $block_fma(acc1, wb, xb);
        }
        if let ([wl], [xl]) = (w_rest, x_rest) {
            acc0 = $block_fma(acc0, wl, xl);
        }
        super::avx2::hsum(_mm256_add_ps(acc0, acc1))
    }};
}

pub(crate) mod avx2;
pub(crate) mod avx512vnni;
pub(crate) mod avxvnni;
