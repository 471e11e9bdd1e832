//! Weight matrices of every supported type behind one enum, and the decode
//! and prefill products over them.
//!
//! A file's projections need not share a type: Q4_K_M files hold Q4_K
//! matrices beside Q6_K ones (`attn_v` and `ffn_down` in some layers), and
//! every file some Q8_0 or float tensors. [`Weight`] is one borrowed
//! matrix of any of them; its activation side is the Q8_0 form of a
//! [`QuantizedVector`] for Q8_0 and Q4_0 weights, the Q8_K form for the
//! K-quants, and the activation rounded to f16 or bfloat16 for F16 and
//! BF16 weights, as GGML rounds it (`quant::float` says why)
//! ([`Weight::forms`] says which, so a caller quantizes an input once per
//! form its products need).
//!
//! As for Q8_0, each output value is one whole dot product by one thread,
//! so every backend and thread count gives the same bytes, and a prefill
//! row equals the decode product of that row.

use std::borrow::Cow;
use std::ops::Range;

use half::{bf16, f16};

use crate::quant::dot::{Dispatch, KRow, RowPrefetch};
use crate::quant::kgroup::{
    B32Levels, B32Signed, K4Levels, K4Rows16, Q4_0Act, Q4_0Rows16, Q6Levels, Q6Rows16, Q8KAct,
    GROUP_ROWS, ROWS16,
};
use crate::quant::{
    ActForms, BatchLayouts, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ6K, PackedBlock, QuantizedBatch,
    QuantizedVector, PACK_ROWS,
};
use crate::unsafe_core::prefetch::prefetch_read;

use super::{
    BlockMatrix, PackedMatrix, PackedQ4KMatrix, PackedQ4_0Matrix, PackedQ5KMatrix, Q8Matrix,
    ShapeError,
};

/// A weight matrix of any type this crate runs, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum Weight<'a> {
    /// GGML Q8_0.
    Q8_0(Q8Matrix<'a>),
    /// GGML Q4_0.
    Q4_0(BlockMatrix<'a, BlockQ4_0>),
    /// GGML Q4_0 with its rows packed eight at a time
    /// ([`PackedQ4_0Matrix`]), as [`Weight::Q4KPacked`] is to Q4_K: the
    /// AVX-512 decode kernel's order, eight rows in a register's lanes.
    Q4_0Packed(PackedQ4_0Matrix<'a>),
    /// GGML Q4_K.
    Q4K(BlockMatrix<'a, BlockQ4K>),
    /// GGML Q4_K with its rows packed eight at a time ([`PackedQ4KMatrix`]:
    /// the same weights and results as [`Weight::Q4K`], in the order the
    /// eight-row decode kernels of AVX-512 VNNI and AVX2 read).
    Q4KPacked(PackedQ4KMatrix<'a>),
    /// GGML Q5_K with its rows packed eight at a time
    /// ([`PackedQ5KMatrix`]), as [`Weight::Q4KPacked`] is to Q4_K.
    Q5KPacked(PackedQ5KMatrix<'a>),
    /// GGML Q5_K.
    Q5K(BlockMatrix<'a, BlockQ5K>),
    /// GGML Q6_K.
    Q6K(BlockMatrix<'a, BlockQ6K>),
    /// IEEE half floats (GGML F16).
    F16(BlockMatrix<'a, f16>),
    /// bfloat16 (GGML BF16).
    Bf16(BlockMatrix<'a, bf16>),
}

/// Calls `$e` with `$m` bound to the matrix of whichever variant.
macro_rules! each {
    ($w:expr, $m:ident => $e:expr) => {
        match $w {
            Weight::Q8_0($m) => $e,
            Weight::Q4_0($m) => $e,
            Weight::Q4_0Packed($m) => $e,
            Weight::Q4K($m) => $e,
            Weight::Q4KPacked($m) => $e,
            Weight::Q5KPacked($m) => $e,
            Weight::Q5K($m) => $e,
            Weight::Q6K($m) => $e,
            Weight::F16($m) => $e,
            Weight::Bf16($m) => $e,
        }
    };
}

impl<'a> Weight<'a> {
    /// Output rows.
    pub fn rows(&self) -> usize {
        each!(self, m => m.rows())
    }

    /// Input columns.
    pub fn cols(&self) -> usize {
        each!(self, m => m.cols())
    }

    /// Bytes of weights (what a decode product streams).
    pub fn bytes(&self) -> usize {
        each!(self, m => m.bytes())
    }

    /// GGML's name of the type (`"Q4_K"`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Weight::Q8_0(_) => "Q8_0",
            Weight::Q4_0(_) | Weight::Q4_0Packed(_) => "Q4_0",
            Weight::Q4K(_) | Weight::Q4KPacked(_) => "Q4_K",
            Weight::Q5K(_) | Weight::Q5KPacked(_) => "Q5_K",
            Weight::Q6K(_) => "Q6_K",
            Weight::F16(_) => "F16",
            Weight::Bf16(_) => "BF16",
        }
    }

    /// The activation form a product with this matrix reads.
    pub fn forms(&self) -> ActForms {
        match self {
            Weight::Q8_0(_) | Weight::Q4_0(_) | Weight::Q4_0Packed(_) => ActForms::Q8_0,
            Weight::Q4K(_)
            | Weight::Q4KPacked(_)
            | Weight::Q5K(_)
            | Weight::Q5KPacked(_)
            | Weight::Q6K(_) => ActForms::Q8_K,
            Weight::F16(_) => ActForms::F16,
            Weight::Bf16(_) => ActForms::BF16,
        }
    }

    /// The forms the products of all of `ws` read.
    pub fn forms_of(ws: &[Weight<'_>]) -> ActForms {
        ws.iter()
            .fold(ActForms::default(), |f, w| f.union(w.forms()))
    }

    /// The copies of a batch's blocks that `ws`'s prefill products on
    /// kernel `k` may read, so that a batch is not copied for nothing:
    /// - the paired and grouped Q8_0 blocks: Q8_0 matrices, and Q4_0 ones
    ///   but where AVX-512 VNNI's sixteen-row GEMM reads the blocks in its
    ///   own form (`q4_0_acts`);
    /// - the grouped Q8_K blocks: row-major Q4_K and Q5_K matrices, and
    ///   packed Q4_K and Q5_K ones and Q6_K ones where the sixteen-row
    ///   K-quant GEMMs do not run (which read their own form, `k_acts`).
    ///
    /// A kernel without a reader for a copy skips it whatever this says.
    pub(crate) fn batch_layouts(k: Dispatch, ws: &[Weight<'_>]) -> BatchLayouts {
        let (q4_0_rows16, k4_rows16) = (k.matmul_uses_q4_0_rows16(), k.matmul_uses_k4_rows16());
        let any = |f: &dyn Fn(&Weight<'_>) -> bool| ws.iter().any(f);
        BatchLayouts {
            interleaved: any(&|w| match w {
                Weight::Q8_0(_) => true,
                Weight::Q4_0(_) | Weight::Q4_0Packed(_) => !q4_0_rows16,
                _ => false,
            }),
            k_groups: any(&|w| match w {
                Weight::Q4K(_) | Weight::Q5K(_) => true,
                Weight::Q4KPacked(_) | Weight::Q5KPacked(_) | Weight::Q6K(_) => !k4_rows16,
                _ => false,
            }),
            q4_0_acts: q4_0_rows16
                && any(&|w| matches!(w, Weight::Q4_0(_) | Weight::Q4_0Packed(_))),
            k_acts: k4_rows16
                && any(&|w| {
                    matches!(
                        w,
                        Weight::Q4KPacked(_) | Weight::Q5KPacked(_) | Weight::Q6K(_)
                    )
                }),
        }
    }

    /// The Q8_0 matrix, if this is one.
    pub fn as_q8_0(&self) -> Option<&Q8Matrix<'a>> {
        match self {
            Weight::Q8_0(m) => Some(m),
            _ => None,
        }
    }

    /// Computes this matrix's rows `range` against `x` into `out`
    /// (`range.len()` values): each one whole dot product with kernel `k`.
    /// The activation forms were checked by the caller.
    fn rows_into(&self, k: Dispatch, x: &QuantizedVector, range: Range<usize>, out: &mut [f32]) {
        match self {
            Weight::Q8_0(m) => k.matvec_q8(m.rows_blocks(range), m.blocks_per_row(), x.act(), out),
            Weight::Q4_0(m) => rows_with(m, range, out, |row| k.dot_q4_0_decode(row, x)),
            Weight::Q4_0Packed(m) => packed_rows(m, range, out, |g| k.dot_q4_0_packed8(g, x)),
            Weight::Q4K(m) if k.has_k_rows8() => rows8_with(
                m,
                range,
                out,
                |row| k.dot_q4_k(row, x.k_act()),
                |rows| k.dot_q4_k_rows8(rows, x.k_act()),
            ),
            Weight::Q5K(m) if k.has_k_rows8() => rows8_with(
                m,
                range,
                out,
                |row| k.dot_q5_k(row, x.k_act()),
                |rows| k.dot_q5_k_rows8(rows, x.k_act()),
            ),
            Weight::Q4K(m) => rows_with(m, range, out, |row| k.dot_q4_k(row, x.k_act())),
            Weight::Q4KPacked(m) => {
                packed_rows(m, range, out, |g| k.dot_q4_k_packed8(g, x.k_act()))
            }
            Weight::Q5KPacked(m) => {
                packed_rows(m, range, out, |g| k.dot_q5_k_packed8(g, x.k_act()))
            }
            Weight::Q5K(m) => rows_with(m, range, out, |row| k.dot_q5_k(row, x.k_act())),
            Weight::Q6K(m) => {
                k.matvec_q6_k(m.rows_blocks(range), m.blocks_per_row(), x.k_act(), out)
            }
            Weight::F16(m) => rows_with(m, range, out, |row| k.dot_f16w(row, x.f16_act())),
            Weight::Bf16(m) => rows_with(m, range, out, |row| k.dot_bf16w(row, x.bf16_act())),
        }
    }
}

/// `out[i] = dot(row range.start + i)` for a row-at-a-time kernel,
/// prefetching the weights a few KiB ahead as the Q8_0 kernels do
/// ([`RowPrefetch::for_rows`]: long rows into L2 on AMD Zen 4). (A plain
/// loop of hints: the `step_by` loop it replaced, which the compiler
/// unrolled into bursts of eight, streamed Q4_0's and Q6_K's decode products
/// 4-6% slower on two threads of an AMD EPYC (Zen 5) VM, medians of six
/// alternated runs of `inferno bench --kernels --model`.)
#[inline]
fn rows_with<B: crate::quant::WeightBlock>(
    m: &BlockMatrix<'_, B>,
    range: Range<usize>,
    out: &mut [f32],
    dot: impl Fn(&[B]) -> f32,
) {
    let blocks = m.rows_blocks(range.clone());
    let nb = m.blocks_per_row();
    let row_bytes = nb * std::mem::size_of::<B>();
    let hint = RowPrefetch::for_rows(row_bytes);
    for (i, o) in out.iter_mut().enumerate() {
        let row = &blocks[i * nb..(i + 1) * nb];
        hint.lines_to(row, &mut 0, row_bytes);
        *o = dot(row);
    }
}

/// [`rows_with`] for a kernel that also has an eight-row form (`dot8`, bit
/// for bit eight `dot`s, prefetching on its own): each whole group of
/// eight rows of the range is one `dot8`, and the rows left over are
/// single `dot`s. A thread's range starts wherever the split puts it, so
/// the groups are counted from the range's first row.
#[inline]
fn rows8_with<B: crate::quant::WeightBlock>(
    m: &BlockMatrix<'_, B>,
    range: Range<usize>,
    out: &mut [f32],
    dot: impl Fn(&[B]) -> f32,
    dot8: impl Fn([&[B]; 8]) -> [f32; 8],
) {
    let blocks = m.rows_blocks(range.clone());
    let nb = m.blocks_per_row();
    let (groups, rest) = out.as_chunks_mut::<8>();
    for (g, o) in groups.iter_mut().enumerate() {
        let first = 8 * g;
        *o = dot8(core::array::from_fn(|r| {
            &blocks[(first + r) * nb..(first + r + 1) * nb]
        }));
    }
    let done = 8 * groups.len();
    rows_with(m, range.start + done..range.end, rest, dot);
}

/// `out[i] = dot(row range.start + i)` of a packed matrix: a group of
/// eight rows per pass (`dot8`: [`Dispatch::dot_q4_k_packed8`] or its
/// Q5_K form), the values of
/// the rows inside `range` kept (a thread's range starts and ends wherever
/// the split puts it, so a group it shares with the next thread is
/// computed by both; the same bits either way).
#[inline]
fn packed_rows<P: PackedBlock>(
    m: &PackedMatrix<'_, P>,
    range: Range<usize>,
    out: &mut [f32],
    dot8: impl Fn(&[P]) -> [f32; PACK_ROWS],
) {
    let (mut r, mut done) = (range.start, 0);
    while r < range.end {
        let (g, first) = (r / PACK_ROWS, r % PACK_ROWS);
        let take = (PACK_ROWS - first).min(range.end - r);
        let y = dot8(m.group(g));
        out[done..done + take].copy_from_slice(&y[first..first + take]);
        r += take;
        done += take;
    }
}

/// Checks the shapes of a stacked product: every matrix of `ws` as wide as
/// `x` and with its form of `x` quantized, and `out` as long as their rows
/// together.
pub(crate) fn check_stacked_any(
    ws: &[Weight<'_>],
    x: &QuantizedVector,
    out: &[f32],
) -> Result<(), ShapeError> {
    let mut rows = 0usize;
    for w in ws {
        if w.cols() != x.cols() || !x.forms().contains(w.forms()) {
            return Err(ShapeError::InputLength {
                expected: w.cols(),
                got: x.cols(),
            });
        }
        rows = rows.saturating_add(w.rows());
    }
    if rows != out.len() {
        return Err(ShapeError::OutputLength {
            expected: rows,
            got: out.len(),
        });
    }
    Ok(())
}

/// Computes the stacked rows `range` of `ws` into `out` (`range.len()`
/// values), each row one whole dot product with kernel `k`.
pub(crate) fn stacked_rows_any(
    k: Dispatch,
    ws: &[Weight<'_>],
    x: &QuantizedVector,
    range: Range<usize>,
    out: &mut [f32],
) {
    let mut base = 0;
    let mut done = 0;
    for w in ws {
        let (lo, hi) = (range.start.max(base), range.end.min(base + w.rows()));
        if lo < hi {
            let n = hi - lo;
            w.rows_into(k, x, lo - base..hi - base, &mut out[done..done + n]);
            done += n;
        }
        base += w.rows();
    }
}

/// Checks a prefill product's shapes (as `matmul_q8_0` does), and that the
/// batch holds the form `w` reads.
pub(crate) fn check_batch_any(
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    out: &[f32],
) -> Result<(), ShapeError> {
    if xs.rows() > 0 && (w.cols() != xs.cols() || !xs.forms().contains(w.forms())) {
        return Err(ShapeError::InputLength {
            expected: w.cols(),
            got: xs.cols(),
        });
    }
    let expected = xs
        .rows()
        .checked_mul(w.rows())
        .ok_or(ShapeError::OutputLength {
            expected: usize::MAX,
            got: out.len(),
        })?;
    if expected != out.len() {
        return Err(ShapeError::OutputLength {
            expected,
            got: out.len(),
        });
    }
    Ok(())
}

/// Weight rows per tile of a non-Q8_0 prefill product: a tile is read from
/// memory once and kept in L1 while every batch row runs against it.
const TILE_ROWS: usize = 16;

/// Weight rows per rayon task of a prefill product: several tiles, so a
/// task's fixed costs (its output slices, unpacking four weight rows at a
/// time for the interleaved GEMM, rayon's own) are spread over more work;
/// 64 rows still make 16 or more tasks for every matrix of Qwen3-0.6B.
pub(crate) const TASK_ROWS: usize = 64;

/// Computes weight rows `r0..r0 + len` of a non-Q8_0 `w` against every
/// batch row, `segs[i][j] = dot(row r0 + j, batch row i)`, each exactly
/// the decode product's value: four batch rows at a time share each
/// weight block's unpacking (the kernels' four-row forms, bit for bit
/// their single-row results), the rest one at a time.
pub(crate) fn matmul_rows_any(
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    r0: usize,
    segs: &mut [&mut [f32]],
) {
    // AVX-512's sixteen-row K-quant GEMM interleaves the rows from the
    // packed blocks directly.
    if k.matmul_uses_k4_rows16() && k4_rows16(k, w, xs, r0, segs) == segs.len() {
        return;
    }
    if let Weight::Q4_0Packed(p) = w {
        // AVX-512's Q4_0 GEMM interleaves sixteen rows from wherever they
        // lie: from the packed blocks directly.
        let fill = |tile: &mut [Q4_0Rows16], j0: usize, rows: usize| {
            let first = r0 + j0;
            if first.is_multiple_of(PACK_ROWS) && rows.is_multiple_of(PACK_ROWS) {
                // Whole packed groups: a word row of eight rows at a time.
                for h in 0..rows / PACK_ROWS {
                    let group = p.group(first / PACK_ROWS + h);
                    for (t, g) in tile.iter_mut().zip(group) {
                        t.set_group(h, g);
                    }
                }
            } else {
                for r in 0..rows {
                    for (b, t) in tile.iter_mut().enumerate() {
                        t.set_row(r, &p.row_block(first + r, b));
                    }
                }
            }
        };
        if k.matmul_uses_q4_0_rows16() {
            let nb = p.blocks_per_row();
            let acts = q4_0_acts(xs);
            if gemm_rows16::<Q4_0Gemm>(k, nb, &acts, fill, segs) == segs.len() {
                return;
            }
        }
    }
    // With a kernel that interleaves the batch: eight batch rows per
    // register (AVX2's GEMMs unpack a packed matrix's rows from its
    // groups, `unpack_packed_row`); the rest below.
    let grouped = gemm_group_rows(k, w, xs, r0, segs);
    if grouped == segs.len() {
        return;
    }
    // The batch rows left meet a packed matrix's rows copied back (their
    // blocks in GGML's layout, the same bytes) [`TASK_ROWS`] at a time,
    // so a product on one thread copies a slice of the matrix and not all
    // of it, and runs the row-major paths on them.
    match w {
        Weight::Q4KPacked(p) => for_unpacked_rows(p, r0, segs, |rows, n, segs| {
            let plain = Weight::Q4K(BlockMatrix::from_checked(rows, n, p.cols()));
            matmul_rows_from(k, &plain, xs, 0, segs, grouped);
        }),
        Weight::Q5KPacked(p) => for_unpacked_rows(p, r0, segs, |rows, n, segs| {
            let plain = Weight::Q5K(BlockMatrix::from_checked(rows, n, p.cols()));
            matmul_rows_from(k, &plain, xs, 0, segs, grouped);
        }),
        Weight::Q4_0Packed(p) => for_unpacked_rows(p, r0, segs, |rows, n, segs| {
            let plain = Weight::Q4_0(BlockMatrix::from_checked(rows, n, p.cols()));
            matmul_rows_from(k, &plain, xs, 0, segs, grouped);
        }),
        _ => matmul_rows_from(k, w, xs, r0, segs, grouped),
    }
}

/// [`matmul_rows_any`]'s batch rows `first..` (those before done by a
/// GEMM): eight batch rows per unpacked K-quant weight block, then four
/// at a time with the kernels' four-row forms, then one at a time. A
/// packed matrix's rows are unpacked one weight row at a time here, so
/// `matmul_rows_any` hands it the rows copied back instead.
fn matmul_rows_from(
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    r0: usize,
    segs: &mut [&mut [f32]],
    first: usize,
) {
    let len = segs.first().map_or(0, |s| s.len());
    let m = segs.len();
    for j0 in (0..len).step_by(TILE_ROWS) {
        let tile = j0..len.min(j0 + TILE_ROWS);
        let mut i = first;
        // K-quants: eight batch rows per unpacked weight block.
        while i + 8 <= m && k_row(w, r0 + j0).is_some() {
            for j in tile.clone() {
                if let Some(row) = k_row(w, r0 + j) {
                    let y = k.dot_k_x8(row, core::array::from_fn(|t| xs.k_row(i + t)));
                    for (t, v) in y.into_iter().enumerate() {
                        segs[i + t][j] = v;
                    }
                }
            }
            i += 8;
        }
        while i + 4 <= m {
            for j in tile.clone() {
                let r = r0 + j;
                let y = match w {
                    Weight::Q8_0(m) => {
                        k.dot_q8_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.act_row(i + t)))
                    }
                    Weight::Q4_0(m) => {
                        k.dot_q4_0_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.act_row(i + t)))
                    }
                    Weight::Q4_0Packed(m) => k.dot_q4_0_x4(
                        &m.unpack_rows(r..r + 1),
                        [0, 1, 2, 3].map(|t| xs.act_row(i + t)),
                    ),
                    Weight::Q4K(m) => {
                        k.dot_q4_k_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.k_row(i + t)))
                    }
                    Weight::Q4KPacked(m) => k.dot_q4_k_x4(
                        &m.unpack_rows(r..r + 1),
                        [0, 1, 2, 3].map(|t| xs.k_row(i + t)),
                    ),
                    Weight::Q5KPacked(m) => k.dot_q5_k_x4(
                        &m.unpack_rows(r..r + 1),
                        [0, 1, 2, 3].map(|t| xs.k_row(i + t)),
                    ),
                    Weight::Q5K(m) => {
                        k.dot_q5_k_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.k_row(i + t)))
                    }
                    Weight::Q6K(m) => {
                        k.dot_q6_k_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.k_row(i + t)))
                    }
                    Weight::F16(m) => {
                        k.dot_f16w_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.f16_row(i + t)))
                    }
                    Weight::Bf16(m) => {
                        k.dot_bf16w_x4(m.row(r), [0, 1, 2, 3].map(|t| xs.bf16_row(i + t)))
                    }
                };
                for (t, v) in y.into_iter().enumerate() {
                    segs[i + t][j] = v;
                }
            }
            i += 4;
        }
        for (t, seg) in segs[i..].iter_mut().enumerate() {
            for j in tile.clone() {
                seg[j] = dot_row(k, w, r0 + j, xs, i + t);
            }
        }
    }
}

/// Computes weight rows `r0..r0 + len` of `w` against the batch's
/// interleaved groups of eight rows with the GEMM kernels, each value the
/// decode product's bits (`quant::kgroup`); returns how many batch rows
/// (the first ones) it did: none unless the kernel uses the groups and `w`
/// is a K-quant, Q8_0 or Q4_0 matrix.
pub(crate) fn gemm_group_rows(
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    r0: usize,
    segs: &mut [&mut [f32]],
) -> usize {
    let len = segs.first().map_or(0, |s| s.len());
    if let Weight::Q4_0(m) = w {
        if k.matmul_uses_q4_0_rows16() {
            let fill = |tile: &mut [Q4_0Rows16], j0: usize, rows: usize| {
                for r in 0..rows {
                    for (t, b) in tile.iter_mut().zip(m.row(r0 + j0 + r)) {
                        t.set_row(r, b);
                    }
                }
            };
            let acts = q4_0_acts(xs);
            return gemm_rows16::<Q4_0Gemm>(k, m.blocks_per_row(), &acts, fill, segs);
        }
    }
    let vector = match w {
        Weight::Q4K(_) | Weight::Q5K(_) | Weight::Q6K(_) => k.matmul_uses_k_groups(),
        // Packed K rows are unpacked to levels straight from their groups.
        Weight::Q4KPacked(_) | Weight::Q5KPacked(_) => k.matmul_uses_k_groups(),
        Weight::Q4_0Packed(_) => k.matmul_uses_b32_signed(),
        Weight::Q8_0(_) | Weight::Q4_0(_) => k.matmul_uses_b32_groups(),
        Weight::F16(_) | Weight::Bf16(_) => false,
    };
    if !vector || len == 0 {
        return 0;
    }
    let n = segs.len() / GROUP_ROWS;
    let k_groups = || (0..n).map_while(|g| xs.k_group(g)).collect::<Vec<_>>();
    let groups = || (0..n).map_while(|g| xs.group(g)).collect::<Vec<_>>();
    let done = match w {
        Weight::Q4K(m) => gemm_rows(
            &k_groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, K4Levels::q4_k),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w4, x| k.gemm_k4_4x8(w4, x),
            1,
        ),
        Weight::Q5K(m) => gemm_rows(
            &k_groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, K4Levels::q5_k),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w4, x| k.gemm_k4_4x8(w4, x),
            1,
        ),
        Weight::Q4KPacked(m) => gemm_rows(
            &k_groups(),
            segs,
            |j, out| unpack_packed_row(k, m, r0 + j, out, K4Levels::q4_k_packed),
            |j, n| prefetch_packed_after(m, r0 + j, n),
            |w4, x| k.gemm_k4_4x8(w4, x),
            PACKED_SETS,
        ),
        Weight::Q5KPacked(m) => gemm_rows(
            &k_groups(),
            segs,
            |j, out| unpack_packed_row(k, m, r0 + j, out, K4Levels::q5_k_packed),
            |j, n| prefetch_packed_after(m, r0 + j, n),
            |w4, x| k.gemm_k4_4x8(w4, x),
            PACKED_SETS,
        ),
        Weight::Q6K(m) => gemm_rows(
            &k_groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, Q6Levels::new),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w4, x| k.gemm_q6_4x8(w4, x),
            1,
        ),
        Weight::Q8_0(m) if k.matmul_uses_b32_signed() => gemm_rows(
            &groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, B32Signed::q8_0),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w2, x| k.gemm_b32s_2x8(w2, x),
            B32_TILE_SETS,
        ),
        Weight::Q4_0(m) if k.matmul_uses_b32_signed() => gemm_rows(
            &groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, B32Levels::q4_0),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w4, x| k.gemm_q4_0_4x8(w4, x),
            B32_TILE_SETS / 2,
        ),
        Weight::Q4_0Packed(m) => gemm_rows(
            &groups(),
            segs,
            |j, out| unpack_packed_row(k, m, r0 + j, out, |b, lane| B32Levels::q4_0(&b.row(lane))),
            |j, n| prefetch_packed_after(m, r0 + j, n),
            |w4, x| k.gemm_q4_0_4x8(w4, x),
            B32_TILE_SETS / 2,
        ),
        Weight::Q8_0(m) => gemm_rows(
            &groups(),
            segs,
            |j, out| k.unpack_row(m.row(r0 + j), out, B32Levels::q8_0),
            |j, n| prefetch_rows_after(m.row(r0 + j), n),
            |w2, x| k.gemm_b32_2x8(w2, x),
            B32_TILE_SETS,
        ),
        // AVX-512 VNNI, the one other kernel with the groups, took its
        // sixteen-row Q4_0 GEMM above.
        Weight::Q4_0(_) | Weight::F16(_) | Weight::Bf16(_) => 0,
    };
    done * GROUP_ROWS
}

/// A sixteen-row GEMM of AVX-512 VNNI (`quant::kgroup`'s [`Q4_0Rows16`],
/// [`K4Rows16`], [`Q6Rows16`]): its weight tile, its activation form and
/// its kernel.
trait Rows16Gemm {
    /// Sixteen weight rows' block, interleaved.
    type Tile: bytemuck::Pod;
    /// An activation block in the kernel's form.
    type Act: Copy;
    /// Activation rows a call takes at most (what the kernel's
    /// accumulators leave of the registers).
    const MAX_T: usize;
    fn gemm<const T: usize>(
        k: Dispatch,
        w: &[Self::Tile],
        x: [&[Self::Act]; T],
    ) -> [[f32; ROWS16]; T];
}

/// Q4_0's sixteen-row GEMM ([`Dispatch::gemm_q4_0_rows16`]).
struct Q4_0Gemm;

impl Rows16Gemm for Q4_0Gemm {
    type Tile = Q4_0Rows16;
    type Act = Q4_0Act;
    const MAX_T: usize = 8;
    fn gemm<const T: usize>(
        k: Dispatch,
        w: &[Q4_0Rows16],
        x: [&[Q4_0Act]; T],
    ) -> [[f32; ROWS16]; T] {
        k.gemm_q4_0_rows16(w, x)
    }
}

/// Q6_K's sixteen-row GEMM ([`Dispatch::gemm_q6_rows16`]).
struct Q6Gemm;

impl Rows16Gemm for Q6Gemm {
    type Tile = Q6Rows16;
    type Act = Q8KAct;
    // As K4Gemm: four activation rows' sums beside a sub-block's levels.
    const MAX_T: usize = 4;
    fn gemm<const T: usize>(k: Dispatch, w: &[Q6Rows16], x: [&[Q8KAct]; T]) -> [[f32; ROWS16]; T] {
        k.gemm_q6_rows16(w, x)
    }
}

/// Q4_K's and Q5_K's sixteen-row GEMM ([`Dispatch::gemm_k4_rows16`]).
struct K4Gemm;

impl Rows16Gemm for K4Gemm {
    type Tile = K4Rows16;
    type Act = Q8KAct;
    // Four activation rows' two float sums and integer sum beside a
    // sub-block's eight registers of levels.
    const MAX_T: usize = 4;
    fn gemm<const T: usize>(k: Dispatch, w: &[K4Rows16], x: [&[Q8KAct]; T]) -> [[f32; ROWS16]; T] {
        k.gemm_k4_rows16(w, x)
    }
}

/// Computes the `len` weight rows of a matrix of `nb` blocks per row (`len`
/// the segments' length; `fill(tile, j0, rows)` writes rows `j0..j0 +
/// rows`, at most sixteen, into the tile's first lanes) against every
/// batch row (`acts`, `nb` blocks per row, in the kernel's form) with a
/// sixteen-row GEMM of AVX-512 ([`Rows16Gemm`]), each value the decode
/// product's bits; returns the batch rows done (all of them, or none for a
/// matrix without columns or rows).
///
/// Each tile of sixteen weight rows is interleaved (Q4_0's from row-major
/// rows a row at a time, which the hardware prefetchers follow; Q6_K's
/// sixteen row-major rows at once, in registers; packed groups eight rows
/// at a time) and meets every batch row, up to
/// [`Rows16Gemm::MAX_T`] at a time (eight for Q4_0, four for the
/// K-quants). The activation forms are compact (40 bytes per 32
/// Q4_0 columns, so a 128-row batch of 3072-wide rows stays in L2).
fn gemm_rows16<G: Rows16Gemm>(
    k: Dispatch,
    nb: usize,
    acts: &[G::Act],
    fill: impl Fn(&mut [G::Tile], usize, usize),
    segs: &mut [&mut [f32]],
) -> usize {
    let len = segs.first().map_or(0, |s| s.len());
    if len == 0 || nb == 0 {
        return 0;
    }
    let mut tile: Vec<G::Tile> = vec![bytemuck::Zeroable::zeroed(); nb];
    for j0 in (0..len).step_by(ROWS16) {
        let rows = ROWS16.min(len - j0);
        // A last tile of fewer rows leaves its other lanes as the tile
        // before left them (zeros, or other rows of this matrix): the
        // kernels' lanes do not mix, and only `rows` of them are written.
        fill(&mut tile, j0, rows);
        let cols = j0..j0 + rows;
        let mut i = 0;
        while i < segs.len() {
            let n = (segs.len() - i).min(G::MAX_T);
            i += match n {
                8.. => rows16_step::<G, 8>(k, &tile, acts, nb, i, segs, cols.clone()),
                4.. => rows16_step::<G, 4>(k, &tile, acts, nb, i, segs, cols.clone()),
                2.. => rows16_step::<G, 2>(k, &tile, acts, nb, i, segs, cols.clone()),
                _ => rows16_step::<G, 1>(k, &tile, acts, nb, i, segs, cols.clone()),
            };
        }
    }
    segs.len()
}

/// One call of a sixteen-row GEMM: batch rows `i..i + T` against `tile`,
/// written to weight rows `cols` of their segments; returns `T`.
fn rows16_step<G: Rows16Gemm, const T: usize>(
    k: Dispatch,
    tile: &[G::Tile],
    acts: &[G::Act],
    nb: usize,
    i: usize,
    segs: &mut [&mut [f32]],
    cols: Range<usize>,
) -> usize {
    let y = G::gemm::<T>(
        k,
        tile,
        core::array::from_fn(|t| &acts[(i + t) * nb..(i + t + 1) * nb]),
    );
    for (seg, yt) in segs[i..i + T].iter_mut().zip(&y) {
        let dst = &mut seg[cols.clone()];
        // A whole tile's sixteen values as one fixed-size copy: a slice
        // copy of a length known only at run time was a C library call
        // per token, 1-2% of a prefill.
        match <&mut [f32; ROWS16]>::try_from(&mut *dst) {
            Ok(d) => *d = *yt,
            Err(_) => dst.copy_from_slice(&yt[..dst.len()]),
        }
    }
    T
}

/// [`gemm_rows16`] of a packed Q4_K or Q5_K matrix or a Q6_K one, its rows
/// `r0..` (the segments' length); 0 for any other matrix. A tile of two whole packed
/// groups takes its levels from the packed words in one pass
/// ([`Dispatch::k4_tile_levels`]) and its scales from the groups' heads;
/// any other a row at a time (a range that starts inside a group, which
/// no caller makes today: a product's tasks start at multiples of 64
/// rows, and a packed matrix has whole groups). A Q6_K matrix (row-major:
/// its decode products stream the rows as they lie) runs
/// [`Dispatch::gemm_q6_rows16`], sixteen rows at a time into a tile. Row-major
/// Q4_K and Q5_K matrices (a mapped file's) keep the interleaved groups'
/// GEMM, which unpacks each row once per pass.
///
/// On an AMD EPYC (Zen 4) VM, one thread, a Q6_K Qwen3-0.6B's prefill of
/// 128 tokens spent 573-574 ms in its traced operations with the
/// sixteen-row Q6_K GEMM, its tiles filled in registers
/// ([`Dispatch::q6_tile_rows`]), against 660-667 with the interleaved
/// groups' GEMM (`inferno bench --trace`, alternated rounds; the gate/up
/// product 180 ms against 213-216, the 3072-wide down product 78 against
/// 101). Tiles filled a row at a time, from levels unpacked by a loop
/// compiled for AVX-512, left 641-672 ms.
fn k4_rows16(
    k: Dispatch,
    w: &Weight<'_>,
    xs: &QuantizedBatch,
    r0: usize,
    segs: &mut [&mut [f32]],
) -> usize {
    /// The packed blocks of one group of eight rows, for a tile.
    struct Group<'g> {
        heads: &'g [[u8; 16]; PACK_ROWS],
        qs: &'g [[[u8; 8]; PACK_ROWS]; 16],
        qh: Option<&'g [[[u8; 8]; PACK_ROWS]; 4]>,
    }
    fn run<P: PackedBlock>(
        k: Dispatch,
        p: &PackedMatrix<'_, P>,
        r0: usize,
        xs: &QuantizedBatch,
        segs: &mut [&mut [f32]],
        group: impl Fn(&P) -> Group<'_>,
        levels: impl Fn(&P::Row) -> K4Levels,
    ) -> usize {
        let fill = |tile: &mut [K4Rows16], j0: usize, rows: usize| {
            let first = r0 + j0;
            if first.is_multiple_of(PACK_ROWS) && rows.is_multiple_of(PACK_ROWS) {
                let g0 = p.group(first / PACK_ROWS);
                // A last tile of one group reads it twice; its second half
                // is never written out.
                let g1 = p.group(first / PACK_ROWS + rows / PACK_ROWS - 1);
                for (t, (b0, b1)) in tile.iter_mut().zip(g0.iter().zip(g1)) {
                    let (a, c) = (group(b0), group(b1));
                    k.k4_tile_levels(t, [a.qs, c.qs], a.qh.zip(c.qh).map(|(x, y)| [x, y]));
                    k.k4_tile_heads(t, [a.heads, c.heads]);
                }
            } else {
                for r in 0..rows {
                    for (b, t) in tile.iter_mut().enumerate() {
                        t.set_row(r, &levels(&p.row_block(first + r, b)));
                    }
                }
            }
        };
        let acts = q8_k_acts(xs);
        gemm_rows16::<K4Gemm>(k, p.blocks_per_row(), &acts, fill, segs)
    }
    match w {
        Weight::Q6K(m) => {
            // Sixteen row-major rows into the tile's lanes at once; a last
            // tile of fewer rows repeats its last row in the lanes it does
            // not write out.
            let fill = |tile: &mut [Q6Rows16], j0: usize, rows: usize| {
                let row = |r: usize| m.row(r0 + j0 + r.min(rows - 1));
                k.q6_tile_rows(tile, core::array::from_fn(row));
            };
            let acts = q8_k_acts(xs);
            gemm_rows16::<Q6Gemm>(k, m.blocks_per_row(), &acts, fill, segs)
        }
        Weight::Q4KPacked(p) => run(
            k,
            p,
            r0,
            xs,
            segs,
            |b| Group {
                heads: &b.heads,
                qs: &b.qs,
                qh: None,
            },
            K4Levels::q4_k,
        ),
        Weight::Q5KPacked(p) => run(
            k,
            p,
            r0,
            xs,
            segs,
            |b| Group {
                heads: &b.heads,
                qs: &b.qs,
                qh: Some(&b.qh),
            },
            K4Levels::q5_k,
        ),
        _ => 0,
    }
}

/// The batch's Q8_0 blocks in [`Q4_0Gemm`]'s form: the batch's own copy,
/// made once at its quantization where the model asked for it (a product
/// runs a task per 64 weight rows, and each would copy the whole batch
/// again), else a copy made here.
fn q4_0_acts(xs: &QuantizedBatch) -> Cow<'_, [Q4_0Act]> {
    xs.q4_0_acts().map_or_else(
        || Cow::Owned(xs.act_blocks().iter().map(Q4_0Act::new).collect()),
        Cow::Borrowed,
    )
}

/// The batch's Q8_K blocks in [`K4Gemm`]'s and [`Q6Gemm`]'s form, as
/// [`q4_0_acts`].
fn q8_k_acts(xs: &QuantizedBatch) -> Cow<'_, [Q8KAct]> {
    xs.k_acts().map_or_else(
        || Cow::Owned(xs.k_blocks().iter().map(Q8KAct::new).collect()),
        Cow::Borrowed,
    )
}

/// Weight-row sets (of two rows) the Q8_0 GEMMs of AVX-512 and AVX2
/// unpack before a pass over the batch (AVX2's Q4_0 GEMM, four rows a
/// set, half as many); AVX-512's Q4_0 now runs [`gemm_rows16`], whose measurements are
/// in `BENCHMARKS.md`. A pass reads every group of the batch (640 bytes
/// per 32 columns of eight rows: values, lane offsets, scales and pair
/// offsets, about 20 KiB per group for a 1024-wide input), so with one set per pass the
/// batch streams from L2 once per two weight rows; with eight sets, a
/// group is read from L1 by sixteen weight rows in a row, whose unpacked
/// levels (about 36 bytes per 32 weights, 18 KiB for sixteen 1024-wide
/// rows) stay beside it. Measured on an AMD EPYC (Zen 5) VM, 1 thread,
/// prefill of 128 tokens, the binaries with one set and with eight
/// alternated over three rounds: Q4_0 147-159 tok/s to 188-198, Q8_0
/// 118-161 to 157-206. The K-quant GEMMs (four rows a set, each row's
/// batch traffic already a quarter) measured no clear difference with
/// four sets (Q4_K_M 224-331 tok/s against 278-326, Q6_K 239-295 against
/// 238-288) and keep one. The 256-bit Q8_0/Q4_0 GEMMs (AVX2) pass over
/// the same sixteen rows: 68 bytes per 32 weights unpacked for Q8_0
/// (signed bytes and magnitudes; 34 KiB for sixteen 1024-wide rows) and
/// 36 for Q4_0 (its levels). On an AMD EPYC (Zen 3) VM, 1 thread, Q8_0
/// prefill of 128 tokens, five alternated runs each, when that GEMM took
/// one row a set: 8 rows a pass 52.1-55.8 tok/s, 16 rows 46.4-59.4, 32
/// rows 47.1-65.1, no clear difference.
const B32_TILE_SETS: usize = 8;

/// `segs[8g + a][j] = gemm(rows j.., group g)[..][a]` for every weight row
/// `j` of the segments and every group: `sets` sets of `R` weight rows are
/// unpacked (`unpack(j, out)` appends row `j`'s levels; a last partial set
/// repeats the last row), then each group meets every set in turn. Returns
/// the number of groups. Every value is one kernel call's, whatever the
/// order, so the tiling changes no bits.
///
/// Unpacking is where the weights come from memory, and the pass over the
/// batch between two unpackings leaves the hardware prefetchers idle, so
/// `ahead(j, n)` asks for the `n` rows after `j..j + n` before that pass
/// (`prefetch_rows_after`).
fn gemm_rows<L: Copy, G, const R: usize>(
    groups: &[&[G]],
    segs: &mut [&mut [f32]],
    unpack: impl Fn(usize, &mut Vec<L>),
    ahead: impl Fn(usize, usize),
    gemm: impl Fn([&[L]; R], &[G]) -> [[f32; GROUP_ROWS]; R],
    sets: usize,
) -> usize {
    let len = segs.first().map_or(0, |s| s.len());
    if groups.is_empty() {
        // Nothing to meet the unpacked rows.
        return 0;
    }
    let sets = sets.max(1);
    let mut levels: Vec<[Vec<L>; R]> = (0..sets)
        .map(|_| core::array::from_fn(|_| Vec::new()))
        .collect();
    let step = R * sets;
    for j0 in (0..len).step_by(step) {
        let used = (len - j0).div_ceil(R).min(sets);
        for (t, set) in levels.iter_mut().enumerate().take(used) {
            for (r, l) in set.iter_mut().enumerate() {
                l.clear();
                unpack((j0 + t * R + r).min(len - 1), l);
            }
        }
        ahead(j0, step);
        for (g, x) in groups.iter().enumerate() {
            for (t, set) in levels.iter().enumerate().take(used) {
                let j = j0 + t * R;
                let wr: [&[L]; R] = core::array::from_fn(|r| &set[r][..]);
                let y = gemm(wr, x);
                // Each activation row's outputs of this set, a slice at a
                // time (one bounds check per slice: the element by element
                // stores, each checked, took a twentieth of a K-quant
                // GEMM's time on an AMD Zen 4 core with 1024-wide rows).
                let rows = R.min(len - j);
                let outs = &mut segs[g * GROUP_ROWS..(g + 1) * GROUP_ROWS];
                for (a, seg) in outs.iter_mut().enumerate() {
                    for (o, yr) in seg[j..j + rows].iter_mut().zip(&y) {
                        *o = yr[a];
                    }
                }
            }
        }
    }
    groups.len()
}

/// Asks for the `n` rows after the `n` that start at `row` (a hint: past
/// the matrix's end it reads nothing).
fn prefetch_rows_after<B>(row: &[B], n: usize) {
    let bytes = std::mem::size_of_val(row);
    for line in (n * bytes..2 * n * bytes).step_by(64) {
        prefetch_read(row, line);
    }
}

/// Sets of four packed K-quant rows (`gemm_k4_4x8`'s) a GEMM unpacks
/// before each pass over the batch: 32 rows, four whole groups, so each
/// group's words (every row's are spread over all of the group's lines)
/// are read back to back, eight rows while the lines are in L1, and the
/// groups after them are asked for as a whole. On an AMD EPYC (Zen 3) VM,
/// one thread, a Q4_K_M file's prefill of 128 tokens with one set (four
/// rows, half a group) per pass took 9% longer (median of six alternated
/// runs) than with the rows unpacked from the file's own layout; with
/// eight sets, and each row's levels read from the packed words
/// (`K4Levels::q4_k_packed`), the same. (Two sets, one group a pass,
/// measured the same as eight within the noise.)
const PACKED_SETS: usize = 8;

/// Appends row `r` of the packed matrix `p`, block by block, to `out` as
/// the GEMM's levels (`levels` of the row's own block, the same bytes as
/// from the row-major matrix): the packed words are read where they lie,
/// with no copy of the row kept.
fn unpack_packed_row<P: crate::quant::PackedBlock, L>(
    k: Dispatch,
    p: &super::PackedMatrix<'_, P>,
    r: usize,
    out: &mut Vec<L>,
    levels: impl Fn(&P, usize) -> L,
) {
    let lane = r % PACK_ROWS;
    k.unpack_row(p.group(r / PACK_ROWS), out, |b| levels(b, lane));
}

/// [`prefetch_rows_after`] for a packed matrix: asks for the bytes that
/// the `n` rows after `r..r + n` take in the packed layout (a packed
/// group's bytes are its eight rows' own, so rows `r..r + n` from a
/// group's start take `n / 8` of the group); past the matrix's end it
/// reads nothing.
fn prefetch_packed_after<P: crate::quant::PackedBlock>(
    p: &super::PackedMatrix<'_, P>,
    r: usize,
    n: usize,
) {
    let group = p.group(r / PACK_ROWS);
    let per_row = std::mem::size_of_val(group) / PACK_ROWS;
    let start = (r % PACK_ROWS + n) * per_row;
    for line in (start..start + n * per_row).step_by(64) {
        prefetch_read(group, line);
    }
}

/// Row `r` of `w` as a [`KRow`], if `w` is a K-quant matrix.
fn k_row<'w>(w: &Weight<'w>, r: usize) -> Option<KRow<'w>> {
    match w {
        Weight::Q4K(m) => Some(KRow::Q4K(m.row(r))),
        Weight::Q5K(m) => Some(KRow::Q5K(m.row(r))),
        Weight::Q6K(m) => Some(KRow::Q6K(m.row(r))),
        _ => None,
    }
}

/// Calls `f(rows, n, segs)` for each run of at most [`TASK_ROWS`] of the
/// packed matrix `p`'s rows `r0..r0 + len` (`len` the segments' length),
/// with those `n` rows unpacked to GGML's row-major blocks and the
/// segments narrowed to their columns.
fn for_unpacked_rows<P: crate::quant::PackedBlock>(
    p: &super::PackedMatrix<'_, P>,
    r0: usize,
    segs: &mut [&mut [f32]],
    mut f: impl FnMut(&[P::Row], usize, &mut [&mut [f32]]),
) {
    let len = segs.first().map_or(0, |s| s.len());
    for j0 in (0..len).step_by(TASK_ROWS) {
        let j1 = len.min(j0 + TASK_ROWS);
        let rows = p.unpack_rows(r0 + j0..r0 + j1);
        let mut part: Vec<&mut [f32]> = segs.iter_mut().map(|s| &mut s[j0..j1]).collect();
        f(&rows, j1 - j0, &mut part);
    }
}

/// Row `r` of `w` against batch row `i`.
#[inline]
fn dot_row(k: Dispatch, w: &Weight<'_>, r: usize, xs: &QuantizedBatch, i: usize) -> f32 {
    match w {
        Weight::Q8_0(m) => k.dot_q8(m.row(r), xs.act_row(i)),
        Weight::Q4_0(m) => k.dot_q4_0(m.row(r), xs.act_row(i)),
        Weight::Q4K(m) => k.dot_q4_k(m.row(r), xs.k_row(i)),
        Weight::Q4KPacked(m) => k.dot_q4_k(&m.unpack_rows(r..r + 1), xs.k_row(i)),
        Weight::Q5KPacked(m) => k.dot_q5_k(&m.unpack_rows(r..r + 1), xs.k_row(i)),
        Weight::Q4_0Packed(m) => k.dot_q4_0(&m.unpack_rows(r..r + 1), xs.act_row(i)),
        Weight::Q5K(m) => k.dot_q5_k(m.row(r), xs.k_row(i)),
        Weight::Q6K(m) => k.dot_q6_k_summed(m.row(r), xs.k_row(i)),
        Weight::F16(m) => k.dot_f16w(m.row(r), xs.f16_row(i)),
        Weight::Bf16(m) => k.dot_bf16w(m.row(r), xs.bf16_row(i)),
    }
}

/// A prefill product `out = X W^T` on the calling thread, with kernel `k`,
/// after the caller checked the shapes ([`check_batch_any`]).
pub(crate) fn matmul_any_with(k: Dispatch, w: &Weight<'_>, xs: &QuantizedBatch, out: &mut [f32]) {
    if w.rows() == 0 {
        return;
    }
    match w {
        Weight::Q8_0(m) => super::q8::matmul_q8_0_with(k, m, xs, out),
        _ => {
            let mut segs: Vec<&mut [f32]> = out.chunks_mut(w.rows()).collect();
            matmul_rows_any(k, w, xs, 0, &mut segs);
        }
    }
}

/// [`matmul_any_with`] on rayon's current pool: tasks of [`TASK_ROWS`]
/// weight rows, each for the whole batch (as `matmul_q8_0_rayon` does for
/// Q8_0, which it calls), from `MATMUL_PAR_MIN_ROWS` batch rows; smaller
/// batches run on the calling thread. Shapes checked by the caller.
pub(crate) fn matmul_any_rayon(k: Dispatch, w: &Weight<'_>, xs: &QuantizedBatch, out: &mut [f32]) {
    use rayon::prelude::*;
    let rows = w.rows();
    if xs.rows() < super::MATMUL_PAR_MIN_ROWS || rows == 0 {
        return matmul_any_with(k, w, xs, out);
    }
    if let Weight::Q8_0(m) = w {
        return super::q8::matmul_q8_0_rayon_with(k, m, xs, out);
    }
    let mut tasks: Vec<Vec<&mut [f32]>> = (0..rows.div_ceil(TASK_ROWS))
        .map(|_| Vec::with_capacity(xs.rows()))
        .collect();
    for out_row in out.chunks_mut(rows) {
        for (task, seg) in tasks.iter_mut().zip(out_row.chunks_mut(TASK_ROWS)) {
            task.push(seg);
        }
    }
    tasks
        .into_par_iter()
        .enumerate()
        .for_each(|(t, mut segs)| matmul_rows_any(k, w, xs, t * TASK_ROWS, &mut segs));
}

/// The crate's one pooled matvec, behind
/// [`matvec_q8_0_pool`](super::matvec_q8_0_pool) and the
/// [`Pool`](crate::backend::Pool) backend: the stacked rows of `ws` (their
/// outputs one matrix after another) split into one contiguous range per
/// thread, each computed with kernel `k` straight into its range of `out`.
///
/// # Errors
///
/// As [`check_stacked_any`].
pub(crate) fn matvec_pool_stacked(
    pool: &crate::ThreadPool,
    k: Dispatch,
    ws: &[Weight<'_>],
    x: &QuantizedVector,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check_stacked_any(ws, x, out)?;
    pool.for_each_chunk_mut(out, |rows, part| stacked_rows_any(k, ws, x, rows, part));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(feature = "loom"))]
    use crate::backend::{AnyBackend, Backend};
    use crate::quant::{ActForms, Kernel, QK_K};

    /// `n` blocks of type `B` from a byte pattern with every level and
    /// scale code at its largest (`0xff`), the f16 scales patched finite.
    fn blocks<B: crate::quant::WeightBlock>(n: usize, patch: impl Fn(&mut B)) -> Vec<B> {
        let size = std::mem::size_of::<B>();
        let raw: Vec<u8> = (0..n * size)
            .map(|i| if i % 7 == 0 { 0x5a } else { 0xff })
            .collect();
        (0..n)
            .map(|b| {
                let mut blk: B = bytemuck::pod_read_unaligned(&raw[b * size..(b + 1) * size]);
                patch(&mut blk);
                blk
            })
            .collect()
    }

    fn half(v: f32) -> [u8; 2] {
        half::f16::from_f32(v).to_le_bytes()
    }

    /// Every weight type of a product, `rows` x `cols`, owned.
    struct Mats {
        q8_0: Vec<crate::quant::BlockQ8_0>,
        q4_0: Vec<BlockQ4_0>,
        q4k: Vec<BlockQ4K>,
        q5k: Vec<BlockQ5K>,
        q6k: Vec<BlockQ6K>,
        h: Vec<f16>,
        bh: Vec<bf16>,
        rows: usize,
        cols: usize,
    }

    impl Mats {
        fn new(rows: usize, cols: usize) -> Self {
            let nk = rows * (cols / QK_K);
            Self {
                q8_0: blocks(rows * (cols / 32), |b: &mut crate::quant::BlockQ8_0| {
                    b.d = half(0.125)
                }),
                q4_0: blocks(rows * (cols / 32), |b: &mut BlockQ4_0| b.d = half(0.25)),
                q4k: blocks(nk, |b: &mut BlockQ4K| {
                    (b.d, b.dmin) = (half(0.5), half(-0.125))
                }),
                q5k: blocks(nk, |b: &mut BlockQ5K| {
                    (b.d, b.dmin) = (half(0.5), half(0.0625))
                }),
                q6k: blocks(nk, |b: &mut BlockQ6K| b.d = half(-0.75)),
                h: (0..rows * cols)
                    .map(|i| f16::from_f32(((i * 29 % 83) as f32 - 41.0) / 37.0))
                    .collect(),
                bh: (0..rows * cols)
                    .map(|i| bf16::from_f32(((i * 31 % 89) as f32 - 44.0) / 13.0))
                    .collect(),
                rows,
                cols,
            }
        }

        fn weights(&self) -> [Weight<'_>; 7] {
            let (r, c) = (self.rows, self.cols);
            [
                Weight::Q8_0(BlockMatrix::new(&self.q8_0, r, c).unwrap()),
                Weight::Q4_0(BlockMatrix::new(&self.q4_0, r, c).unwrap()),
                Weight::Q4K(BlockMatrix::new(&self.q4k, r, c).unwrap()),
                Weight::Q5K(BlockMatrix::new(&self.q5k, r, c).unwrap()),
                Weight::Q6K(BlockMatrix::new(&self.q6k, r, c).unwrap()),
                Weight::F16(BlockMatrix::new(&self.h, r, c).unwrap()),
                Weight::Bf16(BlockMatrix::new(&self.bh, r, c).unwrap()),
            ]
        }
    }

    fn input(cols: usize) -> Vec<f32> {
        (0..cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect()
    }

    /// A vector or batch quantized without the form a matrix reads is a
    /// typed error from every entry point (the checks, and every backend's
    /// `matvec` and `matmul`), never a panic or a short read of the form
    /// that is there.
    #[cfg_attr(
        miri,
        ignore = "the pool and parallel backends run threads Miri cannot (rayon)"
    )]
    // The pool runs on loom's scheduler under `loom`, only inside a model.
    #[cfg(not(feature = "loom"))]
    #[test]
    fn a_missing_activation_form_is_a_typed_error() {
        let mats = Mats::new(5, 2 * QK_K);
        let x = input(mats.cols);
        let backends: Vec<AnyBackend> = [("scalar", 1), ("simd", 1), ("pool", 3), ("parallel", 2)]
            .into_iter()
            .map(|(n, t)| AnyBackend::new(n, t).unwrap())
            .collect();
        for w in mats.weights() {
            // Every form but the one `w` reads.
            let f = w.forms();
            let wrong = ActForms {
                q8_0: !f.q8_0,
                q8_k: !f.q8_k,
                f16: !f.f16,
                bf16: !f.bf16,
            };
            for forms in [wrong, ActForms::default()] {
                let mut xq = QuantizedVector::new();
                xq.quantize_forms(&x, forms).unwrap();
                let mut out = vec![0.0; w.rows()];
                let err = check_stacked_any(&[w], &xq, &out).unwrap_err();
                assert!(matches!(err, ShapeError::InputLength { .. }), "{err:?}");
                let mut xs = QuantizedBatch::new();
                let batch: Vec<f32> = x.iter().chain(&x).chain(&x).copied().collect();
                xs.quantize_forms(&batch, mats.cols, forms).unwrap();
                let mut outs = vec![0.0; 3 * w.rows()];
                for b in &backends {
                    let e = b.matvec(&[w], &xq, &mut out).unwrap_err();
                    assert!(matches!(e, ShapeError::InputLength { .. }), "{}", b.name());
                    let e = b.matmul(&w, &xs, &mut outs).unwrap_err();
                    assert!(matches!(e, ShapeError::InputLength { .. }), "{}", b.name());
                }
                // Stacked with a matrix whose form is there: still refused.
                let other = mats.weights().into_iter().find(|m| m.forms() != f).unwrap();
                let both = [w, other];
                let mut out2 = vec![0.0; 2 * w.rows()];
                for b in &backends {
                    assert!(b.matvec(&both, &xq, &mut out2).is_err(), "{}", b.name());
                }
            }
        }
    }

    /// Any range of stacked rows (every start and end, the last row
    /// included, so the prefetch runs past the end of the blocks) gives
    /// each row's own dot product, with every available kernel, for every
    /// weight type; an empty matrix and zero-column matrices give nothing
    /// or zeros.
    #[cfg_attr(
        miri,
        ignore = "safe code only under Miri (no token, no prefetch), and slow there"
    )]
    #[test]
    fn every_range_of_rows_is_each_rows_dot() {
        // 17 rows: two whole groups of eight (the eight-row decode kernels)
        // and one left over in a matrix, ranges straddling them.
        let mats = Mats::new(17, 2 * QK_K);
        each_range_of_rows_is_each_rows_dot(&mats, |_, _| true);
        // Wider rows: 5 and 13 K-quant blocks (a group of four and blocks
        // left over in the Q6_K products' prefetch pieces), rows past the
        // 16 lines where the row-at-a-time hints go to L2 on AMD Zen 4;
        // each hint loop of this machine's kind, and on x86 both kinds.
        // Single rows, and ranges from the first row or to the last.
        let some = |lo: usize, hi: usize| {
            hi == lo + 1
                || (lo == 0 && hi.is_multiple_of(5))
                || (hi == 17 * 7 && lo.is_multiple_of(5))
        };
        for cols in [5 * QK_K, 13 * QK_K] {
            let mats = Mats::new(17, cols);
            each_range_of_rows_is_each_rows_dot(&mats, some);
            #[cfg(target_arch = "x86_64")]
            for to_l2 in [1, 2] {
                use crate::quant::dot::x86_64::TO_L2_IN_TESTS;
                use std::sync::atomic::Ordering::Relaxed;
                TO_L2_IN_TESTS.store(to_l2, Relaxed);
                each_range_of_rows_is_each_rows_dot(&mats, some);
                TO_L2_IN_TESTS.store(0, Relaxed);
            }
        }
    }

    /// [`every_range_of_rows_is_each_rows_dot`]'s checks of the rows of
    /// `mats`, over the ranges `lo..hi` that `ranges(lo, hi)` picks.
    fn each_range_of_rows_is_each_rows_dot(mats: &Mats, ranges: impl Fn(usize, usize) -> bool) {
        let ws = mats.weights();
        let x = input(mats.cols);
        let mut xq = QuantizedVector::new();
        xq.quantize_forms(&x, ActForms::ALL).unwrap();
        let total: usize = ws.iter().map(|w| w.rows()).sum();
        assert_eq!(total, 17 * 7, "one matrix of each weight type");
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            let mut want = Vec::new();
            for w in &ws {
                for r in 0..w.rows() {
                    want.push(match w {
                        Weight::Q4_0(m) => k.dot_q4_0(m.row(r), xq.act()),
                        Weight::Q4K(m) => k.dot_q4_k(m.row(r), xq.k_act()),
                        Weight::Q4KPacked(m) => k.dot_q4_k(&m.unpack_rows(r..r + 1), xq.k_act()),
                        Weight::Q5KPacked(m) => k.dot_q5_k(&m.unpack_rows(r..r + 1), xq.k_act()),
                        Weight::Q4_0Packed(m) => k.dot_q4_0(&m.unpack_rows(r..r + 1), xq.act()),
                        Weight::Q5K(m) => k.dot_q5_k(m.row(r), xq.k_act()),
                        Weight::Q6K(m) => k.dot_q6_k(m.row(r), xq.k_act()),
                        Weight::F16(m) => k.dot_f16w(m.row(r), xq.f16_act()),
                        Weight::Bf16(m) => k.dot_bf16w(m.row(r), xq.bf16_act()),
                        Weight::Q8_0(m) => k.dot_q8(m.row(r), xq.act()),
                    });
                }
            }
            assert!(want.iter().all(|v| v.is_finite()), "{kernel:?} {want:?}");
            check_stacked_any(&ws, &xq, &want).unwrap();
            for lo in 0..=total {
                for hi in (lo..=total).filter(|&hi| ranges(lo, hi)) {
                    let mut out = vec![f32::NAN; hi - lo];
                    stacked_rows_any(k, &ws, &xq, lo..hi, &mut out);
                    assert_eq!(
                        out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        want[lo..hi].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{kernel:?} rows {lo}..{hi}"
                    );
                }
            }
            // No rows, and rows of no columns (an empty activation).
            let mut empty = QuantizedVector::new();
            empty.quantize_forms(&[], ActForms::ALL).unwrap();
            for (rows, cols) in [(0, 0), (3, 0)] {
                let m = Mats::new(rows, cols);
                let ws = m.weights();
                let mut out = vec![f32::NAN; ws.len() * rows];
                check_stacked_any(&ws, &empty, &out).unwrap();
                stacked_rows_any(k, &ws, &empty, 0..ws.len() * rows, &mut out);
                assert!(out.iter().all(|&v| v == 0.0), "{kernel:?} {out:?}");
            }
            let m0 = Mats::new(0, mats.cols);
            let mut none: [f32; 0] = [];
            check_stacked_any(&m0.weights(), &xq, &none).unwrap();
            stacked_rows_any(k, &m0.weights(), &xq, 0..0, &mut none);
        }
    }

    /// Prefill's rayon tasks (`matmul_any_rayon`) give the serial
    /// product's bits with the kernel they are handed, whichever it is
    /// (Q8_0's tasks once ran the selected kernel instead), for every
    /// weight type.
    #[cfg_attr(
        miri,
        ignore = "safe code only under Miri (no token, no prefetch), and slow there"
    )]
    #[test]
    fn rayon_tasks_run_the_kernel_they_are_given() {
        // 130 rows: three tasks, the last one short; a batch past the
        // threshold for tasks.
        let mats = Mats::new(130, 2 * QK_K);
        let n = crate::matvec::MATMUL_PAR_MIN_ROWS.max(4) + 1;
        let x: Vec<f32> = (0..n)
            .flat_map(|i| {
                input(mats.cols)
                    .into_iter()
                    .map(move |v| v * (i as f32 + 1.0))
            })
            .collect();
        let mut xs = QuantizedBatch::new();
        xs.quantize_forms(&x, mats.cols, ActForms::ALL).unwrap();
        for kernel in Kernel::ALL {
            let Some(k) = kernel.dispatch() else { continue };
            for w in mats.weights() {
                let mut serial = vec![f32::NAN; n * w.rows()];
                matmul_any_with(k, &w, &xs, &mut serial);
                let mut tasks = vec![f32::NAN; n * w.rows()];
                matmul_any_rayon(k, &w, &xs, &mut tasks);
                assert!(
                    serial
                        .iter()
                        .zip(&tasks)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{kernel:?} {}",
                    w.type_name()
                );
            }
        }
    }

    /// The prefill product of every weight type, for batches of 1 to 9 rows
    /// (the four-row kernels and the leftover single rows), with every
    /// available kernel, is each row's decode dot, bit for bit.
    #[cfg_attr(
        miri,
        ignore = "safe code only under Miri (no token, no prefetch), and slow there"
    )]
    #[test]
    fn prefill_rows_equal_decode_dots_for_every_batch_size() {
        let mats = Mats::new(19, 2 * QK_K);
        let both = ActForms::ALL;
        for n in 1..=9 {
            let x: Vec<f32> = (0..n)
                .flat_map(|i| {
                    input(mats.cols)
                        .into_iter()
                        .map(move |v| v * (i as f32 + 1.0) / 3.0)
                })
                .collect();
            let mut xs = QuantizedBatch::new();
            xs.quantize_forms(&x, mats.cols, both).unwrap();
            for kernel in Kernel::ALL {
                let Some(k) = kernel.dispatch() else { continue };
                for w in mats.weights() {
                    let mut out = vec![f32::NAN; n * w.rows()];
                    check_batch_any(&w, &xs, &out).unwrap();
                    matmul_any_with(k, &w, &xs, &mut out);
                    for i in 0..n {
                        let mut xq = QuantizedVector::new();
                        xq.quantize_forms_with(k, &x[i * mats.cols..(i + 1) * mats.cols], both)
                            .unwrap();
                        let mut row = vec![f32::NAN; w.rows()];
                        stacked_rows_any(k, &[w], &xq, 0..w.rows(), &mut row);
                        let got = &out[i * w.rows()..(i + 1) * w.rows()];
                        assert_eq!(
                            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            row.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            "{kernel:?} {} batch {n} row {i}",
                            w.type_name()
                        );
                    }
                }
            }
        }
    }

    /// A Q4_0, Q4_K or Q5_K matrix packed eight rows at a time gives the
    /// row-major matrix's bits: every range of rows of a decode product (a
    /// thread's range can start and end inside a group), alone and stacked
    /// after another matrix, and prefill batches of 1 to 9, 16 and 17 rows (calling
    /// thread and rayon), with every kernel and each hint loop.
    #[cfg_attr(
        miri,
        ignore = "safe code only under Miri (no token, no prefetch), and slow there"
    )]
    #[test]
    fn packed_k_gives_the_row_major_bits() {
        use crate::quant::{pack_rows8, quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k};
        for nb in [1, 5] {
            let (rows, cols) = (24, nb * QK_K);
            let values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0 * (1.0 + (i / cols) as f32))
                .collect();
            let q4 = quantize_row_q4_k(&values).unwrap();
            let q5 = quantize_row_q5_k(&values).unwrap();
            let (p4, p5) = (pack_rows8(&q4, nb), pack_rows8(&q5, nb));
            let q40 = quantize_row_q4_0(&values).unwrap();
            let p40 = pack_rows8(&q40, cols / 32);
            let pairs = [
                (
                    Weight::Q4_0(BlockMatrix::new(&q40, rows, cols).unwrap()),
                    Weight::Q4_0Packed(PackedMatrix::new(&p40, rows, cols).unwrap()),
                ),
                (
                    Weight::Q4K(BlockMatrix::new(&q4, rows, cols).unwrap()),
                    Weight::Q4KPacked(PackedMatrix::new(&p4, rows, cols).unwrap()),
                ),
                (
                    Weight::Q5K(BlockMatrix::new(&q5, rows, cols).unwrap()),
                    Weight::Q5KPacked(PackedMatrix::new(&p5, rows, cols).unwrap()),
                ),
            ];
            let lead = Mats::new(3, cols);
            let lead = lead.weights()[2];
            let x = input(cols);
            let mut xq = QuantizedVector::new();
            xq.quantize_forms(&x, ActForms::ALL).unwrap();
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            for kernel in Kernel::ALL {
                let Some(k) = kernel.dispatch() else { continue };
                for (plain, packed) in pairs {
                    let name = plain.type_name();
                    for hints in [0u8, 1, 2] {
                        #[cfg(target_arch = "x86_64")]
                        crate::quant::dot::x86_64::TO_L2_IN_TESTS
                            .store(hints, std::sync::atomic::Ordering::Relaxed);
                        if hints > 0 && !cfg!(target_arch = "x86_64") {
                            continue;
                        }
                        for stack in [vec![], vec![lead]] {
                            let (mut wp, mut wq) = (stack.clone(), stack);
                            wp.push(plain);
                            wq.push(packed);
                            let total: usize = wp.iter().map(|w| w.rows()).sum();
                            for lo in 0..=total {
                                for hi in lo..=total {
                                    let mut a = vec![f32::NAN; hi - lo];
                                    let mut b = vec![f32::NAN; hi - lo];
                                    stacked_rows_any(k, &wp, &xq, lo..hi, &mut a);
                                    stacked_rows_any(k, &wq, &xq, lo..hi, &mut b);
                                    assert_eq!(
                                        bits(&a),
                                        bits(&b),
                                        "{kernel:?} {name} {nb} {lo}..{hi}"
                                    );
                                }
                            }
                        }
                    }
                    for n in (1..=9).chain([16, 17]) {
                        let xb: Vec<f32> = (0..n)
                            .flat_map(|i| x.iter().map(move |v| v * (i as f32 + 1.0) / 3.0))
                            .collect();
                        let mut xs = QuantizedBatch::new();
                        xs.quantize_forms(&xb, cols, ActForms::ALL).unwrap();
                        let mut a = vec![f32::NAN; n * rows];
                        let mut b = vec![f32::NAN; n * rows];
                        matmul_any_with(k, &plain, &xs, &mut a);
                        matmul_any_with(k, &packed, &xs, &mut b);
                        assert_eq!(bits(&a), bits(&b), "{kernel:?} {name} {nb} batch {n}");
                        b.fill(f32::NAN);
                        matmul_any_rayon(k, &packed, &xs, &mut b);
                        assert_eq!(
                            bits(&a),
                            bits(&b),
                            "{kernel:?} {name} {nb} batch {n}, rayon"
                        );
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            crate::quant::dot::x86_64::TO_L2_IN_TESTS
                .store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A batch quantized without any copy of its blocks (what a model asks
    /// for when no matrix reads them: `Weight::batch_layouts`) gives every
    /// product the bits of one with all of them, on every kernel: the
    /// GEMMs that read a copy fall back to another kernel or make their
    /// form themselves. Q8_0, Q4_0, Q4_K, Q5_K and Q6_K, row-major and
    /// packed, batches of 1 to 19 rows.
    #[cfg_attr(
        miri,
        ignore = "safe code only under Miri (no token, no prefetch), and slow there"
    )]
    #[test]
    fn a_batch_without_its_copies_gives_the_same_bits() {
        use crate::quant::activation::OnCaller;
        use crate::quant::{
            pack_rows8, quantize_row_q4_0, quantize_row_q4_k, quantize_row_q5_k, quantize_row_q6_k,
            quantize_row_q8_0,
        };
        let (rows, cols) = (40, 2 * QK_K);
        let values: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0)
            .collect();
        let q8 = quantize_row_q8_0(&values).unwrap();
        let q40 = quantize_row_q4_0(&values).unwrap();
        let q4 = quantize_row_q4_k(&values).unwrap();
        let q5 = quantize_row_q5_k(&values).unwrap();
        let q6 = quantize_row_q6_k(&values).unwrap();
        let (p40, p4, p5) = (
            pack_rows8(&q40, cols / 32),
            pack_rows8(&q4, cols / QK_K),
            pack_rows8(&q5, cols / QK_K),
        );
        let ws = [
            Weight::Q8_0(Q8Matrix::new(&q8, rows, cols).unwrap()),
            Weight::Q4_0(BlockMatrix::new(&q40, rows, cols).unwrap()),
            Weight::Q4_0Packed(PackedMatrix::new(&p40, rows, cols).unwrap()),
            Weight::Q4K(BlockMatrix::new(&q4, rows, cols).unwrap()),
            Weight::Q4KPacked(PackedMatrix::new(&p4, rows, cols).unwrap()),
            Weight::Q5KPacked(PackedMatrix::new(&p5, rows, cols).unwrap()),
            Weight::Q6K(BlockMatrix::new(&q6, rows, cols).unwrap()),
        ];
        let none = BatchLayouts {
            interleaved: false,
            k_groups: false,
            q4_0_acts: false,
            k_acts: false,
        };
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for n in [1, 4, 8, 9, 19] {
            let xb: Vec<f32> = (0..n * cols)
                .map(|i| ((i * 31 % 97) as f32 - 48.0) / 7.0)
                .collect();
            let (mut all, mut bare) = (QuantizedBatch::new(), QuantizedBatch::new());
            all.quantize_forms(&xb, cols, ActForms::ALL).unwrap();
            bare.quantize_forms_on(&OnCaller, &xb, cols, ActForms::ALL, none)
                .unwrap();
            for kernel in Kernel::ALL {
                let Some(k) = kernel.dispatch() else { continue };
                for w in &ws {
                    let mut a = vec![f32::NAN; n * rows];
                    let mut b = vec![f32::NAN; n * rows];
                    matmul_any_with(k, w, &all, &mut a);
                    matmul_any_with(k, w, &bare, &mut b);
                    assert_eq!(bits(&a), bits(&b), "{kernel:?} {} batch {n}", w.type_name());
                }
            }
        }
    }
}
