//! f32-weight matvec entry points (norm-free projections, tests, and
//! checkpoints stored unquantized).

use rayon::prelude::*;

use super::{expect_len, input_len, output_len, rayon_chunk, F32Matrix, ShapeError};
use crate::pool::ThreadPool;
use crate::quant::dot::selected;

fn check(w: &F32Matrix<'_>, x: &[f32], out: &[f32]) -> Result<(), ShapeError> {
    expect_len(w.cols(), x.len(), input_len)?;
    expect_len(w.rows(), out.len(), output_len)
}

/// `out = W x` on the calling thread for f32 weights. The reference the
/// other f32 variants equal bit for bit.
///
/// ```
/// use inferno_cpu::matvec::{matvec_f32, F32Matrix};
/// let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let mut out = [0.0; 2];
/// matvec_f32(&F32Matrix::new(&w, 2, 3)?, &[1.0, 0.0, -1.0], &mut out)?;
/// assert_eq!(out, [-2.0, -2.0]);
/// # Ok::<(), inferno_cpu::matvec::ShapeError>(())
/// ```
///
/// # Errors
///
/// [`ShapeError::InputLength`] if `x.len() != w.cols()`;
/// [`ShapeError::OutputLength`] if `out.len() != w.rows()`.
pub fn matvec_f32(w: &F32Matrix<'_>, x: &[f32], out: &mut [f32]) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    k.matvec_f32(w.data(), w.cols(), x, out);
    Ok(())
}

/// [`matvec_f32`] on `pool`, rows split statically as
/// [`matvec_q8_0_pool`](super::matvec_q8_0_pool) does. Bit-identical to
/// [`matvec_f32`].
///
/// # Errors
///
/// As [`matvec_f32`].
pub fn matvec_f32_pool(
    pool: &ThreadPool,
    w: &F32Matrix<'_>,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    pool.for_each_chunk_mut(out, |rows, chunk| {
        k.matvec_f32(w.rows_data(rows), w.cols(), x, chunk);
    });
    Ok(())
}

/// [`matvec_f32`] on rayon's current pool. Bit-identical to [`matvec_f32`].
///
/// # Errors
///
/// As [`matvec_f32`].
pub fn matvec_f32_rayon(w: &F32Matrix<'_>, x: &[f32], out: &mut [f32]) -> Result<(), ShapeError> {
    check(w, x, out)?;
    let (_, k) = selected();
    let chunk = rayon_chunk(out.len());
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, part)| {
        let start = i * chunk;
        k.matvec_f32(w.rows_data(start..start + part.len()), w.cols(), x, part);
    });
    Ok(())
}
