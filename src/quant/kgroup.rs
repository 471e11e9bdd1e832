//! The operands of the K-quant prefill GEMM: eight activation rows
//! interleaved so that a 512-bit register holds the same eight columns of
//! each row, and each weight row's levels and scales unpacked once.
//!
//! A single-row K-quant dot spends much of a block on folding sixteen
//! lanes of one (weight row, activation row) pair into one number. With
//! the activation rows interleaved, a register's eight 64-bit slots belong
//! to eight activation rows: the weight's eight bytes are broadcast, one
//! `vpmaddubsw` multiplies them into all eight rows at once, and each
//! block ends with one sum per row already in place. The kernels' integers
//! are the single-row dot's exact block sums and their float operations
//! the single-row dot's, per row, so the GEMM returns the decode product's
//! bits ([`gemm_k4_reference`] and [`gemm_q6_reference`] state them in
//! plain Rust; the AVX-512 kernels are `x86_64::avx512vnni::gemm_*`, and
//! `x86_64::avx2::gemm_k4_4x8` and `gemm_q6_4x8` run the same steps on
//! four rows per 256-bit register, for AVX2 and AVX-VNNI). The Q8_0 and
//! Q4_0 GEMMs read [`Q8Group`]s the same way: with AVX-512 VNNI
//! `avx512vnni::gemm_b32_2x8` (Q8_0, with [`B32Levels`]), and on AVX2
//! `avx2_q8::gemm_b32s_2x8` with Q8_0's [`B32Signed`] and
//! `avx2_q8::gemm_q4_0_4x8` with Q4_0's [`B32Levels`] (two and four
//! weight rows a call, each row what the one-row `gemm_b32s_1x8` and
//! `gemm_q4_0_1x8` give it). AVX-512 VNNI's Q4_0
//! GEMM turns the layout around: sixteen weight rows interleaved
//! ([`Q4_0Rows16`]) against the activation rows as they are
//! ([`Q4_0Act`]).

use bytemuck::{Pod, Zeroable};

use super::activation::ActBlock;
use super::kcommon::{f16_le_to_f32, scale_min_k4};
use super::{
    BlockQ4K, BlockQ4Kx8, BlockQ4_0, BlockQ4_0x8, BlockQ5K, BlockQ5Kx8, BlockQ6K, BlockQ8K,
    BlockQ8_0, QK_K,
};

/// Activation rows per [`Q8KGroup`].
pub(crate) const GROUP_ROWS: usize = 8;

/// One 256-column block of eight Q8_K activation rows, interleaved.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Q8KGroup {
    /// `qs[s][8a..8a + 8]` = row `a`'s values `8s..8s + 8`.
    pub(crate) qs: [[i8; 64]; QK_K / 8],
    /// `bs32[h][4a + i]` = row `a`'s sum over sub-block `4h + i` of 32
    /// (from its stored 16-value sums, as the single-row mins term).
    pub(crate) bs32: [[i16; 32]; 2],
    /// `bs16[t][4a + i]` = row `a`'s sum of values `16(4t + i)..+16` (its
    /// stored sums: the single-row Q6_K kernel takes its offset from the
    /// values themselves, the same numbers for a block this crate
    /// quantized, the only blocks a batch groups).
    pub(crate) bs16: [[i16; 32]; 4],
    /// Each row's scale.
    pub(crate) d: [f32; GROUP_ROWS],
    _pad: [u8; 32],
}

const _: () = assert!(core::mem::size_of::<Q8KGroup>() == 2496);

impl Q8KGroup {
    /// Block `b` of eight rows.
    ///
    /// # Panics
    ///
    /// If any row has no block `b`.
    #[cfg(test)]
    pub(crate) fn new(rows: [&[BlockQ8K]; GROUP_ROWS], b: usize) -> Self {
        let mut g = Self::zeroed();
        g.fill(rows, b);
        g
    }

    /// Writes block `b` of eight rows into `self` (every field but the
    /// padding): a batch fills its groups where they lie instead of
    /// copying 2.5 KiB each.
    ///
    /// # Panics
    ///
    /// If any row has no block `b`.
    pub(crate) fn fill(&mut self, rows: [&[BlockQ8K]; GROUP_ROWS], b: usize) {
        let g = self;
        for (a, row) in rows.iter().enumerate() {
            let x = &row[b];
            let (chunks, _) = x.qs.as_chunks::<8>();
            for (s, c) in chunks.iter().enumerate() {
                g.qs[s][8 * a..8 * a + 8].copy_from_slice(c);
            }
            for j in 0..8 {
                // Each stored sum is at most 16 * 128 in magnitude in a
                // block quantized by this crate (the only blocks a batch
                // groups), so the pair's sum is exact in `i16`.
                let (h, i) = (j / 4, j % 4);
                g.bs32[h][4 * a + i] = x.bsums[2 * j].wrapping_add(x.bsums[2 * j + 1]);
            }
            for (j, &sum) in x.bsums.iter().enumerate() {
                let (t, i) = (j / 4, j % 4);
                g.bs16[t][4 * a + i] = sum;
            }
            g.d[a] = x.d;
        }
    }
}

/// A Q4_K or Q5_K weight block unpacked for the GEMM.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct K4Levels {
    /// The 256 levels (`0..=15` or `0..=31`), in weight order.
    pub(crate) q: [u8; QK_K],
    /// Sub-block `j`'s scale in both halves of an `i32` (a `vpmaddwd`
    /// operand that multiplies a pair of `i16` sums by it).
    pub(crate) sc: [i32; 8],
    /// Sub-block `j`'s min.
    pub(crate) mins: [i16; 8],
    /// The block's scale and min scale, widened.
    pub(crate) d: f32,
    pub(crate) dmin: f32,
}

const _: () = assert!(core::mem::size_of::<K4Levels>() == 312);

#[inline(always)]
fn scale_pair(s: i16) -> i32 {
    // Both halves hold `s`; the low half is the bit pattern of `s`.
    (i32::from(s) << 16) | i32::from(s as u16)
}

impl K4Levels {
    #[inline(always)]
    fn from_parts(q: [u8; QK_K], sm: impl Fn(usize) -> (u8, u8), d: f32, dmin: f32) -> Self {
        let mut k = Self::zeroed();
        k.q = q;
        for j in 0..8 {
            let (s, m) = sm(j);
            k.sc[j] = scale_pair(i16::from(s));
            k.mins[j] = i16::from(m);
        }
        k.d = d;
        k.dmin = dmin;
        k
    }

    #[inline(always)]
    pub(crate) fn q4_k(b: &BlockQ4K) -> Self {
        Self::from_parts(b.levels(), |j| b.scale_min(j), b.d_f32(), b.dmin_f32())
    }

    /// Row `lane`'s block of a packed Q4_K group's block:
    /// `q4_k(&b.row(lane))`, with the row's words read where they lie
    /// (no copy of the row's block on the way).
    #[inline(always)]
    pub(crate) fn q4_k_packed(b: &BlockQ4Kx8, lane: usize) -> Self {
        let mut q = [0u8; QK_K];
        // Word `k` is the row's nibble bytes `8k..8k + 8`: in GGML's order
        // those of 32-byte run `k / 4` (low nibbles the run's first
        // sub-block, high nibbles its second), at byte `8 * (k % 4)`.
        for (k, words) in b.qs.iter().enumerate() {
            let at = 64 * (k / 4) + 8 * (k % 4);
            let (lo, hi) = q[at..at + 40].split_at_mut(32);
            for ((l, h), &v) in lo[..8].iter_mut().zip(&mut hi[..8]).zip(&words[lane]) {
                *l = v & 0xf;
                *h = v >> 4;
            }
        }
        let h = &b.heads[lane];
        let scales: &[u8; 12] = h[4..].try_into().expect("16-byte head");
        Self::from_parts(
            q,
            |j| scale_min_k4(j, scales),
            f16_le_to_f32([h[0], h[1]]),
            f16_le_to_f32([h[2], h[3]]),
        )
    }

    /// Row `lane`'s block of a packed Q5_K group's block:
    /// `q5_k(&b.row(lane))`, the nibbles read as
    /// [`q4_k_packed`](Self::q4_k_packed) reads them (the packed Q5_K
    /// block begins with a packed Q4_K block's bytes) and the fifth bits
    /// from the row's `qh` words where they lie.
    #[inline(always)]
    pub(crate) fn q5_k_packed(b: &BlockQ5Kx8, lane: usize) -> Self {
        let head: &BlockQ4Kx8 =
            bytemuck::from_bytes(&bytemuck::bytes_of(b)[..core::mem::size_of::<BlockQ4Kx8>()]);
        let mut k = Self::q4_k_packed(head, lane);
        // Word `u` holds the fifth bits of positions `8u..8u + 8` of every
        // sub-block, bit `j` for sub-block `j` (levels `32j..32j + 32`).
        for (u, words) in b.qh.iter().enumerate() {
            for (p, &h) in words[lane].iter().enumerate() {
                for j in 0..8 {
                    k.q[32 * j + 8 * u + p] |= ((h >> j) & 1) << 4;
                }
            }
        }
        k
    }

    #[inline(always)]
    pub(crate) fn q5_k(b: &BlockQ5K) -> Self {
        Self::from_parts(b.levels(), |j| b.scale_min(j), b.d_f32(), b.dmin_f32())
    }
}

/// A Q6_K weight block unpacked for the GEMM.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Q6Levels {
    /// The 256 levels plus 32 (`0..=63`), in weight order.
    pub(crate) q: [u8; QK_K],
    /// Scale `j` (of weights `16j..16j + 16`) in both halves of an `i32`.
    pub(crate) sc: [i32; 16],
    /// Scale `j` once (the offset's multiplier).
    pub(crate) sc16: [i16; 16],
    /// The block's scale, widened.
    pub(crate) d: f32,
}

const _: () = assert!(core::mem::size_of::<Q6Levels>() == 356);

impl Q6Levels {
    #[inline(always)]
    pub(crate) fn new(b: &BlockQ6K) -> Self {
        let mut k = Self::zeroed();
        for (q, l) in k.q.iter_mut().zip(b.levels()) {
            // Levels are `-32..=31`.
            *q = (l + 32) as u8;
        }
        for (j, &s) in b.scales.iter().enumerate() {
            k.sc[j] = scale_pair(i16::from(s));
            k.sc16[j] = i16::from(s);
        }
        k.d = b.d_f32();
        k
    }
}

/// Row `r`'s block integers against activation row `a` of `g`: the block's
/// scaled dot product and its mins' term.
fn k4_block_ints(w: &K4Levels, g: &Q8KGroup, a: usize) -> (i32, i32) {
    let mut isum = 0i32;
    for j in 0..8 {
        let mut s = 0i32;
        for k in 32 * j..32 * j + 32 {
            s += i32::from(w.q[k]) * i32::from(g.qs[k / 8][8 * a + k % 8]);
        }
        isum += (w.sc[j] >> 16) * s;
    }
    let msum = (0..8)
        .map(|j| i32::from(w.mins[j]) * i32::from(g.bs32[j / 4][4 * a + j % 4]))
        .sum();
    (isum, msum)
}

/// What the Q4_K/Q5_K GEMM returns: `out[r][a]` is the single-row dot of
/// weight row `w[r]` with activation row `a` of the groups `x` (one group
/// per block), bit for bit: per block, one FMA of `(d * d_x) * f32(isum)`
/// into one sum, `(dmin * d_x) * f32(msum)` subtracted from another, the
/// row's value their sum.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
pub(crate) fn gemm_k4_reference(w: [&[K4Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    core::array::from_fn(|r| {
        assert_eq!(w[r].len(), x.len(), "K-quant GEMM: block counts differ");
        core::array::from_fn(|a| {
            let (mut acc, mut acc_min) = (0.0f32, 0.0f32);
            for (wb, g) in w[r].iter().zip(x) {
                let (isum, msum) = k4_block_ints(wb, g, a);
                acc = (wb.d * g.d[a]).mul_add(isum as f32, acc);
                acc_min -= (wb.dmin * g.d[a]) * msum as f32;
            }
            acc + acc_min
        })
    })
}

/// [`gemm_k4_reference`]'s steps for sixteen interleaved rows
/// ([`K4Rows16`]) against `T` activation rows ([`Q8KAct`]): `out[t][r]`
/// is the single-row Q4_K/Q5_K dot of row `r` with row `t`, in plain
/// Rust. What `avx512vnni::gemm_k4_rows16` returns.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
pub(crate) fn gemm_k4_rows16_reference<const T: usize>(
    w: &[K4Rows16],
    x: [&[Q8KAct]; T],
) -> [[f32; ROWS16]; T] {
    core::array::from_fn(|t| {
        assert_eq!(x[t].len(), w.len(), "K-quant GEMM: block counts differ");
        core::array::from_fn(|r| {
            let (mut acc, mut acc_min) = (0.0f32, 0.0f32);
            for (wb, xb) in w.iter().zip(x[t]) {
                let mut isum = 0i32;
                for j in 0..8 {
                    let s: i32 = (32 * j..32 * j + 32)
                        .map(|k| i32::from(wb.q[k / 4][4 * r + k % 4]) * i32::from(xb.qs[k]))
                        .sum();
                    isum += wb.sc[j][r] * s;
                }
                let msum: i32 = (0..8)
                    .map(|j| {
                        let half = |v: i32| {
                            if j % 2 == 0 {
                                v as i16
                            } else {
                                (v >> 16) as i16
                            }
                        };
                        i32::from(half(wb.mins[j / 2][r])) * i32::from(half(xb.bs[j / 2]))
                    })
                    .sum();
                acc = (wb.d[r] * xb.d).mul_add(isum as f32, acc);
                acc_min -= (wb.dmin[r] * xb.d) * msum as f32;
            }
            acc + acc_min
        })
    })
}

/// [`gemm_q6_reference`]'s steps for sixteen interleaved Q6_K rows
/// ([`Q6Rows16`]) against `T` activation rows ([`Q8KAct`]): `out[t][r]`
/// is the single-row Q6_K dot of row `r` with row `t`, in plain Rust. What
/// `avx512vnni::gemm_q6_rows16` returns.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
pub(crate) fn gemm_q6_rows16_reference<const T: usize>(
    w: &[Q6Rows16],
    x: [&[Q8KAct]; T],
) -> [[f32; ROWS16]; T] {
    core::array::from_fn(|t| {
        assert_eq!(x[t].len(), w.len(), "K-quant GEMM: block counts differ");
        core::array::from_fn(|r| {
            let mut acc = 0.0f32;
            for (wb, xb) in w.iter().zip(x[t]) {
                let mut isum = 0i32;
                for j in 0..16 {
                    let s: i32 = (16 * j..16 * j + 16)
                        .map(|k| i32::from(wb.q[k / 4][4 * r + k % 4]) * i32::from(xb.qs[k]))
                        .sum();
                    isum += wb.sc[j][r] * (s - 32 * i32::from(xb.bsums[j]));
                }
                acc = (wb.d[r] * xb.d).mul_add(isum as f32, acc);
            }
            acc
        })
    })
}

/// What the Q6_K GEMM returns (see [`gemm_k4_reference`]): per block, the
/// exact `sum sc_j * (q - 32) * x` and one FMA of `(d * d_x) * f32(sum)`.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
pub(crate) fn gemm_q6_reference(w: [&[Q6Levels]; 4], x: &[Q8KGroup]) -> [[f32; GROUP_ROWS]; 4] {
    core::array::from_fn(|r| {
        assert_eq!(w[r].len(), x.len(), "K-quant GEMM: block counts differ");
        core::array::from_fn(|a| {
            let mut acc = 0.0f32;
            for (wb, g) in w[r].iter().zip(x) {
                let mut isum = 0i32;
                for j in 0..16 {
                    let mut s = 0i32;
                    for k in 16 * j..16 * j + 16 {
                        let v = i32::from(g.qs[k / 8][8 * a + k % 8]);
                        s += (i32::from(wb.q[k]) - 32) * v;
                    }
                    isum += i32::from(wb.sc16[j]) * s;
                }
                acc = (wb.d * g.d[a]).mul_add(isum as f32, acc);
            }
            acc
        })
    })
}

/// One 32-column block of eight Q8_0 activation rows, interleaved for the
/// Q8_0 and Q4_0 GEMM: step `s` covers columns `8s..8s + 8`, and its
/// 64-bit slot `a` (its `i32` lanes `2a`, `2a + 1`) belongs to row `a`.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Q8Group {
    /// `qs[s][8a..8a + 8]` = row `a`'s values `8s..8s + 8`.
    pub(crate) qs: [[i8; 64]; 4],
    /// `neg_bias[s][2a + h]` = row `a`'s `neg_bias[2s + h]` (`-128` times
    /// the sum of its values `8s + 4h..8s + 4h + 4`).
    pub(crate) neg_bias: [[i32; 16]; 4],
    /// `d[2a + h]` = row `a`'s scale.
    pub(crate) d: [f32; 16],
    /// `pair_bias[h][4a + k]` = `8 * (x[8s + 2k] + x[8s + 2k + 1])` summed
    /// over the four steps `s`, for row `4h + a`: what AVX2's Q4_0 GEMM
    /// (`x86_64::avx2_q8::gemm_q4_0_1x8`) takes off its `i16` sums of
    /// `levels * x` to leave `(levels - 8) * x`. At most `8 * 4 * 256` in
    /// magnitude.
    pub(crate) pair_bias: [[i16; 16]; 2],
}

const _: () = assert!(core::mem::size_of::<Q8Group>() == 640);

impl Q8Group {
    /// Block `b` of eight rows.
    ///
    /// # Panics
    ///
    /// If any row has no block `b`.
    #[cfg(test)]
    pub(crate) fn new(rows: [&[ActBlock]; GROUP_ROWS], b: usize) -> Self {
        let mut g = Self::zeroed();
        g.fill(rows, b);
        g
    }

    /// Writes block `b` of eight rows into `self` (every field).
    ///
    /// # Panics
    ///
    /// If any row has no block `b`.
    pub(crate) fn fill(&mut self, rows: [&[ActBlock]; GROUP_ROWS], b: usize) {
        let g = self;
        for (a, row) in rows.iter().enumerate() {
            let x = &row[b];
            let (chunks, _) = x.qs.as_chunks::<8>();
            for (s, c) in chunks.iter().enumerate() {
                g.qs[s][8 * a..8 * a + 8].copy_from_slice(c);
                g.neg_bias[s][2 * a] = x.neg_bias[2 * s];
                g.neg_bias[s][2 * a + 1] = x.neg_bias[2 * s + 1];
            }
            g.d[2 * a] = x.d;
            g.d[2 * a + 1] = x.d;
            for k in 0..4 {
                let pair: i32 = chunks
                    .iter()
                    .map(|c| i32::from(c[2 * k]) + i32::from(c[2 * k + 1]))
                    .sum();
                // |pair| <= 4 * 256, so 8 * pair fits an i16.
                g.pair_bias[a / 4][4 * (a % 4) + k] = (8 * pair) as i16;
            }
        }
    }
}

/// A Q8_0 or Q4_0 weight block unpacked for the GEMM: its 32 weights as
/// unsigned bytes (Q8_0's with the top bit flipped, `w + 128`; Q4_0's
/// levels `0..=15`) and its scale.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct B32Levels {
    pub(crate) q: [u8; 32],
    pub(crate) d: f32,
}

impl B32Levels {
    #[inline(always)]
    pub(crate) fn q8_0(b: &BlockQ8_0) -> Self {
        let mut q = [0u8; 32];
        for (u, &v) in q.iter_mut().zip(&b.qs) {
            *u = (v as u8) ^ 0x80;
        }
        Self {
            q,
            d: b.scale_f32(),
        }
    }

    #[inline(always)]
    pub(crate) fn q4_0(b: &BlockQ4_0) -> Self {
        let mut q = [0u8; 32];
        for (j, &v) in b.qs.iter().enumerate() {
            q[j] = v & 0x0f;
            q[j + 16] = v >> 4;
        }
        Self {
            q,
            d: b.scale_f32(),
        }
    }
}

/// Weight rows per [`Q4_0Rows16`]: one `i32` lane of a 512-bit register
/// each.
pub(crate) const ROWS16: usize = 16;

/// Block `b` of sixteen Q4_0 weight rows, interleaved for the AVX-512
/// Q4_0 GEMM (`avx512vnni::gemm_q4_0_rows16`): a register's sixteen `i32`
/// lanes are sixteen weight rows, so one broadcast four bytes of an
/// activation row meet four weights of every row in one `vpdpbusd`, and
/// after a block's eight steps each lane holds its row's exact block sum
/// with no reduction across lanes. Built for each prefill product from
/// the rows it reads, row-major ([`set_row`](Self::set_row)) or packed
/// eight at a time ([`set_group`](Self::set_group)): 20 bytes per 32
/// weights.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Q4_0Rows16 {
    /// `qs[p][4r..4r + 4]` = row `r`'s nibble bytes `4p..4p + 4` (their low
    /// nibbles weights `4p..4p + 4`, their high ones `16 + 4p..`).
    pub(crate) qs: [[u8; 64]; 4],
    /// Row `r`'s scale, widened (exactly) to f32.
    pub(crate) d: [f32; ROWS16],
}

const _: () = assert!(core::mem::size_of::<Q4_0Rows16>() == 320);

impl Q4_0Rows16 {
    /// Writes weight block `block` as row `r`'s (`r < 16`).
    #[inline]
    pub(crate) fn set_row(&mut self, r: usize, block: &BlockQ4_0) {
        let (chunks, _) = block.qs.as_chunks::<4>();
        for (p, c) in chunks.iter().enumerate() {
            self.qs[p][4 * r..4 * r + 4].copy_from_slice(c);
        }
        self.d[r] = block.scale_f32();
    }

    /// Writes eight packed rows' block `block` as rows `8h..8h + 8`
    /// (`h < 2`): the same bytes [`set_row`](Self::set_row) of each would
    /// write, copied a packed word row at a time.
    #[inline]
    pub(crate) fn set_group(&mut self, h: usize, block: &BlockQ4_0x8) {
        for (q, words) in self.qs.iter_mut().zip(&block.qs) {
            q[32 * h..32 * h + 32].copy_from_slice(bytemuck::cast_slice(words));
        }
        // The eight scales widened together: `half`'s slice conversion
        // checks for F16C once, where a value at a time checked (and
        // called) per value, the most of a tile's filling.
        use half::slice::HalfFloatSliceExt;
        let d = block.d.map(half::f16::from_le_bytes);
        d.convert_to_f32_slice(&mut self.d[8 * h..8 * h + 8]);
    }
}

/// An activation block as [`Q4_0Rows16`]'s GEMM reads it: 40 bytes against
/// an [`ActBlock`]'s 96, so that a 128-row batch of 3072-wide rows (480
/// KiB) stays in a Zen 4 core's L2 while every weight tile meets it.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Q4_0Act {
    /// The 32 quantized values.
    pub(crate) qs: [i8; 32],
    /// The block's scale, widened.
    pub(crate) d: f32,
    /// `-8` times the sum of the values: what a Q4_0 block's levels
    /// (`0..=15`, its values plus 8) need added to their products with
    /// the values to give the products of the values exactly.
    pub(crate) off: i32,
}

const _: () = assert!(core::mem::size_of::<Q4_0Act>() == 40);

impl Q4_0Act {
    #[inline]
    pub(crate) fn new(x: &ActBlock) -> Self {
        Self {
            qs: x.qs,
            d: x.d,
            // The lanes hold `-128` times each four values' sum.
            off: x.neg_bias.iter().sum::<i32>() / 16,
        }
    }
}

/// Block `b` of sixteen Q4_K or Q5_K weight rows, unpacked and interleaved
/// for the AVX-512 K-quant GEMM (`avx512vnni::gemm_k4_rows16`), as
/// [`Q4_0Rows16`] is for Q4_0: one weight row per `i32` lane, so a
/// sub-block's eight `vpdpbusd` steps (the activation's four values
/// broadcast) leave each row's exact sub-block sum in its lane, and one
/// `vpmulld` by the rows' scales and one `vpdpwssd` per two sub-blocks'
/// mins finish the block's integers with nothing to reduce.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct K4Rows16 {
    /// `q[s][4r..4r + 4]` = row `r`'s levels `4s..4s + 4` (sub-block `s /
    /// 8`).
    pub(crate) q: [[u8; 64]; QK_K / 4],
    /// `sc[j][r]` = row `r`'s sub-block `j` scale.
    pub(crate) sc: [[i32; ROWS16]; 8],
    /// `mins[k][r]` = row `r`'s mins of sub-blocks `2k` (low half) and
    /// `2k + 1` (high half), a `vpdpwssd` operand.
    pub(crate) mins: [[i32; ROWS16]; 4],
    /// Each row's scale and min scale.
    pub(crate) d: [f32; ROWS16],
    pub(crate) dmin: [f32; ROWS16],
}

const _: () = assert!(core::mem::size_of::<K4Rows16>() == 4992);

impl K4Rows16 {
    /// Writes an unpacked block as row `r`'s (`r < 16`).
    #[inline]
    pub(crate) fn set_row(&mut self, r: usize, l: &K4Levels) {
        let (words, _) = l.q.as_chunks::<4>();
        for (q, w) in self.q.iter_mut().zip(words) {
            q[4 * r..4 * r + 4].copy_from_slice(w);
        }
        for j in 0..8 {
            self.sc[j][r] = l.sc[j] >> 16;
        }
        for k in 0..4 {
            self.mins[k][r] =
                i32::from(l.mins[2 * k] as u16) | (i32::from(l.mins[2 * k + 1]) << 16);
        }
        self.d[r] = l.d;
        self.dmin[r] = l.dmin;
    }

    /// Writes row `r`'s scales, mins, scale and min scale from a block's
    /// first 16 bytes (`d`, `dmin`, the packed scales: a packed group's
    /// `heads[r]`), as [`set_row`](Self::set_row) of the block would.
    #[inline]
    pub(crate) fn set_head(&mut self, r: usize, head: &[u8; 16]) {
        let (d, rest) = head.split_at(2);
        let (dmin, scales) = rest.split_at(2);
        let scales: &[u8; 12] = scales.try_into().expect("12 bytes");
        let mut m = [0i32; 8];
        for (j, (sc, mn)) in self.sc.iter_mut().zip(&mut m).enumerate() {
            let (s, n) = super::kcommon::scale_min_k4(j, scales);
            sc[r] = i32::from(s);
            *mn = i32::from(n);
        }
        for k in 0..4 {
            self.mins[k][r] = m[2 * k] | (m[2 * k + 1] << 16);
        }
        self.d[r] = half::f16::from_le_bytes([d[0], d[1]]).to_f32();
        self.dmin[r] = half::f16::from_le_bytes([dmin[0], dmin[1]]).to_f32();
    }
}

/// Rows `0..8` and `8..16` of a [`K4Rows16`] tile's levels from block `b`
/// of two packed groups of eight Q4_K rows (their nibble words `qs`, a
/// group's `BlockQ4Kx8::qs`) and, for Q5_K, their fifth-bit words `qh`
/// (`BlockQ5Kx8::qh`): what [`K4Rows16::set_row`] of each row's unpacked
/// block writes to `q`, in plain Rust (the AVX-512 form is
/// `avx512vnni::k4_tile_levels`).
pub(crate) fn k4_tile_levels_reference(
    t: &mut K4Rows16,
    qs: [&[[[u8; 8]; 8]; 16]; 2],
    qh: Option<[&[[[u8; 8]; 8]; 4]; 2]>,
) {
    for r in 0..ROWS16 {
        let (g, rr) = (r / 8, r % 8);
        for i in 0..QK_K {
            // Weight `64h + i'` (`i' < 32`) is the low nibble of byte `32h +
            // i'`, weight `64h + 32 + i'` its high nibble; Q5_K's fifth bit
            // is bit `2h` (or `2h + 1`) of `qh[i']`.
            let (h, hi, ip) = (i / 64, i % 64 >= 32, i % 32);
            let byte = qs[g][(32 * h + ip) / 8][rr][(32 * h + ip) % 8];
            let mut level = if hi { byte >> 4 } else { byte & 0x0f };
            if let Some(qh) = qh {
                let bits = qh[g][ip / 8][rr][ip % 8];
                level |= ((bits >> (2 * h + usize::from(hi))) & 1) << 4;
            }
            t.q[i / 4][4 * r + i % 4] = level;
        }
    }
}

/// Block `b` of sixteen Q6_K weight rows, unpacked and interleaved for the
/// AVX-512 Q6_K GEMM (`avx512vnni::gemm_q6_rows16`), as [`K4Rows16`] is
/// for Q4_K: one weight row per `i32` lane, so a sub-block's four
/// `vpdpbusd` steps (the activation's four values broadcast, started from
/// `-32` times the sub-block's activation sum) leave each row's exact
/// sub-block sum in its lane, and one `vpmulld` by the rows' scales adds
/// it to the block's integers, with nothing to reduce.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C, align(64))]
pub(crate) struct Q6Rows16 {
    /// `q[s][4r..4r + 4]` = row `r`'s levels plus 32 (`0..=63`) of weights
    /// `4s..4s + 4` (sub-block `s / 4`).
    pub(crate) q: [[u8; 64]; QK_K / 4],
    /// `sc[j][r]` = row `r`'s sub-block `j` scale.
    pub(crate) sc: [[i32; ROWS16]; 16],
    /// Each row's scale, widened.
    pub(crate) d: [f32; ROWS16],
}

const _: () = assert!(core::mem::size_of::<Q6Rows16>() == 5184);

impl Q6Rows16 {
    /// Writes block `b` as row `r`'s (`r < 16`): the fill of kernels
    /// without `q6_tile_rows`'s registers, and the tests' reference.
    #[inline]
    pub(crate) fn set_row(&mut self, r: usize, b: &BlockQ6K) {
        let levels = b.levels().map(|l| (l + 32) as u8);
        let (words, _) = levels.as_chunks::<4>();
        for (q, w) in self.q.iter_mut().zip(words) {
            q[4 * r..4 * r + 4].copy_from_slice(w);
        }
        for (sc, &s) in self.sc.iter_mut().zip(&b.scales) {
            sc[r] = i32::from(s);
        }
        self.d[r] = b.d_f32();
    }
}

/// A Q8_K activation block as the sixteen-row K-quant GEMMs
/// ([`K4Rows16`], [`Q6Rows16`]) read it: the values, the scale, the
/// 32-value sums of sub-blocks `2k` and `2k + 1` as the two `i16` halves
/// of `bs[k]` (from the block's stored 16-value sums, as the single-row
/// mins term takes them), and the stored 16-value sums themselves (Q6_K's
/// offset of 32).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Q8KAct {
    pub(crate) qs: [i8; QK_K],
    pub(crate) bs: [i32; 4],
    pub(crate) d: f32,
    pub(crate) bsums: [i16; QK_K / 16],
    _pad: [u8; 12],
}

const _: () = assert!(core::mem::size_of::<Q8KAct>() == 320);

impl Q8KAct {
    #[inline]
    pub(crate) fn new(x: &BlockQ8K) -> Self {
        // Each stored sum is at most 16 * 128 in magnitude in a block
        // quantized by this crate (the only blocks a batch holds), so a
        // pair's sum is exact in `i16`, as in `Q8KGroup::fill`.
        let bs32 = |j: usize| x.bsums[2 * j].wrapping_add(x.bsums[2 * j + 1]);
        let mut a = Self::zeroed();
        a.qs = x.qs;
        for k in 0..4 {
            a.bs[k] = i32::from(bs32(2 * k) as u16) | (i32::from(bs32(2 * k + 1)) << 16);
        }
        a.d = x.d;
        a.bsums = x.bsums;
        a
    }
}

/// A Q8_0 weight block unpacked for the 256-bit GEMM
/// (`x86_64::avx2_q8::gemm_b32s_1x8`): its 32 weights as signed bytes,
/// their magnitudes, and its scale (and, in the tests, a Q4_0 block's
/// levels less 8). Without
/// `vpdpbusd`, `vpmaddubsw` multiplies unsigned by signed bytes into
/// saturating `i16` pairs, so the unsigned [`B32Levels`] of Q8_0 (up to
/// 255) could overflow a pair; `|w| * (sign(w) * x)` cannot (`|w| <= 128`,
/// `|x| <= 127`), and puts no offset in the lanes.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct B32Signed {
    pub(crate) q: [i8; 32],
    pub(crate) abs: [u8; 32],
    pub(crate) d: f32,
}

impl B32Signed {
    #[inline(always)]
    pub(crate) fn q8_0(b: &BlockQ8_0) -> Self {
        Self {
            q: b.qs,
            abs: magnitudes(&b.qs),
            d: b.scale_f32(),
        }
    }

    /// Q4_0's levels less 8, in the signed form: AVX2's Q4_0 prefill
    /// takes the levels ([`B32Levels::q4_0`]); the tests check that this
    /// form gives the same bits.
    #[cfg(test)]
    pub(crate) fn q4_0(b: &BlockQ4_0) -> Self {
        let mut q = [0i8; 32];
        for (j, &v) in b.qs.iter().enumerate() {
            // Levels 0..=15, so the differences are -8..=7.
            q[j] = (v & 0x0f) as i8 - 8;
            q[j + 16] = (v >> 4) as i8 - 8;
        }
        Self {
            q,
            abs: magnitudes(&q),
            d: b.scale_f32(),
        }
    }
}

/// `|q|` of each byte, in a loop the compiler vectorizes. An array's `map`
/// was a call per block: under `perf` (AMD EPYC Zen 3, Q8_0 prefill of
/// 128 tokens and more) the GEMM's loop and unpacking beside the kernel
/// took 11% of the kernel's time with it and 5% without.
#[inline]
fn magnitudes(q: &[i8; 32]) -> [u8; 32] {
    let mut abs = [0u8; 32];
    for (a, &v) in abs.iter_mut().zip(q) {
        *a = v.unsigned_abs();
    }
    abs
}

/// [`gemm_b32s_reference`] of a Q4_0 row in its [`B32Levels`] form (the
/// levels `0..=15`): the same exact sums of `(levels - 8) * x`, the same
/// float operations, so the same bits. What AVX2's Q4_0 GEMM
/// (`x86_64::avx2_q8::gemm_q4_0_1x8`) returns.
///
/// # Panics
///
/// If the row's block count differs from `x.len()`.
pub(crate) fn gemm_q4_0_reference(w: &[B32Levels], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
    let signed: Vec<B32Signed> = w
        .iter()
        .map(|b| {
            let q = b.q.map(|l| l as i8 - 8);
            B32Signed {
                q,
                abs: magnitudes(&q),
                d: b.d,
            }
        })
        .collect();
    gemm_b32s_reference(&signed, x)
}

/// Sixteen Q4_0 weight rows, interleaved ([`Q4_0Rows16`]), against
/// activation rows `x` ([`Q4_0Act`]):
/// `out[t][r]` is AVX2's `dot_q4_0` of row `r` with row `t`: per block the
/// exact integer sum of `(level - 8) * x`, the term `(d_w * d_x) * isum`
/// added to partial sum `b % 4` (from `+0.0`), the partial sums added as
/// `(s0 + s1) + (s2 + s3)`. What the AVX-512 kernel
/// (`x86_64::avx512vnni::gemm_q4_0_rows16`) returns, in plain Rust.
///
/// # Panics
///
/// If an activation row's block count differs from `w.len()`.
pub(crate) fn gemm_q4_0_rows16_reference<const T: usize>(
    w: &[Q4_0Rows16],
    x: [&[Q4_0Act]; T],
) -> [[f32; ROWS16]; T] {
    core::array::from_fn(|t| {
        assert_eq!(x[t].len(), w.len(), "GEMM: block counts differ");
        core::array::from_fn(|r| {
            let mut s = [0.0f32; 4];
            for (b, (wb, xb)) in w.iter().zip(x[t]).enumerate() {
                let isum = xb.off
                    + (0..32)
                        .map(|k| {
                            let byte = wb.qs[k % 16 / 4][4 * r + k % 4];
                            let level = if k < 16 { byte & 0x0f } else { byte >> 4 };
                            i32::from(level) * i32::from(xb.qs[k])
                        })
                        .sum::<i32>();
                s[b % 4] += wb.d[r] * xb.d * isum as f32;
            }
            (s[0] + s[1]) + (s[2] + s[3])
        })
    })
}

/// AVX2's `dot_q8` of one Q8_0 or Q4_0 weight row, in its [`B32Signed`]
/// form, with each of the eight interleaved activation rows of `x`: per
/// block the exact integer sum `isum`, then the term `(d_w * d_x) * isum`
/// added to partial sum `b % 4` (from `+0.0`), and the partial sums added
/// as `(s0 + s1) + (s2 + s3)`. What the AVX2 GEMM
/// (`x86_64::avx2_q8::gemm_b32s_1x8`) and AVX2's single-row dots return.
///
/// # Panics
///
/// If the row's block count differs from `x.len()`.
pub(crate) fn gemm_b32s_reference(w: &[B32Signed], x: &[Q8Group]) -> [f32; GROUP_ROWS] {
    assert_eq!(w.len(), x.len(), "GEMM: block counts differ");
    core::array::from_fn(|a| {
        let mut s = [0.0f32; 4];
        for (b, (wb, g)) in w.iter().zip(x).enumerate() {
            let isum: i32 = (0..32)
                .map(|k| i32::from(wb.q[k]) * i32::from(g.qs[k / 8][8 * a + k % 8]))
                .sum();
            s[b % 4] += wb.d * g.d[2 * a] * isum as f32;
        }
        (s[0] + s[1]) + (s[2] + s[3])
    })
}

/// The float part the Q8_0/Q4_0 GEMM shares with the single-row x86 dots,
/// for one weight row of `nb` blocks (scale `d_w(b)`) against the eight
/// activation rows of `x`, given `lane(b, a, m)`, the exact integer lane
/// `m` of block `b` and activation row `a`: each lane's `(d_w * d_x)` FMA
/// into one of two 8-lane sums by the block's parity (an odd last block
/// into the even one), the sums added lane by lane and then summed as
/// `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
///
/// # Panics
///
/// If `nb != x.len()`.
fn b32_sums(
    nb: usize,
    x: &[Q8Group],
    d_w: impl Fn(usize) -> f32,
    lane: impl Fn(usize, usize, usize) -> i32,
) -> [f32; GROUP_ROWS] {
    assert_eq!(nb, x.len(), "GEMM: block counts differ");
    core::array::from_fn(|a| {
        let mut acc = [[0.0f32; 8]; 2];
        for (b, g) in x.iter().enumerate() {
            let d = d_w(b) * g.d[2 * a];
            for (m, l) in acc[b % 2].iter_mut().enumerate() {
                *l = d.mul_add(lane(b, a, m) as f32, *l);
            }
        }
        let v: [f32; 8] = core::array::from_fn(|m| acc[0][m] + acc[1][m]);
        ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
    })
}

/// The offset a [`B32Levels`] kind's unsigned bytes carry, as the shift of
/// the activation's `neg_bias` (`-128 * sum`) that removes it: 0 for
/// Q8_0's flipped bytes (offset 128), 4 for Q4_0's levels (offset 8).
pub(crate) const Q8_0_SHIFT: u32 = 0;
/// See [`Q8_0_SHIFT`]. With it the reference states AVX-VNNI's lane-wise
/// Q4_0 dot, which the tests check; AVX-512 VNNI's Q4_0 rounds as AVX2's
/// (`gemm_q4_0_rows16`), so no GEMM kernel runs this form.
#[cfg(test)]
pub(crate) const Q4_0_SHIFT: u32 = 4;

/// What the VNNI kernels' lane-wise Q8_0 GEMM returns (`SHIFT`
/// [`Q8_0_SHIFT`]; `Q4_0_SHIFT` gives AVX-VNNI's Q4_0 dots):
/// `out[r][a]` is the single-row dot (`dot_q8`, or AVX-VNNI's
/// `dot_q4_0`) of weight row `w[r]` with activation row `a` of `x`, bit
/// for bit: eight exact `i32` lanes per block (lane `m` the products of
/// columns `4m..4m + 4`, offset removed), `(d_w * d_x) * f32(lane)` fused
/// into one of two 8-lane sums by the block's parity (an odd last block
/// into the even one), the two sums added lane by lane and then summed as
/// `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
///
/// # Panics
///
/// If a row's block count differs from `x.len()`.
pub(crate) fn gemm_b32_reference<const SHIFT: u32>(
    w: [&[B32Levels]; 2],
    x: &[Q8Group],
) -> [[f32; GROUP_ROWS]; 2] {
    w.map(|w| {
        b32_sums(
            w.len(),
            x,
            |b| w[b].d,
            |b, a, m| {
                let g = &x[b];
                let (s, h) = (m / 2, m % 2);
                let offset = g.neg_bias[s][2 * a + h] >> SHIFT;
                (4 * m..4 * m + 4)
                    .map(|k| i32::from(w[b].q[k]) * i32::from(g.qs[k / 8][8 * a + k % 8]))
                    .sum::<i32>()
                    + offset
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::PackedBlock;

    /// A packed row's levels, read from the packed words, are the row's
    /// own block's levels byte for byte, for any bytes (NaN and infinite
    /// scales included) and every lane, Q4_K and Q5_K.
    #[test]
    fn packed_k_levels_are_the_row_s() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut fill = |bytes: &mut [u8]| {
            for byte in bytes {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *byte = seed as u8;
            }
        };
        for _ in 0..if cfg!(miri) { 2 } else { 200 } {
            let mut p4 = BlockQ4Kx8::zeroed();
            fill(bytemuck::bytes_of_mut(&mut p4));
            let mut p5 = BlockQ5Kx8::zeroed();
            fill(bytemuck::bytes_of_mut(&mut p5));
            for lane in 0..8 {
                let cases = [
                    (
                        "Q4_K",
                        K4Levels::q4_k(&p4.row(lane)),
                        K4Levels::q4_k_packed(&p4, lane),
                    ),
                    (
                        "Q5_K",
                        K4Levels::q5_k(&p5.row(lane)),
                        K4Levels::q5_k_packed(&p5, lane),
                    ),
                ];
                for (name, want, got) in cases {
                    let (want, got) = (bytemuck::bytes_of(&want), bytemuck::bytes_of(&got));
                    assert_eq!(got, want, "{name} lane {lane}");
                }
            }
        }
    }
}
