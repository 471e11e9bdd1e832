//! x86_64 kernels: AVX2 (with FMA and F16C), AVX-512 VNNI and AVX-VNNI;
//! `float` holds the F16 and BF16 weight kernels, AVX2 code that every
//! x86 kernel runs.
//!
//! The two VNNI Q8_0 kernels differ only in the integer part of a block:
//! each module defines `prep` (the weight block's side, computed once per
//! block and shared by every activation row it meets) and `lanes` (eight
//! exact `i32` lanes whose sum is the block's integer dot product).
//! Everything else, the f32 part and the loops, is `q8_kernels!` expanded
//! in each module, so the two return the same bits. AVX2's Q8_0 and Q4_0
//! kernels (`avx2_q8`) sum each block's lanes to one integer before any
//! float operation, and so round otherwise.

/// How far ahead of the weight block it is working on (in bytes) the
/// decode matvec asks for a cache line. A decode step streams hundreds of
/// megabytes of weights once each; on the Intel Xeon VMs this crate is
/// measured on, the hardware prefetchers alone kept a single thread at
/// about half the read bandwidth of a plain load loop, and a prefetch
/// 4 KiB ahead brought the kernel to within 15% of it (2 KiB and 16 KiB
/// measured within a few percent of 4 KiB; 512 bytes was too close). On an
/// AMD EPYC (Zen 5) VM, where one core computes about as fast as it
/// reads, 8 KiB beat 4 KiB on one thread: Q8_0's decode products 37.1-38.3
/// to 40.1-41.7 GB/s, Q6_K's 35.6-37.6 to 38.3-40.2 (`inferno bench
/// --kernels --model`, alternated; 16 KiB measured as 8), and a whole
/// Q8_0 decode step 53.8-55.7 to 57.2-61.5 tok/s; two threads, bound by
/// the shared bandwidth, unchanged. The bandwidth probe (`sum_bytes`)
/// asks as far ahead, as the products do.
pub(crate) const PREFETCH_AHEAD: usize = 8192;

/// How far ahead the decode products ask for their weights where they ask
/// for them in L2 ([`weights_to_l2`]): a whole row at a time, before the
/// row is computed. On an AMD EPYC (Zen 4) VM, Q8_0's decode products on
/// one thread (`inferno bench --kernels --model`, two or more alternated
/// runs of each distance): 4 KiB 17.9-18.2 GB/s, 8 KiB 21.3-22.6, 16 KiB
/// 22.9-23.7, 32 KiB 22.4-23.7.
pub(crate) const PREFETCH_AHEAD_L2: usize = 16384;

/// Blocks of a Q8_0 row whose lines are asked for in L2 together
/// ([`weights_to_l2`]): each piece of the row [`PREFETCH_AHEAD_L2`] bytes
/// on just before the row's own piece is computed, not the whole row at
/// once. On an AMD EPYC (Zen 4) VM, one thread, the 3072-wide `ffn_down`
/// products of a Q8_0 Qwen3-0.6B took 3.80-4.07 ms per token with the
/// whole row's lines asked for before the row and 3.29-3.52 in pieces of
/// 8 blocks (`inferno bench --trace`, three alternated rounds; pieces of
/// 4 and 16 blocks alike within the noise), the 1024-wide products
/// unchanged; `STREAM_COLS=3072 cargo bench --bench stream` read 0.91-0.94
/// of the probe's speed against 1.02-1.10.
pub(crate) const L2_PIECE_BLOCKS: usize = 8;

/// Whether the decode products ask for their weights in L2
/// (`prefetcht2`), in pieces of a row or a row at a time (each product's
/// doc says which), rather than in L1: on AMD Zen 4 (family `0x19` with
/// AVX-512; Zen 3, the same family without it, keeps the L1 hints it was
/// measured with), detected once.
///
/// On a Zen 4 core, prefetches into L1 slow the decode products down:
/// Q8_0's, on one thread (`inferno bench --kernels --model`, two
/// alternated runs), read 15.3-15.5 GB/s with the L1 hints a block at a
/// time, 14.5-14.6 with them a row at a time, 19.3-20.2 with no software
/// prefetch, and 21.3-22.6 with the L2 hint a row at a time at the same 8
/// KiB (22.9-23.7 at [`PREFETCH_AHEAD_L2`]); the L2 hint a block at a time
/// read 10. The eight-row K-quant kernels, whose rows the hardware
/// prefetchers do not follow, measured the same way: 7-9 GB/s with L1
/// hints, 15-18 with L2 ones (`avx512vnni::dot_q4_k_rows8`). Zen 5 and
/// the Intel Xeon, where the L1 hints were measured and tuned, keep them.
pub(crate) fn weights_to_l2() -> bool {
    use crate::unsafe_core::prefetch::{cpu_vendor_family, CpuVendor};
    #[cfg(test)]
    match TO_L2_IN_TESTS.load(std::sync::atomic::Ordering::Relaxed) {
        1 => return false,
        2 => return true,
        _ => {}
    }
    static TO_L2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TO_L2.get_or_init(|| {
        cpu_vendor_family() == Some((CpuVendor::Amd, 0x19))
            && std::arch::is_x86_feature_detected!("avx512f")
    })
}

/// Tests' switch that sends 128-wide attention scores through the AVX-512
/// kernel's general loop (`avx512vnni::scores_f16_n`) instead of its
/// straight-line form, so that one test can compare the two. Both give
/// the same bits, so tests running beside one that sets it are
/// unaffected.
#[cfg(test)]
pub(crate) static GENERAL_SCORES_IN_TESTS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether the tests-only `GENERAL_SCORES_IN_TESTS` is set (never,
/// outside tests).
#[inline]
pub(crate) fn general_scores() -> bool {
    #[cfg(test)]
    return GENERAL_SCORES_IN_TESTS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    false
}

/// Tests' choice for [`weights_to_l2`], so that one machine runs both
/// kinds of hint loop: 0 the CPU's own, 1 L1 hints, 2 L2 hints. The hints
/// never change a result, so tests running beside one that sets it are
/// unaffected.
#[cfg(test)]
pub(crate) static TO_L2_IN_TESTS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

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

        /// The row loop of `dot_q8`, calling `hint(b)` (a prefetch, or
        /// nothing) before each pair of blocks `b, b + 1`: even blocks
        /// into one accumulator, odd ones into the other, four blocks a
        /// step (the same adds in the same order as a pair a step, with
        /// half the loop's own work per block).
        #[inline]
        #[target_feature(enable = $features)]
        fn row_loop(w: &[BlockQ8_0], x: &[ActBlock], mut hint: impl FnMut(usize)) -> f32 {
            assert_eq!(w.len(), x.len(), "dot_q8: block counts differ");
            let (w4, w_rest) = w.as_chunks::<4>();
            let (x4, x_rest) = x.as_chunks::<4>();
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            for (k, (wq, xq)) in w4.iter().zip(x4).enumerate() {
                hint(4 * k);
                acc0 = block_fma(acc0, &wq[0], &xq[0]);
                acc1 = block_fma(acc1, &wq[1], &xq[1]);
                hint(4 * k + 2);
                acc0 = block_fma(acc0, &wq[2], &xq[2]);
                acc1 = block_fma(acc1, &wq[3], &xq[3]);
            }
            let done = 4 * w4.len();
            let (w2, w_last) = w_rest.as_chunks::<2>();
            let (x2, x_last) = x_rest.as_chunks::<2>();
            for ([wa, wb], [xa, xb]) in w2.iter().zip(x2) {
                hint(done);
                acc0 = block_fma(acc0, wa, xa);
                acc1 = block_fma(acc1, wb, xb);
            }
            if let ([wl], [xl]) = (w_last, x_last) {
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
            row_loop(w, x, |_| {})
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
        /// bytes ahead of the pair of blocks being read, or, where the
        /// weights are asked for in L2 ([`weights_to_l2`](super::weights_to_l2)),
        /// the row [`PREFETCH_AHEAD_L2`](super::PREFETCH_AHEAD_L2) bytes
        /// on, line by line, a piece of [`L2_PIECE_BLOCKS`](super::L2_PIECE_BLOCKS)
        /// blocks before the blocks it matches. Hints only: the same bits.
        ///
        /// # Panics
        ///
        /// If `x.len() != nb` or `w.len() != nb * out.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn matvec_q8(w: &[BlockQ8_0], nb: usize, x: &[ActBlock], out: &mut [f32]) {
            const BLOCK: usize = core::mem::size_of::<BlockQ8_0>();
            if !super::weights_to_l2() {
                crate::quant::dot::scalar::for_rows(w, nb, x.len(), out, |row| {
                    row_loop(row, x, |b| {
                        crate::unsafe_core::prefetch::prefetch_read(
                            row,
                            b * BLOCK + super::PREFETCH_AHEAD,
                        );
                    })
                });
                return;
            }
            let hint = crate::quant::dot::RowPrefetch::L2;
            crate::quant::dot::scalar::for_rows(w, nb, x.len(), out, |row| {
                let row_bytes = core::mem::size_of_val(row);
                let mut line = 0;
                let dot = row_loop(row, x, |b| {
                    if b % super::L2_PIECE_BLOCKS == 0 {
                        let end = ((b + super::L2_PIECE_BLOCKS) * BLOCK).min(row_bytes);
                        hint.lines_to(row, &mut line, end);
                    }
                });
                // An odd last block outside the pairs.
                hint.lines_to(row, &mut line, row_bytes);
                dot
            });
        }
    };
}

/// `picks[j]`: the `vpshufb` pattern that zero-extends byte `j` of each
/// `lane`-byte lane of a 128-bit half (`lane` 8 or 16) into each of that
/// lane's `i16` lanes (the high bytes zero: `0x80` picks nothing).
pub(super) const fn zero_extend_picks(lane: usize) -> [[u8; 32]; 8] {
    let mut p = [[0x80u8; 32]; 8];
    let mut j = 0;
    while j < 8 {
        let mut i = 0;
        while i < 32 {
            p[j][i] = (j + (i % 16) / lane * lane) as u8;
            i += 2;
        }
        j += 1;
    }
    p
}

/// `K4_SCALE_PICKS[j]`: the `vpshufb` pattern that zero-extends byte `j`
/// of a 128-bit half into all eight of its `i16` lanes.
static K4_SCALE_PICKS: [[u8; 32]; 8] = zero_extend_picks(16);

/// The K-quant weight side of one x86 instruction set at 256 bits (AVX2,
/// AVX-VNNI), given that module's `madd_acc(acc, a, b) -> __m256i`, which
/// adds `vpmaddwd(a, b)` to the eight `i32` lanes of `acc` (AVX2:
/// `vpmaddwd` then `vpaddd`; VNNI: one `vpdpwssd`). Defines what
/// `k_kernels!` reads: `K4Prep`/`Q6Prep` (a block's levels unpacked to
/// bytes, its scales spread to `i16` lanes), built once per weight block by
/// `q4_k_prep`, `q5_k_prep` and `q6_k_prep`, and `k4_lanes`/`q6_lanes`,
/// the integer part of one (weight block, activation block) pair.
///
/// The lanes are exact and the same in every instruction set: lane `m` of
/// a 32-weight step holds the products of bytes `4m..4m + 4` (the pairing
/// of `vpmaddubsw` then `vpmaddwd`), times the sub-block's scale, summed
/// over the block's eight steps. Integer addition is exact while nothing
/// overflows (each lane stays within `2^24` in magnitude, Q6_K's signed
/// scales reaching it, so its conversion to f32 is exact too), so neither
/// the order of the adds nor how the steps are grouped into registers can
/// change a lane.
macro_rules! k_prep_256 {
    ($features:literal) => {
        /// The weight side of a Q4_K or Q5_K block.
        struct K4Prep {
            /// Levels of the eight sub-blocks of 32, one byte each.
            q: [__m256i; 8],
            /// Each sub-block's 6-bit scale in all sixteen `i16` lanes.
            sc: [__m256i; 8],
            /// The mins, each repeated for the two 16-value sums it covers.
            mins: __m256i,
            /// The block's scale and min scale, widened.
            d: f32,
            dmin: f32,
        }

        /// Scales and mins of a Q4_K/Q5_K block (as `avx2::k4_head_gpr`
        /// decodes them, a byte each in `scales` and `mins`) spread with
        /// byte shuffles: the scale bytes copied to every 64-bit lane,
        /// then one `vpshufb` per sub-block zero-extends its scale into
        /// every `i16` lane. The shuffle patterns are read from memory
        /// (`K4_SCALE_PICKS` behind `black_box`): given them as constants,
        /// the compiler turned each into a `vpshufd` or shift and a
        /// `vpbroadcastw`, two operations where one does. The mins are
        /// widened to `i16`, each twice, for the two 16-value activation
        /// sums it covers.
        #[inline]
        #[target_feature(enable = $features)]
        fn k4_scales(scales: u64, mins: u64) -> ([__m256i; 8], __m256i) {
            let both = _mm256_set1_epi64x(scales as i64);
            let picks = core::hint::black_box(&super::K4_SCALE_PICKS);
            let sc = core::array::from_fn(|j| _mm256_shuffle_epi8(both, bytemuck::cast(picks[j])));
            let twice = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
            let m = _mm_shuffle_epi8(_mm_cvtsi64_si128(mins as i64), twice);
            (sc, _mm256_cvtepu8_epi16(m))
        }

        /// [`K4Prep`] of a Q4_K block: per 64 weights, one 32-byte load of
        /// nibbles gives the low sub-block (`& 0x0f`) and the high one
        /// (`>> 4`).
        #[inline]
        #[target_feature(enable = $features)]
        fn q4_k_prep(wb: &BlockQ4K) -> K4Prep {
            let low4 = _mm256_set1_epi8(0x0f);
            let head = &bytemuck::cast_ref::<_, [[u8; 16]; 9]>(wb)[0]; // 144 bytes
            let (scales, mins, dd) = super::avx2::k4_head_gpr(head);
            let (sc, mins) = k4_scales(scales, mins);
            let (d, dmin) = (_mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)));
            let (qs, _) = wb.qs.as_chunks::<32>();
            let mut q = [_mm256_setzero_si256(); 8];
            for (k, c) in qs.iter().enumerate() {
                let bits: __m256i = bytemuck::cast(*c);
                q[2 * k] = _mm256_and_si256(bits, low4);
                q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), low4);
            }
            K4Prep {
                q,
                sc,
                mins,
                d,
                dmin,
            }
        }

        /// [`K4Prep`] of a Q5_K block: the Q4_K nibbles with each
        /// sub-block's fifth bits added as 16 (bit `j` of each `qh` byte
        /// for sub-block `j`).
        #[inline]
        #[target_feature(enable = $features)]
        fn q5_k_prep(wb: &BlockQ5K) -> K4Prep {
            let low4 = _mm256_set1_epi8(0x0f);
            let one = _mm256_set1_epi8(1);
            let head = &bytemuck::cast_ref::<_, [[u8; 16]; 11]>(wb)[0]; // 176 bytes
            let (scales, mins, dd) = super::avx2::k4_head_gpr(head);
            let (sc, mins) = k4_scales(scales, mins);
            let (d, dmin) = (_mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)));
            let hb: __m256i = bytemuck::cast(wb.qh);
            // Bit `s` of each byte of `qh`, as 0 or 16 (the shift moves
            // 16-bit lanes, but the mask keeps only bit `s` of each byte's
            // own bits).
            let fifth = |s: i32| {
                let b = _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(s)), one);
                _mm256_slli_epi16::<4>(b)
            };
            let (qs, _) = wb.qs.as_chunks::<32>();
            let mut q = [_mm256_setzero_si256(); 8];
            for (k, c) in qs.iter().enumerate() {
                let bits: __m256i = bytemuck::cast(*c);
                q[2 * k] = _mm256_or_si256(_mm256_and_si256(bits, low4), fifth(2 * k as i32));
                q[2 * k + 1] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(bits), low4),
                    fifth(2 * k as i32 + 1),
                );
            }
            K4Prep {
                q,
                sc,
                mins,
                d,
                dmin,
            }
        }

        /// The integer lanes of a Q4_K/Q5_K block against an activation
        /// block: `vpmaddubsw` multiplies the unsigned levels (at most 31)
        /// by the signed activations into pairwise `i16` sums (at most
        /// `2 * 31 * 128`, no saturation), `madd_acc` multiplies them by
        /// the sub-block's scale into the `i32` lanes, in two chains (even
        /// and odd sub-blocks) so the adds do not wait on each other.
        #[inline]
        #[target_feature(enable = $features)]
        fn k4_lanes(p: &K4Prep, xb: &BlockQ8K) -> __m256i {
            let (q8, _) = xb.qs.as_chunks::<32>();
            let mut s = [_mm256_setzero_si256(); 2];
            for j in 0..8 {
                let xv: __m256i = bytemuck::cast(q8[j]);
                s[j % 2] = madd_acc(s[j % 2], _mm256_maddubs_epi16(p.q[j], xv), p.sc[j]);
            }
            _mm256_add_epi32(s[0], s[1])
        }

        /// `[k4_lanes(p, x[0]), .., k4_lanes(p, x[N - 1])]`, sub-block by
        /// sub-block: each sub-block's levels and scale meet all `N` rows
        /// while in registers, where a row at a time keeps the whole
        /// [`K4Prep`] (sixteen registers, all that AVX2 has) live and
        /// spills it. Lanes are exact `i32` sums, so the order changes no
        /// lane. The multi-row forms call it four rows at a time: with all
        /// eight rows of `dot_k_x8` in one pass, a 128-token prefill on one
        /// thread of an AMD EPYC (Zen 3) VM gained nothing over a row at a
        /// time (Q4_K_M 56-64 tok/s against 49-67), four at a time did
        /// (55-82), four alternated runs.
        #[inline]
        #[target_feature(enable = $features)]
        fn k4_lanes_n<const N: usize>(p: &K4Prep, x: [&BlockQ8K; N]) -> [__m256i; N] {
            let mut s = [_mm256_setzero_si256(); N];
            for j in 0..8 {
                for (si, xi) in s.iter_mut().zip(x) {
                    let xv: __m256i = bytemuck::cast(xi.qs.as_chunks::<32>().0[j]);
                    *si = madd_acc(*si, _mm256_maddubs_epi16(p.q[j], xv), p.sc[j]);
                }
            }
            s
        }

        /// The weight side of a Q6_K block.
        struct Q6Prep {
            /// Levels `0..=63` of the eight 32-weight steps, one byte each.
            q: [__m256i; 8],
            /// Each step's two scales (one per 16 weights, so the low and
            /// high 128-bit halves differ) in `i16` lanes.
            sc: [__m256i; 8],
            /// The block's scale, widened.
            d: f32,
        }

        /// [`Q6Prep`] of a block: per 128 weights, two 32-byte loads of low
        /// nibbles and one of high bit pairs rebuild four vectors of levels;
        /// step `j`'s scales (`2j` for its first 16 weights, `2j + 1` for
        /// the rest) come from the widened scales by a dword broadcast and
        /// a byte shuffle.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_k_prep(wb: &BlockQ6K) -> Q6Prep {
            let mut q = [_mm256_setzero_si256(); 8];
            for h in 0..2 {
                let [a, b, c, d] = q6_levels_half(wb, h);
                q[4 * h..4 * h + 4].copy_from_slice(&[a, b, c, d]);
            }
            let sc16 = _mm256_cvtepi8_epi16(bytemuck::cast(wb.scales));
            let sc = core::array::from_fn(|j| q6_step_scales(sc16, j));
            Q6Prep {
                q,
                sc,
                d: super::avx2::f16_pair(wb.d, [0; 2]).0,
            }
        }

        /// Levels `0..=63` of steps `4h .. 4h + 4` of a Q6_K block (its
        /// weights `128h ..`): two 32-byte loads of low nibbles and one of
        /// high bit pairs.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_levels_half(wb: &BlockQ6K, h: usize) -> [__m256i; 4] {
            let low4 = _mm256_set1_epi8(0x0f);
            let bits45 = _mm256_set1_epi8(0x30);
            let (ql, _) = wb.ql.as_chunks::<32>();
            let (qh, _) = wb.qh.as_chunks::<32>();
            let l1: __m256i = bytemuck::cast(ql[2 * h]);
            let l2: __m256i = bytemuck::cast(ql[2 * h + 1]);
            let hb: __m256i = bytemuck::cast(qh[h]);
            // Top bits `(qh >> 2i) & 3` moved to bits 4-5 of each byte: one
            // 16-bit shift of the bytes (none for `i = 2`) and one mask. The
            // shifts cross from byte to byte, but the mask keeps only bits
            // that came from their own byte (its bits 0-1, 2-3, 4-5 or 6-7).
            // On an AMD EPYC (Zen 4) VM, AVX2 (`INFERNO_KERNEL=avx2`), the
            // Q6_K decode rows in L2 ran 4% faster than with each pair
            // masked first and shifted up after (`STREAM_KB=256
            // STREAM_TYPES=q6_k cargo bench --bench stream`, alternated).
            let tops = [
                _mm256_and_si256(_mm256_slli_epi16::<4>(hb), bits45),
                _mm256_and_si256(_mm256_slli_epi16::<2>(hb), bits45),
                _mm256_and_si256(hb, bits45),
                _mm256_and_si256(_mm256_srli_epi16::<2>(hb), bits45),
            ];
            [
                _mm256_or_si256(_mm256_and_si256(l1, low4), tops[0]),
                _mm256_or_si256(_mm256_and_si256(l2, low4), tops[1]),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(l1), low4), tops[2]),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(l2), low4), tops[3]),
            ]
        }

        /// Step `j`'s two scales of a Q6_K block (`2j` for its first 16
        /// weights, `2j + 1` for the rest, so the low and high 128-bit
        /// halves differ) in `i16` lanes, from `sc16`, the sixteen scales
        /// widened: scales 0-7 (then 8-15) in both halves, then one
        /// `vpshufb`.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_step_scales(sc16: __m256i, j: usize) -> __m256i {
            let half = if j < 4 {
                _mm256_permute2x128_si256::<0x00>(sc16, sc16)
            } else {
                _mm256_permute2x128_si256::<0x11>(sc16, sc16)
            };
            let (lo, hi) = ((4 * j % 16) as i8, (4 * j % 16 + 2) as i8);
            let pick = _mm256_setr_epi8(
                lo,
                lo + 1,
                lo,
                lo + 1,
                lo,
                lo + 1,
                lo,
                lo + 1, //
                lo,
                lo + 1,
                lo,
                lo + 1,
                lo,
                lo + 1,
                lo,
                lo + 1, //
                hi,
                hi + 1,
                hi,
                hi + 1,
                hi,
                hi + 1,
                hi,
                hi + 1, //
                hi,
                hi + 1,
                hi,
                hi + 1,
                hi,
                hi + 1,
                hi,
                hi + 1,
            );
            _mm256_shuffle_epi8(half, pick)
        }

        /// The integer lanes of a Q6_K block against an activation block:
        /// `vpmaddubsw` of the levels by the activations (pairs at most
        /// `2 * 63 * 128`) minus `vpmaddubsw` of 32 by the activations
        /// (pairs at most `2 * 32 * 128` in magnitude, so the difference
        /// fits in `i16`) removes the levels' offset; `madd_acc` multiplies
        /// by the scales into the `i32` lanes, in two chains.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_lanes(p: &Q6Prep, xb: &BlockQ8K) -> __m256i {
            let m32 = _mm256_set1_epi8(32);
            let (q8, _) = xb.qs.as_chunks::<32>();
            let mut s = [_mm256_setzero_si256(); 2];
            for j in 0..8 {
                let xv: __m256i = bytemuck::cast(q8[j]);
                let pr = _mm256_sub_epi16(
                    _mm256_maddubs_epi16(p.q[j], xv),
                    _mm256_maddubs_epi16(m32, xv),
                );
                s[j % 2] = madd_acc(s[j % 2], pr, p.sc[j]);
            }
            _mm256_add_epi32(s[0], s[1])
        }

        /// Lanes that sum to what `q6_lanes`' lanes sum to when `xb.bsums`
        /// holds the sums of its values (as every activation block this
        /// crate quantizes does), and the block's `d`: the levels' offset
        /// of 32 comes off once per block, as `32 * sum_j scale_j *
        /// bsums_j` (one `vpmaddwd`), instead of as one more `vpmaddubsw`
        /// and a subtraction per step. The unsigned products stay within
        /// `i32`: at most `256 * 128 * 63 * 128 < 2^31` in magnitude.
        ///
        /// Each step's levels and scales are built just before its
        /// products. Built first as a whole ([`Q6Prep`]: sixteen registers
        /// of levels and scales, all AVX2 has), the compiler kept half of
        /// them on the stack (89 stack accesses in the decode loop against
        /// 21), and the Q6_K decode rows in L2 ran at a median of 18.0 GB/s
        /// against 20.3 on an AMD EPYC (Zen 4) VM, AVX2 (`INFERNO_KERNEL=avx2
        /// STREAM_KB=256 STREAM_TYPES=q6_k cargo bench --bench stream`,
        /// eight alternated runs; this and the high bits' shifts in
        /// [`q6_levels_half`] together).
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_summed(wb: &BlockQ6K, xb: &BlockQ8K) -> (__m256i, f32) {
            let (q8, _) = xb.qs.as_chunks::<32>();
            let sc16 = _mm256_cvtepi8_epi16(bytemuck::cast(wb.scales));
            let mut s = [_mm256_setzero_si256(); 2];
            for h in 0..2 {
                for (i, q) in q6_levels_half(wb, h).into_iter().enumerate() {
                    let j = 4 * h + i;
                    let xv: __m256i = bytemuck::cast(q8[j]);
                    let pr = _mm256_maddubs_epi16(q, xv);
                    s[j % 2] = madd_acc(s[j % 2], pr, q6_step_scales(sc16, j));
                }
            }
            let bsums: __m256i = bytemuck::cast(xb.bsums);
            let offset = _mm256_slli_epi32::<5>(_mm256_madd_epi16(bsums, sc16));
            let lanes = _mm256_sub_epi32(_mm256_add_epi32(s[0], s[1]), offset);
            (lanes, super::avx2::f16_pair(wb.d, [0; 2]).0)
        }

        /// `[q6_lanes(p, x[0]), .., q6_lanes(p, x[N - 1])]`, step by step
        /// (see `k4_lanes_n`).
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_lanes_n<const N: usize>(p: &Q6Prep, x: [&BlockQ8K; N]) -> [__m256i; N] {
            let m32 = _mm256_set1_epi8(32);
            let mut s = [_mm256_setzero_si256(); N];
            for j in 0..8 {
                for (si, xi) in s.iter_mut().zip(x) {
                    let xv: __m256i = bytemuck::cast(xi.qs.as_chunks::<32>().0[j]);
                    let pr = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(p.q[j], xv),
                        _mm256_maddubs_epi16(m32, xv),
                    );
                    *si = madd_acc(*si, pr, p.sc[j]);
                }
            }
            s
        }
    };
}

/// The K-quant kernels of one x86 instruction set (Q4_K, Q5_K and Q6_K
/// weights with Q8_K activations), given that module's weight side
/// (`k_prep_256!` or the AVX-512 one), compiled with `$features` so
/// everything inlines.
///
/// The single-row dot is prep then step per block; the four-row form
/// (`*_x4`) builds the prep once and runs the same step on each row, so
/// each of its four results is the single-row dot's, bit for bit. A
/// prefill meets every weight block with many activation rows, and for the
/// K-quants the weight side (nibble unpacking, 6-bit scale decoding) is
/// much of the work of a block.
///
/// The f32 part is written once here, and the integers are the same in
/// every instruction set, so every expansion returns the same bits: per
/// block, the lanes are summed exactly to one `i32` (the block's whole
/// scaled integer dot product, at most `2^27` in magnitude), one scalar FMA
/// adds `(d * d_x) * f32(sum)` to the row's running sum, and for Q4_K and
/// Q5_K `(dmin * d_x) * f32(mins . bsums)` is subtracted from a second
/// scalar sum; the row's value is the first sum plus the second. One
/// scalar per block and row (rather than eight lanes) is what lets a
/// prefill kernel keep one activation row per lane (`avx512vnni`'s
/// interleaved GEMM) and still return these bits. (The mins' term is kept
/// apart and subtracted unfused, in block order: orders that fold it into
/// the main sum met llama.cpp's results less often on a tiny Q5_K_M model,
/// an 8-bit activation rounding flipping at most positions.)
macro_rules! k_kernels {
    ($features:literal) => {
        /// Adds one Q8_K block's term to a Q4_K/Q5_K row's sums: the
        /// block's lanes and the mins' products (`vpmaddwd` of the
        /// activation's 16 sums with the mins) are summed exactly, one FMA
        /// adds `(d * d_x) * sum` to `acc`, and `(dmin * d_x) * mins_sum`
        /// is subtracted from `acc_min`.
        #[inline]
        #[target_feature(enable = $features)]
        fn k4_step(p: &K4Prep, xb: &BlockQ8K, acc: &mut f32, acc_min: &mut f32) {
            let bsums: __m256i = bytemuck::cast(xb.bsums);
            let prod_min = _mm256_madd_epi16(bsums, p.mins);
            let lanes = k4_lanes(p, xb);
            let (isum, msum) = super::avx2::hsum2_epi32(lanes, prod_min);
            *acc = (p.d * xb.d).mul_add(isum as f32, *acc);
            *acc_min -= (p.dmin * xb.d) * msum as f32;
        }

        /// Q4_K x Q8_K dot product (see `quant::dot_q4_k_q8_k` for the
        /// scalar reference), blocks paired in order; extra blocks on either
        /// side are ignored (the caller checks the counts). The sums are
        /// ordered differently from the scalar kernel's, so the result is
        /// within its error bound of the exact value, not its bits.
        #[inline]
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q4_k(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
            let (mut acc, mut acc_min) = (0.0f32, 0.0f32);
            for (wb, xb) in w.iter().zip(x) {
                k4_step(&q4_k_prep(wb), xb, &mut acc, &mut acc_min);
            }
            acc + acc_min
        }

        /// `[dot_q4_k(w, x[0]), .., dot_q4_k(w, x[3])]`, bit for bit (NaN
        /// payloads aside), unpacking each weight block once.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q4_k_x4(w: &[BlockQ4K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            k4_xn(w, x, |b| q4_k_prep(b))
        }

        /// Q5_K x Q8_K dot product (see `quant::dot_q5_k_q8_k` for the
        /// scalar reference): [`dot_q4_k`] with the fifth bits.
        #[inline]
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q5_k(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
            let (mut acc, mut acc_min) = (0.0f32, 0.0f32);
            for (wb, xb) in w.iter().zip(x) {
                k4_step(&q5_k_prep(wb), xb, &mut acc, &mut acc_min);
            }
            acc + acc_min
        }

        /// `[dot_q5_k(w, x[0]), .., dot_q5_k(w, x[3])]`, bit for bit (NaN
        /// payloads aside), unpacking each weight block once.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q5_k_x4(w: &[BlockQ5K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            k4_xn(w, x, |b| q5_k_prep(b))
        }

        /// `[dot_q4_k(w, x[0]), .., dot_q4_k(w, x[7])]` (or Q5_K's, Q6_K's,
        /// by `w`'s type), bit for bit (NaN payloads aside): a prefill's
        /// product unpacks each weight block once for eight activation rows.
        ///
        /// # Panics
        ///
        /// If any `x[i].len()` differs from the row's block count.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_k_x8(w: crate::quant::dot::KRow<'_>, x: [&[BlockQ8K]; 8]) -> [f32; 8] {
            match w {
                crate::quant::dot::KRow::Q4K(w) => k4_xn(w, x, |b| q4_k_prep(b)),
                crate::quant::dot::KRow::Q5K(w) => k4_xn(w, x, |b| q5_k_prep(b)),
                crate::quant::dot::KRow::Q6K(w) => q6_xn(w, x),
            }
        }

        /// The `N`-row loop of the Q4_K and Q5_K kernels (`N` a multiple
        /// of 4): `k4_step` of four rows at a time, the eight exact sums
        /// (four rows' lanes, four rows' mins) reduced together and the
        /// same multiplies, FMA and subtraction run lane by lane, so each
        /// result is the single-row dot's, bit for bit.
        #[inline]
        #[target_feature(enable = $features)]
        fn k4_xn<B, const N: usize>(
            w: &[B],
            x: [&[BlockQ8K]; N],
            prep: impl Fn(&B) -> K4Prep,
        ) -> [f32; N] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
            }
            // The sums of rows `4g..4g + 4` in `acc[g]` and `acc_min[g]`
            // (only the first `N / 4` are used).
            let mut acc = [_mm_setzero_ps(); N];
            let mut acc_min = [_mm_setzero_ps(); N];
            for (b, wb) in w.iter().enumerate() {
                let p = prep(wb);
                for g in (0..N).step_by(4) {
                    let xb = [&x[g][b], &x[g + 1][b], &x[g + 2][b], &x[g + 3][b]];
                    let lanes = k4_lanes_n(&p, xb);
                    let mut prod = [_mm256_setzero_si256(); 4];
                    for i in 0..4 {
                        prod[i] = _mm256_madd_epi16(bytemuck::cast(xb[i].bsums), p.mins);
                    }
                    let isums = super::avx2::hsum4_epi32(lanes);
                    let msums = super::avx2::hsum4_epi32(prod);
                    let dx = _mm_setr_ps(xb[0].d, xb[1].d, xb[2].d, xb[3].d);
                    let d = _mm_mul_ps(_mm_set1_ps(p.d), dx);
                    acc[g / 4] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(isums), acc[g / 4]);
                    let dmin = _mm_mul_ps(_mm_set1_ps(p.dmin), dx);
                    acc_min[g / 4] =
                        _mm_sub_ps(acc_min[g / 4], _mm_mul_ps(dmin, _mm_cvtepi32_ps(msums)));
                }
            }
            core::array::from_fn(|i| {
                let a: [f32; 4] = bytemuck::cast(acc[i / 4]);
                let m: [f32; 4] = bytemuck::cast(acc_min[i / 4]);
                a[i % 4] + m[i % 4]
            })
        }

        /// Adds one Q8_K block's term to a Q6_K row's sum: the lanes summed
        /// exactly, then one FMA of `(d * d_x) * sum`.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_step(p: &Q6Prep, xb: &BlockQ8K, acc: &mut f32) {
            let isum = super::avx2::hsum_epi32(q6_lanes(p, xb));
            *acc = (p.d * xb.d).mul_add(isum as f32, *acc);
        }

        /// Q6_K x Q8_K dot product (see `quant::dot_q6_k_q8_k` for the
        /// scalar reference), blocks paired in order; extra blocks on either
        /// side are ignored (the caller checks the counts).
        #[inline]
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q6_k(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            let mut acc = 0.0f32;
            for (wb, xb) in w.iter().zip(x) {
                q6_step(&q6_k_prep(wb), xb, &mut acc);
            }
            acc
        }

        /// `dot_q6_k(w, x)`, bit for bit, for activation blocks whose
        /// `bsums` hold the sums of their values (every block this crate
        /// quantizes; the decode products' activations are such blocks):
        /// the block sums are the same exact integers, the levels' offset
        /// taken off once per block from those sums (`q6_summed`),
        /// which leaves half the multiplies per block.
        #[inline]
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q6_k_summed(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
            q6_summed_loop(w, x, |_| {})
        }

        /// The loop of [`dot_q6_k_summed`], calling `hint(b)` (a prefetch,
        /// or nothing) before the group of four blocks from block `b` and
        /// before the blocks left over.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_summed_loop(w: &[BlockQ6K], x: &[BlockQ8K], mut hint: impl FnMut(usize)) -> f32 {
            let n = w.len().min(x.len());
            let (w4, w_rest) = w[..n].as_chunks::<4>();
            let (x4, x_rest) = x[..n].as_chunks::<4>();
            let mut acc = 0.0f32;
            // Four blocks' lanes summed together, one horizontal sum for
            // the four, then their FMAs in block order, as one at a time.
            for (g, (wq, xq)) in w4.iter().zip(x4).enumerate() {
                hint(4 * g);
                let mut lanes = [_mm256_setzero_si256(); 4];
                let mut d = [0.0f32; 4];
                for i in 0..4 {
                    let (l, dw) = q6_summed(&wq[i], &xq[i]);
                    lanes[i] = l;
                    d[i] = dw * xq[i].d;
                }
                let sums: [f32; 4] =
                    bytemuck::cast(_mm_cvtepi32_ps(super::avx2::hsum4_epi32(lanes)));
                for (di, si) in d.into_iter().zip(sums) {
                    acc = di.mul_add(si, acc);
                }
            }
            if !w_rest.is_empty() {
                hint(4 * w4.len());
            }
            for (wb, xb) in w_rest.iter().zip(x_rest) {
                let (l, dw) = q6_summed(wb, xb);
                let isum = super::avx2::hsum_epi32(l);
                acc = (dw * xb.d).mul_add(isum as f32, acc);
            }
            acc
        }

        /// `out[r] = dot_q6_k_summed(row r of w, x)` for the `out.len()`
        /// rows of `nb` blocks (a decode product: `x` was quantized here,
        /// so its sums are its values'), asking for each row's lines in
        /// pieces, four blocks' worth on before the four blocks they match:
        /// [`PREFETCH_AHEAD_L2`](super::PREFETCH_AHEAD_L2) bytes on into L2
        /// where the weights are asked for in L2
        /// ([`weights_to_l2`](super::weights_to_l2)), elsewhere
        /// [`PREFETCH_AHEAD`](super::PREFETCH_AHEAD) bytes on into L1.
        /// Hints only: the same bits.
        ///
        /// On an AMD EPYC (Zen 4) VM, one thread, a Q6_K Qwen3-0.6B's
        /// 3072-wide `ffn_down` products took 3.26-3.31 ms per token with
        /// each row's lines asked for in L2 before the row and 2.80-2.86 in
        /// four-block pieces, and the whole decode step 21.4-21.7 against
        /// 20.6-20.9 (`inferno bench --trace`, three alternated rounds);
        /// `STREAM_COLS=3072 cargo bench --bench stream` 0.91-0.94 of the
        /// probe's speed against 1.02-1.05, and 1.00 either way at 1024
        /// columns, where the row-at-a-time hints went to L1.
        ///
        /// On an AMD EPYC (Zen 3) VM, AVX2, one thread, the L1 hints in
        /// the same pieces, against a burst of a row's L1 hints before the
        /// row: `STREAM_COLS=3072 cargo bench --bench stream` 0.98 of the
        /// probe's speed against 0.73-0.78, 0.97-1.06 against 0.81-0.94 at
        /// 1024 columns (three alternated runs); a Q4_K_M Qwen3-0.6B's
        /// `ffn_down` products 3.5-4.0 ms per token against 5.1-5.3, a
        /// Q6_K one's 4.3-5.6 against 6.4-7.5 (`inferno bench --trace`,
        /// three alternated rounds).
        ///
        /// # Panics
        ///
        /// If `x.len() != nb` or `w.len() != nb * out.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn matvec_q6_k(w: &[BlockQ6K], nb: usize, x: &[BlockQ8K], out: &mut [f32]) {
            const BLOCK: usize = core::mem::size_of::<BlockQ6K>();
            use crate::quant::dot::RowPrefetch;
            let l2 = super::weights_to_l2();
            crate::quant::dot::scalar::for_rows(w, nb, x.len(), out, |row| {
                let row_bytes = core::mem::size_of_val(row);
                let mut line = 0;
                let hint = if l2 { RowPrefetch::L2 } else { RowPrefetch::L1 };
                q6_summed_loop(row, x, |b| {
                    hint.lines_to(row, &mut line, ((b + 4) * BLOCK).min(row_bytes));
                })
            });
        }

        /// `[dot_q6_k(w, x[0]), .., dot_q6_k(w, x[3])]`, bit for bit (NaN
        /// payloads aside), unpacking each weight block once.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q6_k_x4(w: &[BlockQ6K], x: [&[BlockQ8K]; 4]) -> [f32; 4] {
            q6_xn(w, x)
        }

        /// The `N`-row loop of the Q6_K kernels (`N` a multiple of 4):
        /// `q6_step` of four rows at a time, their sums reduced together
        /// and the FMA run lane by lane.
        #[inline]
        #[target_feature(enable = $features)]
        fn q6_xn<const N: usize>(w: &[BlockQ6K], x: [&[BlockQ8K]; N]) -> [f32; N] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "K-quant dot: block counts differ");
            }
            let mut acc = [_mm_setzero_ps(); N];
            for (b, wb) in w.iter().enumerate() {
                let p = q6_k_prep(wb);
                for g in (0..N).step_by(4) {
                    let xb = [&x[g][b], &x[g + 1][b], &x[g + 2][b], &x[g + 3][b]];
                    let lanes = q6_lanes_n(&p, xb);
                    let isums = super::avx2::hsum4_epi32(lanes);
                    let dx = _mm_setr_ps(xb[0].d, xb[1].d, xb[2].d, xb[3].d);
                    let d = _mm_mul_ps(_mm_set1_ps(p.d), dx);
                    acc[g / 4] = _mm_fmadd_ps(d, _mm_cvtepi32_ps(isums), acc[g / 4]);
                }
            }
            core::array::from_fn(|i| {
                let a: [f32; 4] = bytemuck::cast(acc[i / 4]);
                a[i % 4]
            })
        }
    };
}

/// The Q4_0 kernels (Q4_0 weights with Q8_0 activations) of one x86
/// instruction set, given that module's `q4_lanes(nibbles, x) -> __m256i`,
/// compiled with `$features` so everything inlines.
///
/// A block's 16 bytes unpack into 32 unsigned levels `0..=15` (low nibbles
/// then high nibbles, the block's weight order); `q4_lanes` returns eight
/// exact `i32` lanes, lane `m` holding `sum (q - 8) * x` over bytes
/// `4m..4m + 4`: one `vpdpbusd` starting from the activation's
/// `-8 * (x[4m] + .. + x[4m + 3])` (its stored `-128 * sum` shifted right
/// by 4, exact), for any activation byte. The f32 part is the Q8_0
/// kernels': `(d_w * d_x) * f32(lanes)` fused into two accumulators that
/// alternate between even and odd blocks, one fixed horizontal sum; the
/// four-row form, which runs the same operations per row with each weight
/// block unpacked once, returns the single-row bits. AVX-VNNI runs these;
/// AVX2's Q4_0 kernels (`avx2_q8`) and AVX-512 VNNI's, which share their
/// bits, sum each block exactly first and round otherwise.
macro_rules! q4_0_kernels {
    ($features:literal) => {
        /// The 32 levels `0..=15` of a Q4_0 block, in weight order: the
        /// 16 bytes loaded into both halves (`vbroadcasti128`, a load), the
        /// high half shifted by 4 (`vpsrlvd`: a byte's top nibble comes
        /// down, and what comes in from the next byte is masked off). No
        /// shuffle: a decode of Q4_0 is bound by this kernel's arithmetic,
        /// and the shuffle port is its busiest.
        #[inline]
        #[target_feature(enable = $features)]
        fn q4_0_prep(w: &BlockQ4_0) -> __m256i {
            let both = _mm256_broadcastsi128_si256(bytemuck::cast(w.qs));
            let shifted = _mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
            _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f))
        }

        /// The f16 scale of a Q4_0 block, widened, in all eight lanes
        /// (built from a broadcast; see `avx2::scale8` for why).
        #[inline]
        #[target_feature(enable = $features)]
        fn q4_0_scale8(w: &BlockQ4_0) -> __m256 {
            let h = _mm_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(w.d)));
            _mm256_set_m128(h, h)
        }

        /// `-8 * (x[4m] + .. + x[4m + 3])` in lane `m`.
        #[inline]
        #[target_feature(enable = $features)]
        fn q4_0_bias(x: &ActBlock) -> __m256i {
            _mm256_srai_epi32::<4>(bytemuck::cast(x.neg_bias))
        }

        /// One Q4_0 block's term added to `acc`.
        #[inline]
        #[target_feature(enable = $features)]
        fn q4_0_fma(acc: __m256, q: __m256i, d8: __m256, x: &ActBlock) -> __m256 {
            let d = _mm256_mul_ps(d8, _mm256_set1_ps(x.d));
            _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q4_lanes(q, x)), acc)
        }

        /// Q4_0 x Q8_0 dot product (see `quant::dot_q4_0_act` for the
        /// scalar reference, whose f32 sums are ordered otherwise: this
        /// result is within the Q8_0 kernels' error bound of it, not its
        /// bits).
        ///
        /// # Panics
        ///
        /// If `w.len() != x.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q4_0(w: &[BlockQ4_0], x: &[ActBlock]) -> f32 {
            assert_eq!(w.len(), x.len(), "dot_q4_0: block counts differ");
            let (w2, w_rest) = w.as_chunks::<2>();
            let (x2, x_rest) = x.as_chunks::<2>();
            let mut acc0 = _mm256_setzero_ps();
            let mut acc1 = _mm256_setzero_ps();
            for ([wa, wb], [xa, xb]) in w2.iter().zip(x2) {
                acc0 = q4_0_fma(acc0, q4_0_prep(wa), q4_0_scale8(wa), xa);
                acc1 = q4_0_fma(acc1, q4_0_prep(wb), q4_0_scale8(wb), xb);
            }
            if let ([wl], [xl]) = (w_rest, x_rest) {
                acc0 = q4_0_fma(acc0, q4_0_prep(wl), q4_0_scale8(wl), xl);
            }
            super::avx2::hsum(_mm256_add_ps(acc0, acc1))
        }

        /// `[dot_q4_0(w, x[0]), .., dot_q4_0(w, x[3])]`, bit for bit (NaN
        /// payloads aside), unpacking each weight block once.
        ///
        /// # Panics
        ///
        /// If any `x[i].len() != w.len()`.
        #[target_feature(enable = $features)]
        pub(crate) fn dot_q4_0_x4(w: &[BlockQ4_0], x: [&[ActBlock]; 4]) -> [f32; 4] {
            for xi in x {
                assert_eq!(w.len(), xi.len(), "dot_q4_0: block counts differ");
            }
            let mut even = [_mm256_setzero_ps(); 4];
            let mut odd = [_mm256_setzero_ps(); 4];
            let (w2, w_rest) = w.as_chunks::<2>();
            for (k, [wa, wb]) in w2.iter().enumerate() {
                let (pa, pb) = (q4_0_prep(wa), q4_0_prep(wb));
                let (da, db) = (q4_0_scale8(wa), q4_0_scale8(wb));
                for i in 0..4 {
                    even[i] = q4_0_fma(even[i], pa, da, &x[i][2 * k]);
                    odd[i] = q4_0_fma(odd[i], pb, db, &x[i][2 * k + 1]);
                }
            }
            if let [wl] = w_rest {
                let (p, d) = (q4_0_prep(wl), q4_0_scale8(wl));
                for i in 0..4 {
                    even[i] = q4_0_fma(even[i], p, d, &x[i][w.len() - 1]);
                }
            }
            core::array::from_fn(|i| super::avx2::hsum(_mm256_add_ps(even[i], odd[i])))
        }
    };
}

pub(crate) mod avx2;
pub(crate) mod avx2_q8;
pub(crate) mod avx512vnni;
pub(crate) mod avxvnni;
pub(crate) mod float;

/// Asks for the `width` bytes of the cached key or value row
/// [`KV_PREFETCH_ROWS`] rows (of `stride` bytes) after the row at
/// `row_offset` bytes into `data`, or, where the weights are asked for in L2 ([`weights_to_l2`]),
/// the row [`KV_PREFETCH_ROWS_L2`] on, in L2. A hint: the same bits with
/// or without it, any offset allowed.
///
/// [`KV_PREFETCH_ROWS`]: crate::quant::dot::KV_PREFETCH_ROWS
/// [`KV_PREFETCH_ROWS_L2`]: crate::quant::dot::KV_PREFETCH_ROWS_L2
#[inline]
pub(crate) fn kv_row_hint<T>(data: &[T], row_offset: usize, stride: usize, width: usize) {
    use crate::quant::dot::{KV_PREFETCH_ROWS, KV_PREFETCH_ROWS_L2};
    use crate::unsafe_core::prefetch::{prefetch_read, prefetch_read_l2};
    if weights_to_l2() {
        let ahead = row_offset.wrapping_add(KV_PREFETCH_ROWS_L2.wrapping_mul(stride));
        for line in (0..width).step_by(64) {
            prefetch_read_l2(data, ahead.wrapping_add(line));
        }
    } else {
        let ahead = row_offset.wrapping_add(KV_PREFETCH_ROWS.wrapping_mul(stride));
        for line in (0..width).step_by(64) {
            prefetch_read(data, ahead.wrapping_add(line));
        }
    }
}
