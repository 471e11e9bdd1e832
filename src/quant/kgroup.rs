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
//! plain Rust; the AVX-512 kernels are `x86_64::avx512vnni::gemm_*`).

use bytemuck::{Pod, Zeroable};

use super::{BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K};

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
    /// `bs16[t][4a + i]` = row `a`'s sum of values `16(4t + i)..+16`,
    /// recomputed from `qs` (as the single-row Q6_K offset reads them).
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
    pub(crate) fn new(rows: [&[BlockQ8K]; GROUP_ROWS], b: usize) -> Self {
        let mut g = Self::zeroed();
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
            let (sixteens, _) = x.qs.as_chunks::<16>();
            for (j, c) in sixteens.iter().enumerate() {
                let (t, i) = (j / 4, j % 4);
                g.bs16[t][4 * a + i] = c.iter().map(|&v| i16::from(v)).sum();
            }
            g.d[a] = x.d;
        }
        g
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

fn scale_pair(s: i16) -> i32 {
    // Both halves hold `s`; the low half is the bit pattern of `s`.
    (i32::from(s) << 16) | i32::from(s as u16)
}

impl K4Levels {
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

    pub(crate) fn q4_k(b: &BlockQ4K) -> Self {
        Self::from_parts(b.levels(), |j| b.scale_min(j), b.d_f32(), b.dmin_f32())
    }

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
