//! Q8_0 matvec and matmul entry points.

use rayon::prelude::*;

use super::weight::check_stacked_any;
use super::{expect_len, input_len, output_len, rayon_chunk, Q8Matrix, ShapeError, Weight};
use crate::pool::ThreadPool;
use crate::quant::dot::{selected, Dispatch};
use crate::quant::{QuantizedBatch, QuantizedVector};

/// Batches of at least this many activation rows go to rayon in
/// [`matmul_q8_0_rayon`]; smaller ones run on the calling thread, where a
/// fork-join would cost more than it saves.
pub const MATMUL_PAR_MIN_ROWS: usize = 4;

/// Weight rows per rayon task in [`matmul_q8_0_rayon`]: small enough for
/// work stealing to balance, large enough to amortise a task.
const MATMUL_TASK_ROWS: usize = 16;

/// Checks a single product's shapes: a stack of one matrix.
fn check(w: &Q8Matrix<'_>, x: &QuantizedVector, out: &[f32]) -> Result<(), ShapeError> {
    check_stacked_any(&[Weight::Q8_0(*w)], x, out)
}

/// `out = W x` on the calling thread: `out[r]` is the dot product of row
/// `r` of `w` with `x`. The reference the other variants equal bit for bit.
///
/// # Errors
///
/// [`ShapeError::InputLength`] if `x.cols() != w.cols()`;
/// [`ShapeError::OutputLength`] if `out.len() != w.rows()`.
pub fn matvec_q8_0(
    w: &Q8Matrix<'_>,
    x: &QuantizedVector,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    k.matvec_q8(w.blocks(), w.blocks_per_row(), x.act(), out);
    Ok(())
}

/// [`matvec_q8_0`] on `pool`: the rows are split into one contiguous range
/// per thread ([`split`](crate::split)), and each thread writes its range
/// of `out` directly. Bit-identical to [`matvec_q8_0`] for any pool size.
///
/// # Errors
///
/// As [`matvec_q8_0`].
pub fn matvec_q8_0_pool(
    pool: &ThreadPool,
    w: &Q8Matrix<'_>,
    x: &QuantizedVector,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    super::weight::matvec_pool_stacked(pool, selected().1, &[Weight::Q8_0(*w)], x, out)
}

/// [`matvec_q8_0_pool`] with dynamic scheduling: threads take
/// `chunk_rows`-row pieces from a shared atomic cursor until none is left,
/// so a thread on a busy or slower core takes fewer. Bit-identical to
/// [`matvec_q8_0`]. `chunk_rows == 0` is treated as 1.
///
/// # Errors
///
/// As [`matvec_q8_0`].
pub fn matvec_q8_0_pool_dynamic(
    pool: &ThreadPool,
    w: &Q8Matrix<'_>,
    x: &QuantizedVector,
    out: &mut [f32],
    chunk_rows: usize,
) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    let (nb, act) = (w.blocks_per_row(), x.act());
    pool.for_each_chunk_mut_dynamic(out, chunk_rows, |rows, chunk| {
        k.matvec_q8(w.rows_blocks(rows), nb, act, chunk);
    });
    Ok(())
}

/// [`matvec_q8_0`] on rayon's current pool, one `par_chunks_mut` range of
/// rows per rayon thread. Bit-identical to [`matvec_q8_0`].
///
/// Kept for comparison: for decode-sized matrices the fork-join wake-up
/// costs about as much as the product, which the pool avoids.
///
/// # Errors
///
/// As [`matvec_q8_0`].
pub fn matvec_q8_0_rayon(
    w: &Q8Matrix<'_>,
    x: &QuantizedVector,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    let (nb, act) = (w.blocks_per_row(), x.act());
    let chunk = rayon_chunk(out.len());
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, part)| {
        let start = i * chunk;
        k.matvec_q8(w.rows_blocks(start..start + part.len()), nb, act, part);
    });
    Ok(())
}

fn check_batch(w: &Q8Matrix<'_>, xs: &QuantizedBatch, out: &[f32]) -> Result<(), ShapeError> {
    if xs.rows() > 0 {
        expect_len(w.cols(), xs.cols(), input_len)?;
    }
    let expected = xs
        .rows()
        .checked_mul(w.rows())
        .ok_or(output_len(usize::MAX, out.len()))?;
    expect_len(expected, out.len(), output_len)
}

/// Computes weight rows `r0..r0 + len` against every batch row, writing
/// `segs[i][k] = dot(row r0 + k, batch row i)`, each exactly `dot_q8`'s
/// result.
///
/// The weight rows go in tiles of [`MATMUL_TASK_ROWS`] (a few KiB each, so
/// a tile stays in L1 and is read from memory once); within a tile, four
/// batch rows at a time run against every row of the tile, sharing each
/// weight block's decoding. An activation row is thus read from the outer
/// caches once per tile, not once per weight row: a 128-token batch of
/// 3072-wide rows is over a megabyte, more than L2 holds.
fn matmul_rows(
    k: Dispatch,
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    r0: usize,
    segs: &mut [&mut [f32]],
) {
    let len = segs.first().map_or(0, |s| s.len());
    let m = segs.len();
    // With a kernel that interleaves the batch: eight batch rows per
    // register (`quant::kgroup`); the rest below.
    let grouped = super::weight::gemm_group_rows(k, &Weight::Q8_0(*w), xs, r0, segs);
    for j0 in (0..len).step_by(MATMUL_TASK_ROWS) {
        let tile = j0..len.min(j0 + MATMUL_TASK_ROWS);
        let mut i = grouped;
        while i + 4 <= m {
            let x = [0, 1, 2, 3].map(|t| xs.act_row(i + t));
            let pairs = [0, 1, 2, 3].map(|t| xs.pair_row(i + t));
            if let [Some(a), Some(b), Some(c), Some(d)] = pairs {
                // Two weight rows at a time share each activation load.
                let mut j = tile.start;
                while j + 2 <= tile.end {
                    let y = k.dot_q8_2x4_pairs([w.row(r0 + j), w.row(r0 + j + 1)], [a, b, c, d], x);
                    for (r, yr) in y.into_iter().enumerate() {
                        for (t, v) in yr.into_iter().enumerate() {
                            segs[i + t][j + r] = v;
                        }
                    }
                    j += 2;
                }
                if j < tile.end {
                    let y = k.dot_q8_x4_pairs(w.row(r0 + j), [a, b, c, d], x);
                    for (t, v) in y.into_iter().enumerate() {
                        segs[i + t][j] = v;
                    }
                }
            } else {
                for j in tile.clone() {
                    for (t, y) in k.dot_q8_x4(w.row(r0 + j), x).into_iter().enumerate() {
                        segs[i + t][j] = y;
                    }
                }
            }
            i += 4;
        }
        for (t, seg) in segs[i..].iter_mut().enumerate() {
            let x = xs.act_row(i + t);
            for j in tile.clone() {
                seg[j] = k.dot_q8(w.row(r0 + j), x);
            }
        }
    }
}

/// `out = X W^T` on the calling thread, for a batch `X` of `m` activation
/// rows: `out[i * w.rows() + r]` is the dot product of weight row `r` with
/// batch row `i` (so output row `i` equals [`matvec_q8_0`] of batch row
/// `i`, bit for bit, NaN payloads aside). Weight rows are read from memory once for the whole
/// batch, a cache-sized tile at a time.
///
/// # Errors
///
/// [`ShapeError::InputLength`] if the batch is not empty and
/// `xs.cols() != w.cols()`; [`ShapeError::OutputLength`] if
/// `out.len() != xs.rows() * w.rows()`.
pub fn matmul_q8_0(
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check_batch(w, xs, out)?;
    if w.rows() == 0 {
        return Ok(());
    }
    matmul_q8_0_with(selected().1, w, xs, out);
    Ok(())
}

/// [`matmul_q8_0`] with kernel `k`, after the caller checked the shapes
/// (the serial backends pick their kernel themselves).
pub(crate) fn matmul_q8_0_with(
    k: Dispatch,
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) {
    if w.rows() == 0 {
        return;
    }
    let mut segs: Vec<&mut [f32]> = out.chunks_mut(w.rows()).collect();
    matmul_rows(k, w, xs, 0, &mut segs);
}

/// [`matmul_q8_0`] for prefill: with at least [`MATMUL_PAR_MIN_ROWS`]
/// batch rows, rayon tasks of 64 weight rows each compute those rows for
/// the whole batch (work stealing balances them); smaller batches run on
/// the calling thread. Bit-identical to [`matmul_q8_0`].
///
/// # Errors
///
/// As [`matmul_q8_0`].
pub fn matmul_q8_0_rayon(
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) -> Result<(), ShapeError> {
    if xs.rows() < MATMUL_PAR_MIN_ROWS {
        return matmul_q8_0(w, xs, out);
    }
    check_batch(w, xs, out)?;
    matmul_q8_0_rayon_with(selected().1, w, xs, out);
    Ok(())
}

/// [`matmul_q8_0_rayon`] with kernel `k`, shapes checked by the caller
/// (a batch of any size: the tasks split the weight rows).
pub(crate) fn matmul_q8_0_rayon_with(
    k: Dispatch,
    w: &Q8Matrix<'_>,
    xs: &QuantizedBatch,
    out: &mut [f32],
) {
    let rows = w.rows();
    if rows == 0 {
        return;
    }
    // tasks[t][i] is output row i's slice of weight rows t*64..t*64+64.
    let task_rows = super::weight::TASK_ROWS;
    let mut tasks: Vec<Vec<&mut [f32]>> = (0..rows.div_ceil(task_rows))
        .map(|_| Vec::with_capacity(xs.rows()))
        .collect();
    for out_row in out.chunks_mut(rows) {
        for (task, seg) in tasks.iter_mut().zip(out_row.chunks_mut(task_rows)) {
            task.push(seg);
        }
    }
    tasks
        .into_par_iter()
        .enumerate()
        .for_each(|(t, mut segs)| matmul_rows(k, w, xs, t * task_rows, &mut segs));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::quantize_row_q8_0;

    fn fixture(rows: usize, cols: usize) -> (Vec<crate::BlockQ8_0>, QuantizedVector) {
        let wf: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01)
            .collect();
        let mut x = QuantizedVector::new();
        let xf: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.3).sin()).collect();
        x.quantize_from(&xf).unwrap();
        (quantize_row_q8_0(&wf).unwrap(), x)
    }

    #[test]
    fn shape_errors() {
        let (blocks, x) = fixture(3, 64);
        let w = Q8Matrix::new(&blocks, 3, 64).unwrap();
        assert_eq!(
            matvec_q8_0(&w, &x, &mut [0.0; 2]),
            Err(ShapeError::OutputLength {
                expected: 3,
                got: 2
            })
        );
        let mut short = QuantizedVector::new();
        short.quantize_from(&[0.0; 32]).unwrap();
        assert_eq!(
            matvec_q8_0_rayon(&w, &short, &mut [0.0; 3]),
            Err(ShapeError::InputLength {
                expected: 64,
                got: 32
            })
        );
        let mut xs = QuantizedBatch::new();
        xs.quantize_from(&[0.0; 5 * 64], 64).unwrap();
        assert_eq!(
            matmul_q8_0_rayon(&w, &xs, &mut [0.0; 14]),
            Err(ShapeError::OutputLength {
                expected: 15,
                got: 14
            })
        );
    }

    #[test]
    #[cfg(not(feature = "loom"))] // the pool runs on loom's scheduler under `loom`
    fn pooled_variants_match_direct_dots() {
        let (rows, cols) = (37, 96);
        let (blocks, x) = fixture(rows, cols);
        let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
        let mut single = vec![0.0; rows];
        matvec_q8_0(&w, &x, &mut single).unwrap();
        let (kernel, _) = selected();
        for (r, &o) in single.iter().enumerate() {
            assert_eq!(
                o.to_bits(),
                kernel.dot_q8_0(w.row(r), &x).unwrap().to_bits()
            );
        }
        let pool = ThreadPool::new(3).unwrap();
        let mut other = vec![f32::NAN; rows];
        matvec_q8_0_pool(&pool, &w, &x, &mut other).unwrap();
        assert_eq!(bits(&single), bits(&other));
        other.fill(f32::NAN);
        matvec_q8_0_pool_dynamic(&pool, &w, &x, &mut other, 5).unwrap();
        assert_eq!(bits(&single), bits(&other));
    }

    #[test]
    #[cfg_attr(miri, ignore = "rayon's epoch GC needs exposed provenance")]
    fn rayon_matches_single() {
        let (rows, cols) = (37, 96);
        let (blocks, x) = fixture(rows, cols);
        let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
        let mut single = vec![0.0; rows];
        matvec_q8_0(&w, &x, &mut single).unwrap();
        let mut other = vec![f32::NAN; rows];
        matvec_q8_0_rayon(&w, &x, &mut other).unwrap();
        assert_eq!(bits(&single), bits(&other));
    }

    #[test]
    #[cfg_attr(miri, ignore = "rayon's epoch GC needs exposed provenance")]
    fn matmul_rows_equal_matvecs() {
        // An even and an odd number of blocks per row; batches below,
        // at and past the four rows the AVX2 kernel takes at once.
        for (rows, cols) in [(41, 64), (9, 96)] {
            matmul_rows_equal_matvecs_at(rows, cols);
        }
    }

    fn matmul_rows_equal_matvecs_at(rows: usize, cols: usize) {
        let (blocks, _) = fixture(rows, cols);
        let w = Q8Matrix::new(&blocks, rows, cols).unwrap();
        for m in [0, 1, 3, 4, 7, 9] {
            let xf: Vec<f32> = (0..m * cols).map(|i| (i as f32 * 0.7).cos()).collect();
            let mut xs = QuantizedBatch::new();
            xs.quantize_from(&xf, cols).unwrap();
            let mut out = vec![f32::NAN; m * rows];
            matmul_q8_0_rayon(&w, &xs, &mut out).unwrap();
            let mut seq = vec![f32::NAN; m * rows];
            matmul_q8_0(&w, &xs, &mut seq).unwrap();
            assert_eq!(bits(&out), bits(&seq));
            for i in 0..m {
                let mut x = QuantizedVector::new();
                x.quantize_from(&xf[i * cols..(i + 1) * cols]).unwrap();
                let mut one = vec![0.0; rows];
                matvec_q8_0(&w, &x, &mut one).unwrap();
                assert_eq!(bits(&one), bits(&out[i * rows..(i + 1) * rows]));
            }
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }
}
